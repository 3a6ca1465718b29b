package objstore_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
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
				client0 := clientCPU(b)
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
				reportClientCPU(b, client0, n)
			})
		}
		srv.Stop()
	}
}

// BenchmarkS3PutChecksums measures the client's cost of one WAL-sized PUT
// and one ranged GET (what a follower reads) with the SDK's checksums
// (default) and without (Config.OwnChecksums, as the WAL's stores run):
// compare ns/op and allocs/op of the two in one run.
func BenchmarkS3PutChecksums(b *testing.B) {
	srv := s3server.Start(b, bucket)
	for _, own := range []bool{false, true} {
		st := newStore(b, srv, func(c *objstore.Config) { c.OwnChecksums = own })
		name := "sdk"
		if own {
			name = "own"
		}
		b.Run(name, func(b *testing.B) {
			data := make([]byte, 90<<10)
			ctx := context.Background()
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			client0 := clientCPU(b)
			n := 0
			for i := 0; b.Loop(); i++ {
				n++
				key := fmt.Sprintf("bench/%s/%d", name, i)
				if err := st.Put(ctx, key, data); err != nil {
					b.Fatal(err)
				}
				if _, err := st.Get(ctx, key, 1000, 30<<10); err != nil {
					b.Fatal(err)
				}
			}
			reportClientCPU(b, client0, n)
		})
	}
}

// clientCPU is this process's CPU time (user + system): the client's side
// of the requests (the SDK, net/http, the Go runtime) without the gateway,
// which runs as its own process. Unlike ns/op it hardly depends on what
// else the machine runs.
func clientCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportClientCPU reports the client's CPU per operation since start.
func reportClientCPU(b *testing.B, start time.Duration, n int) {
	b.ReportMetric(float64(clientCPU(b)-start)/float64(time.Millisecond)/float64(n), "client-cpu-ms/op")
}
