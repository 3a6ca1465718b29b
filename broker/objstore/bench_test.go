package objstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// BenchmarkS3PutGet measures one PUT, one whole-object GET and one DELETE of a
// WAL-sized object against the real S3 test server (Versity Gateway), in
// the gateway setups strata dev and strata bench can use. It is the
// baseline the injected S3 Express latencies are added to.
func BenchmarkS3PutGet(b *testing.B) {
	setups := []struct {
		name string
		opts s3server.Options
	}{
		{"default", s3server.Options{}},
		{"iobuf64k", s3server.Options{Args: []string{"--io-buffer-size", "65536"}}},
		{"iobuf64k-xattr", s3server.Options{Args: []string{"--io-buffer-size", "65536"}, XAttrMeta: true}},
	}
	for _, su := range setups {
		srv := s3server.StartWith(b, su.opts, bucket)
		st := newStore(b, srv, nil)
		for _, size := range []int{8 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", su.name, size>>10), func(b *testing.B) {
				data := make([]byte, size)
				ctx := context.Background()
				b.SetBytes(int64(size))
				cpu0 := srv.CPUTime()
				n := 0
				for i := 0; b.Loop(); i++ {
					n++
					key := fmt.Sprintf("bench/%d", i)
					if err := st.Put(ctx, key, data); err != nil {
						b.Fatal(err)
					}
					if _, err := st.Get(ctx, key, 0, -1); err != nil {
						b.Fatal(err)
					}
					if err := st.Delete(ctx, key); err != nil {
						b.Fatal(err)
					}
				}
				// The gateway's CPU per PUT+GET+DELETE: on a small machine
				// it, not the broker, bounds the WAL object rate.
				b.ReportMetric(float64(srv.CPUTime()-cpu0)/float64(time.Millisecond)/float64(n), "gw-cpu-ms/op")
			})
		}
		srv.Stop()
	}
}
