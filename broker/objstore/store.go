package objstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned (wrapped) when an object or bucket does not exist.
var ErrNotFound = errors.New("object not found")

// ErrAccessDenied is returned (wrapped) when the store rejects the
// credentials or their permissions.
var ErrAccessDenied = errors.New("credentials rejected by the object store")

// ErrInjected is the error the Faulty wrapper returns for injected failures.
var ErrInjected = errors.New("injected object store failure")

// Store is one bucket of an object store. Implementations are safe for
// concurrent use.
type Store interface {
	// Bucket names the bucket the store reads and writes.
	Bucket() string
	// Put writes data as key, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// Get reads length bytes of key from offset; length < 0 reads to the
	// end. A range past the end of the object returns what exists.
	Get(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// Head returns an object's size and modification time.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every object whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// BatchDeleter is implemented by stores that delete many objects in one
// request (S3 DeleteObjects). Use DeleteAll rather than calling it.
type BatchDeleter interface {
	// DeleteMany removes keys (at most MaxDeleteBatch); missing keys are
	// not an error. The error names the keys that were not deleted.
	DeleteMany(ctx context.Context, keys []string) error
}

// MaxDeleteBatch is the most keys one S3 DeleteObjects request takes.
const MaxDeleteBatch = 1000

// DeleteAll removes keys with as few requests as the store allows: batches
// of MaxDeleteBatch on a BatchDeleter, one Delete per key otherwise. It
// tries every key and returns the errors joined.
func DeleteAll(ctx context.Context, st Store, keys []string) error {
	var errs []error
	if bd, ok := st.(BatchDeleter); ok {
		for len(keys) > 0 {
			n := min(len(keys), MaxDeleteBatch)
			if err := bd.DeleteMany(ctx, keys[:n]); err != nil {
				errs = append(errs, err)
			}
			keys = keys[n:]
		}
		return errors.Join(errs...)
	}
	for _, k := range keys {
		if err := st.Delete(ctx, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// Op names a store operation in metrics.
type Op string

// Operations reported to an Observer.
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpHead   Op = "head"
	OpDelete Op = "delete"
	// OpDeleteMany is one request deleting many objects.
	OpDeleteMany Op = "delete_many"
	OpList       Op = "list"
)

// Observer is told about every store call once it finished: bytes is the
// payload written (Put) or read (Get), 0 otherwise; err is the call's error.
// It must be cheap and safe for concurrent use.
type Observer interface {
	ObserveCall(op Op, bucket, zone string, bytes int64, elapsed time.Duration, err error)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(op Op, bucket, zone string, bytes int64, elapsed time.Duration, err error)

// ObserveCall calls f.
func (f ObserverFunc) ObserveCall(op Op, bucket, zone string, bytes int64, elapsed time.Duration, err error) {
	f(op, bucket, zone, bytes, elapsed, err)
}

type nopObserver struct{}

func (nopObserver) ObserveCall(Op, string, string, int64, time.Duration, error) {}
