package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// ErrExists is returned (wrapped) by PutIfAbsent when the key is taken.
var ErrExists = errors.New("object already exists")

// ConditionalPutter is implemented by stores that create an object only
// if its key is free (S3 conditional writes, If-None-Match: *). The slow
// tier writes its manifests with it so that two writers of the same
// version never overwrite each other. Use PutIfAbsent rather than calling
// it.
type ConditionalPutter interface {
	PutIfAbsent(ctx context.Context, key string, data []byte) error
}

// PutIfAbsent writes data as key unless an object is there (ErrExists).
// On a store without conditional writes it checks with Head first, which
// narrows the race to the gap between the two calls; callers that need
// more must make their keys unique to the writer.
func PutIfAbsent(ctx context.Context, st Store, key string, data []byte) error {
	if cp, ok := st.(ConditionalPutter); ok {
		return cp.PutIfAbsent(ctx, key, data)
	}
	if _, err := st.Head(ctx, key); err == nil {
		return fmt.Errorf("objstore: put %s: %w", key, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	return st.Put(ctx, key, data)
}

// PutIfAbsent implements ConditionalPutter with If-None-Match: * (S3 and
// Versity Gateway answer 412 Precondition Failed for a taken key).
func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) (err error) {
	start := time.Now()
	defer func() { s.observe(OpPut, start, int64(len(data)), err) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		IfNoneMatch:   aws.String("*"),
	})
	if isPreconditionFailed(err) {
		return fmt.Errorf("objstore: put s3://%s/%s: %w", s.cfg.Bucket, key, ErrExists)
	}
	return s.wrap("put", key, err)
}

func isPreconditionFailed(err error) bool {
	if err == nil {
		return false
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "PreconditionFailed" || apiErr.ErrorCode() == "ConditionalRequestConflict") {
		return true
	}
	var respErr *awshttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusPreconditionFailed
}

// PutIfAbsent implements ConditionalPutter.
func (m *Mem) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		return fmt.Errorf("objstore: put mem://%s/%s: %w", m.bucket, key, ErrExists)
	}
	m.objs[key] = memObject{data: append([]byte(nil), data...), modified: time.Now()}
	return nil
}

// PutIfAbsent implements ConditionalPutter (failures and latency as Put).
func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	start := time.Now()
	if err := f.enter(ctx, OpPut); err != nil {
		return f.after(ctx, OpPut, start, err)
	}
	return f.after(ctx, OpPut, start, PutIfAbsent(ctx, f.inner, key, data))
}
