package netem

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Dialer opens connections and wraps those that cross the emulated link.
type Dialer struct {
	// Latency is the one-way delay on each direction of a wrapped
	// connection (a round trip pays it twice).
	Latency time.Duration
	// Dial opens the connection (nil: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Remote reports whether addr is across the link; nil: every address
	// is. An error fails the dial.
	Remote func(ctx context.Context, addr string) (bool, error)
	// Stats, when set, counts the wrapped connections and delayed bytes.
	Stats *Stats
}

// DialContext dials addr and wraps the connection when it crosses the link.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	remote := true
	if d.Remote != nil {
		var err error
		if remote, err = d.Remote(ctx, addr); err != nil {
			return nil, fmt.Errorf("netem: dial %s: %w", addr, err)
		}
	}
	dial := d.Dial
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	c, err := dial(ctx, network, addr)
	if err != nil || !remote {
		return c, err
	}
	return Wrap(c, d.Latency, d.Stats), nil
}
