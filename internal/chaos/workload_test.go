package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorKind(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{kerr.NotLeaderForPartition, "produce:NOT_LEADER_FOR_PARTITION"},
		{fmt.Errorf("producer ID has a fatal, unrecoverable error, err: %w", kerr.NotLeaderForPartition), "produce:NOT_LEADER_FOR_PARTITION"},
		{fmt.Errorf("producer ID has a fatal, unrecoverable error, err: %w", fmt.Errorf("load: %w", io.ErrUnexpectedEOF)),
			"produce:producer ID has a fatal, unrecoverable e (unexpected EOF)"},
		{errors.New("broker closed the connection immediately after a request was issued"), "produce:broker closed the connection immediately"},
		{context.DeadlineExceeded, "produce:TIMEOUT"},
	}
	for _, tc := range tests {
		if got := errorKind("produce:", tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
