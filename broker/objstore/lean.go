package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// attemptTimeout bounds one HTTP attempt with a context deadline. It sits
// last in the Deserialize step, which every attempt of the SDK's retry
// loop (Finalize step) passes through, so it cuts an attempt, not the
// call. It replaces http.Client.Timeout: the SDK wraps its transport in a
// type net/http does not know, so a client timeout costs a goroutine, a
// timer and two channels per request (net/http's setRequestCancel).
type attemptTimeout struct{ d time.Duration }

func (*attemptTimeout) ID() string { return "StrataAttemptTimeout" }

func (m *attemptTimeout) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	out middleware.DeserializeOutput, md middleware.Metadata, err error,
) {
	actx, cancel := context.WithTimeout(ctx, m.d)
	out, md, err = next.HandleDeserialize(actx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.Body == nil {
		cancel()
		if err != nil && errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			// The SDK turns any error under a done context into a
			// CanceledError, which its retryer never retries; this
			// attempt's own deadline is a timeout, retried like one.
			err = &AttemptTimeoutError{After: m.d, Err: err}
		}
		return out, md, err
	}
	// The deadline also covers reading the body (as http.Client.Timeout
	// did); closing it, or reading it to the end, releases the timer.
	resp.Body = &cancelOnCloseBody{ReadCloser: resp.Body, cancel: cancel, d: m.d, ctx: actx, parent: ctx}
	return out, md, nil
}

// AttemptTimeoutError is one attempt cut by Config.AttemptTimeout. The
// SDK's retryer retries it (Timeout); errors.Is matches
// context.DeadlineExceeded, as net/http's client timeout did.
type AttemptTimeoutError struct {
	After time.Duration
	Err   error
}

func (e *AttemptTimeoutError) Error() string {
	return fmt.Sprintf("attempt timed out after %v: %v", e.After, e.Err)
}

// Unwrap does not return Err: it holds the SDK's CanceledError, which
// would make the retryer give up.
func (e *AttemptTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// Timeout marks the error retryable (retry.RetryableConnectionError) and
// charges the retry quota as a timeout.
func (e *AttemptTimeoutError) Timeout() bool { return true }

// cancelOnCloseBody releases an attempt's deadline once its response body
// is read to the end or closed.
type cancelOnCloseBody struct {
	io.ReadCloser
	cancel      context.CancelFunc
	d           time.Duration
	ctx, parent context.Context
}

func (b *cancelOnCloseBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.cancel()
	case err != nil && errors.Is(b.ctx.Err(), context.DeadlineExceeded) && b.parent.Err() == nil:
		err = &AttemptTimeoutError{After: b.d, Err: err}
	}
	return n, err
}

func (b *cancelOnCloseBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// leanStack trims what a WAL store's (Config.OwnChecksums) calls do per
// request, keeping retries, signing, endpoint resolution (S3 Express
// session auth included), clock skew correction and error handling:
//
//   - PutObject sends UNSIGNED-PAYLOAD instead of the body's SHA-256 over
//     plain http (over https the SDK already does): the object's own
//     CRC-32Cs cover the payload, the signature still covers the request.
//   - The Build step's telemetry goes: the invocation ID header (a random
//     UUID per call), the SDK's User-Agent string built per request and
//     the checksum-setting features it records. Requests carry Go's
//     default User-Agent instead.
func leanStack(stack *middleware.Stack) error {
	if stack.ID() == "PutObject" {
		if err := v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware(stack); err != nil {
			return fmt.Errorf("objstore: unsigned payload: %w", err)
		}
	}
	for _, id := range leanRemoved {
		if _, ok := stack.Build.Get(id); !ok {
			continue // not this operation's (Remove would build an error)
		}
		if _, err := stack.Build.Remove(id); err != nil {
			return fmt.Errorf("objstore: remove %s: %w", id, err)
		}
	}
	return nil
}

// leanRemoved are the Build-step middlewares leanStack removes where the
// operation has them.
var leanRemoved = []string{
	"ClientRequestID",
	"UserAgent",
	"AWSChecksum:RequestMetricsTracking",
	"AWSChecksum:ResponseMetricsTracking",
}
