package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
)

// logErrorCode maps the idempotent-producer errors of broker/log.
// log.ErrDuplicateSequence is not an error for the client (Partition.Append
// turns it into success with the original offsets).
func logErrorCode(err error) (int16, bool) {
	switch {
	case errors.Is(err, log.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code, true
	case errors.Is(err, log.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code, true
	case errors.Is(err, log.ErrDuplicateSequence):
		return kerr.DuplicateSequenceNumber.Code, true
	case errors.Is(err, log.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code, true
	case errors.Is(err, log.ErrCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code, true
	}
	return 0, false
}
