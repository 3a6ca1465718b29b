package objstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// TestS3PutRacingPrefixDeletion: Versity Gateway (posix backend) removes a
// key's empty parent directories on delete, so a PUT under the same prefix
// at that moment gets 409 ExistingObjectIsDirectory — the WAL does exactly
// this (uploads and deletions of wal/<cluster>/<zone>/<broker>/<inc>/...).
// The client retries it; no PUT may fail.
func TestS3PutRacingPrefixDeletion(t *testing.T) {
	srv := s3server.Start(t, bucket)
	st := newStore(t, srv, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				k := fmt.Sprintf("wal/c/z/%d/1/%020d", w, i)
				if err := st.Put(ctx, k, []byte("x")); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				if err := st.Delete(ctx, k); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of 1,200 requests failed, first: %v", len(errs), errs[0])
	}
}
