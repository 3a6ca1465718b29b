package objstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// BenchmarkS3PutGet measures one PUT and one whole-object GET of a
// WAL-sized object against the real S3 test server (Versity Gateway), in
// the gateway setups strata dev and strata bench can use. It is the
// baseline the injected S3 Express latencies are added to.
func BenchmarkS3PutGet(b *testing.B) {
	setups := []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"iobuf64k", []string{"--io-buffer-size", "65536"}},
	}
	for _, su := range setups {
		srv := s3server.StartWith(b, s3server.Options{Args: su.args}, bucket)
		st := newStore(b, srv, nil)
		for _, size := range []int{8 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", su.name, size>>10), func(b *testing.B) {
				data := make([]byte, size)
				ctx := context.Background()
				b.SetBytes(int64(size))
				for i := 0; b.Loop(); i++ {
					key := fmt.Sprintf("bench/%d", i)
					if err := st.Put(ctx, key, data); err != nil {
						b.Fatal(err)
					}
					if _, err := st.Get(ctx, key, 0, -1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		srv.Stop()
	}
}
