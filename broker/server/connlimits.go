package server

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/strata-dev/strata/broker/protocol"
)

// ConnectionLimits are the broker's connection limits (protocol's
// connlimits.go says what each does). Zero values mean the defaults.
type ConnectionLimits struct {
	// MaxConnections is max.connections (0: protocol.DefaultMaxConnections).
	MaxConnections int
	// PerListener is listener.name.<l>.max.connections, by lower-case
	// listener name.
	PerListener map[string]int
	// PerIP is max.connections.per.ip (0:
	// protocol.DefaultMaxConnectionsPerIP) and PerIPOverrides
	// max.connections.per.ip.overrides, by address.
	PerIP          int
	PerIPOverrides map[string]int
	// CreationRate is max.connection.creation.rate and CreationRatePerIP
	// max.connection.creation.rate.per.ip, connections per second (0:
	// unlimited).
	CreationRate      float64
	CreationRatePerIP float64
	// AuthenticationTimeout is connections.authentication.timeout.ms (0:
	// protocol.DefaultAuthenticationTimeout).
	AuthenticationTimeout time.Duration
}

// applyConnLimitSetting applies a connection limit key; known is false
// for other keys.
func applyConnLimitSetting(c *ConnectionLimits, k, v string) (known bool, err error) {
	positive := func() (int, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("want a positive int32")
		}
		return int(n), nil
	}
	if rest, ok := strings.CutPrefix(strings.ToLower(k), "listener.name."); ok {
		name, ok := strings.CutSuffix(rest, ".max.connections")
		if !ok || name == "" || strings.Contains(name, ".") {
			return false, nil
		}
		n, err := positive()
		if err != nil {
			return true, err
		}
		if c.PerListener == nil {
			c.PerListener = map[string]int{}
		}
		c.PerListener[name] = n
		return true, nil
	}
	switch k {
	case "max.connections":
		c.MaxConnections, err = positive()
	case "max.connections.per.ip":
		c.PerIP, err = positive()
	case "max.connections.per.ip.overrides":
		c.PerIPOverrides, err = parseIPOverrides(v)
	case "max.connection.creation.rate", "max.connection.creation.rate.per.ip":
		f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if perr != nil || !(f > 0) || math.IsInf(f, 0) {
			return true, fmt.Errorf("want a positive number of connections per second")
		}
		if k == "max.connection.creation.rate" {
			c.CreationRate = f
		} else {
			c.CreationRatePerIP = f
		}
	case "connections.authentication.timeout.ms":
		n, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if perr != nil || n < 100 || n > int64(time.Hour/time.Millisecond) {
			return true, fmt.Errorf("want milliseconds from 100 to 3600000")
		}
		c.AuthenticationTimeout = time.Duration(n) * time.Millisecond
	default:
		return false, nil
	}
	return true, err
}

// parseIPOverrides parses max.connections.per.ip.overrides: a comma
// separated list of address:limit (an IPv6 address is split at its last
// colon), limits >= 0 (0: no connection from that address). Kafka also
// takes host names; the broker resolves none (a name's addresses change),
// so they are refused.
func parseIPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i < 0 {
			return nil, fmt.Errorf("want address:limit entries, got %q", e)
		}
		ip, ok := protocol.CanonicalIP(strings.Trim(strings.TrimSpace(e[:i]), "[]"))
		if !ok {
			return nil, fmt.Errorf("%q is not an IP address (host names are not resolved)", e[:i])
		}
		n, err := strconv.ParseInt(strings.TrimSpace(e[i+1:]), 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("want a limit >= 0 in %q", e)
		}
		out[ip] = int(n)
	}
	return out, nil
}

// checkListeners refuses a listener.name.<l>.max.connections of a
// listener the broker does not have (a typo would leave the listener
// unlimited without a word).
func (c ConnectionLimits) checkListeners(ls []resolvedListener) error {
	for name := range c.PerListener {
		found := false
		for _, l := range ls {
			found = found || strings.EqualFold(l.Name, name)
		}
		if !found {
			return fmt.Errorf("listener.name.%s.max.connections: the broker has no listener %s", name, strings.ToUpper(name))
		}
	}
	return nil
}

// protocolConfig sets the connection limits of a protocol server config;
// interBroker is the inter-broker listener's name.
func (c ConnectionLimits) protocolConfig(pc *protocol.Config, interBroker string) {
	pc.MaxConnections = c.MaxConnections
	pc.MaxConnectionsPerListener = c.PerListener
	pc.MaxConnectionsPerIP = c.PerIP
	pc.MaxConnectionsPerIPOverrides = c.PerIPOverrides
	pc.MaxConnectionCreationRate = c.CreationRate
	pc.MaxConnectionCreationRatePerIP = c.CreationRatePerIP
	pc.AuthenticationTimeout = c.AuthenticationTimeout
	pc.InterBrokerListener = interBroker
}
