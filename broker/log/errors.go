package log

import (
	"errors"
	"fmt"
)

var (
	// ErrOffsetOutOfRange: a read below the log start or above the log end
	// offset (OFFSET_OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrNonContiguous: a follower append does not start at the log end
	// offset or its batches leave gaps.
	ErrNonContiguous = errors.New("batches do not continue the log")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("log closed")
	// ErrLogFailed: an earlier write failed and the log could not restore
	// a consistent state; it refuses writes until reopened (KAFKA_STORAGE_ERROR).
	ErrLogFailed = errors.New("log failed, reopen to recover")
)

// CorruptionError reports data the log cannot repair by truncating a torn
// tail: a damaged batch in a segment other than the last, or a broken
// checkpoint file. Offset is the byte position in File (-1 when unknown).
type CorruptionError struct {
	File   string
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corrupt log file %s at byte %d: %v", e.File, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
