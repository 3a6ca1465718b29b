package broker

import (
	"errors"
	"os"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
)

// ErrorCode maps an error returned by this package (or by broker/log and
// broker/record) to a Kafka error code. nil maps to 0.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return ke.Code
	case errors.Is(err, record.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, record.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, record.ErrTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, record.ErrUnsupportedMagic):
		return kerr.UnsupportedForMessageFormat.Code
	case errors.Is(err, record.ErrUnsupportedCodec):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, log.ErrClosed):
		// The partition was deleted or the broker is stopping: the client
		// refreshes its metadata and retries.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, log.ErrLogFailed), errors.As(err, new(*os.PathError)):
		// A write or fsync of the data directory failed (disk full, I/O
		// error): retriable, the broker stops and another replica leads.
		return kerr.KafkaStorageError.Code
	}
	if code, ok := logErrorCode(err); ok {
		return code
	}
	return kerr.UnknownServerError.Code
}

// ErrorMessage is the message to put in a response's ErrorMessage field:
// the error text for errors that carry detail, nil for none.
func ErrorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
