package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPortBelowTheEphemeralRange: the ports are free, and below the range
// the kernel takes outgoing connections' local ports from.
func TestPortBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralLow()
	for range 50 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if high-lowest >= 1000 && (p < lowest || p >= high) {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, high)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
