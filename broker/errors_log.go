package broker

// logErrorCode maps errors of broker/log that are not covered by
// ErrorCode's table.
func logErrorCode(error) (int16, bool) { return 0, false }
