package protocol

import (
	"net"
	"strings"
	"time"
)

// Connection limits, as Kafka has them (KIP-308, KIP-402, KIP-612), checked
// when a connection is accepted; a connection over any of them is closed
// at once and counted by the Observer (ConnLimitObserver) with its
// listener and the limit's key:
//
//   - max.connections: open connections of every listener together. The
//     inter-broker listener keeps reserved slots (reservedInterBroker): the
//     other listeners are refused reservedInterBroker slots earlier, so
//     clients that fill the broker do not starve replication. (Kafka lets
//     inter-broker connections in over the limit and closes another
//     listener's least recently used one instead; a reserve gives the same
//     promise without closing a client's connection.)
//   - listener.name.<listener>.max.connections: open connections of one
//     listener.
//   - max.connections.per.ip, and max.connections.per.ip.overrides for
//     single addresses (NAT gateways, load balancers): open connections
//     from one client address.
//   - max.connection.creation.rate (every listener but the inter-broker
//     one) and max.connection.creation.rate.per.ip: new connections per
//     second, with a burst of one second's worth. KIP-612's client quota
//     connection_creation_rate (an ip entity of AlterClientQuotas: one
//     address, or the default for every address) replaces the per-IP key
//     where it is set (Config.IPConnectionCreationRate); 0 refuses the
//     address's new connections; it does not apply to the inter-broker
//     listener. Kafka delays accepts over
//     the broker rate and closes connections over the per-IP quota;
//     closing both keeps one slow path out of the accept loop.
//
// And after accept, connections.authentication.timeout.ms: a connection
// must finish its TLS handshake and SASL authentication (SASL listeners),
// or send its first complete request (other listeners), within it, or it
// is closed. An idle socket holds a slot for that long, not for
// connections.max.idle.ms.

// Reasons a connection is refused or closed early (label values of
// strata_connections_refused_total: the limit's config key).
const (
	RefusedMaxConnections             = "max.connections"
	RefusedMaxConnectionsPerListener  = "listener.name.max.connections"
	RefusedMaxConnectionsPerIP        = "max.connections.per.ip"
	RefusedMaxConnectionCreationRate  = "max.connection.creation.rate"
	RefusedMaxConnectionCreationPerIP = "max.connection.creation.rate.per.ip"
	RefusedConnectionCreationQuota    = "connection_creation_rate"
	ClosedAuthenticationTimeout       = "connections.authentication.timeout.ms"
)

// DefaultMaxConnections is the default of max.connections. Kafka's default
// is unlimited; every connection costs goroutines and buffers, and the
// broker must stay up when a client opens connections in a loop.
const DefaultMaxConnections = 10_000

// DefaultMaxConnectionsPerIP is the default of max.connections.per.ip.
// Kafka's default is unlimited, which let one host take every slot (issue
// 26 item 2: 300 idle sockets locked an admin out). A tenth of
// max.connections: clients behind one NAT address that need more get an
// override (max.connections.per.ip.overrides).
const DefaultMaxConnectionsPerIP = 1_000

// DefaultAuthenticationTimeout is the default of
// connections.authentication.timeout.ms. A client's TLS handshake and
// SCRAM exchange take a few round trips; a socket that sends nothing was
// kept for 30 s, then for connections.max.idle.ms on listeners without
// SASL.
const DefaultAuthenticationTimeout = 10 * time.Second

// maxReservedInterBroker caps the inter-broker reserve: brokers open a few
// connections to each other (replica fetchers, transaction markers,
// controller requests), so a hundred serve a large cluster.
const maxReservedInterBroker = 100

// ConnLimitObserver is implemented by an Observer that counts connections
// refused at accept or closed by connections.authentication.timeout.ms.
type ConnLimitObserver interface {
	ConnRefused(listener, reason string)
}

// reservedInterBroker is how many slots of max.connections only the
// inter-broker listener may take: a tenth, at least 1, at most
// maxReservedInterBroker; none without an inter-broker listener.
func (s *Server) reservedInterBroker() int {
	if s.cfg.InterBrokerListener == "" {
		return 0
	}
	return min(max(s.cfg.MaxConnections/10, 1), maxReservedInterBroker)
}

func (s *Server) isInterBroker(listener string) bool {
	return s.cfg.InterBrokerListener != "" && strings.EqualFold(listener, s.cfg.InterBrokerListener)
}

// admitConnLocked counts a new connection from remote on listener against
// the limits and returns the limit it breaks ("" when admitted). An
// admitted connection is released with releaseConnLocked. s.mu must be
// held.
func (s *Server) admitConnLocked(remote net.Addr, listener string, now time.Time) string {
	interBroker := s.isInterBroker(listener)
	limit := s.cfg.MaxConnections
	if !interBroker {
		limit -= s.reservedInterBroker()
	}
	if len(s.conns) >= limit {
		return RefusedMaxConnections
	}
	lname := strings.ToLower(listener)
	if lim, ok := s.cfg.MaxConnectionsPerListener[lname]; ok && s.perListener[lname] >= lim {
		return RefusedMaxConnectionsPerListener
	}
	ip := remoteIP(remote)
	lim, ok := s.cfg.MaxConnectionsPerIPOverrides[ip]
	if !ok {
		lim = s.cfg.MaxConnectionsPerIP
	}
	if lim >= 0 && s.perIP[ip] >= lim {
		return RefusedMaxConnectionsPerIP
	}
	r, quota := s.ipCreationRate(ip, interBroker)
	if quota && r <= 0 {
		return RefusedConnectionCreationQuota
	}
	if r > 0 {
		b := s.ipRates[ip]
		if b == nil {
			s.pruneRatesLocked(now)
			b = &tokenBucket{}
			s.ipRates[ip] = b
		}
		if !b.take(now, r) {
			if quota {
				return RefusedConnectionCreationQuota
			}
			return RefusedMaxConnectionCreationPerIP
		}
	}
	if r := s.cfg.MaxConnectionCreationRate; r > 0 && !interBroker && !s.rate.take(now, r) {
		return RefusedMaxConnectionCreationRate
	}
	s.perIP[ip]++
	s.perListener[lname]++
	return ""
}

// ipCreationRate is the connection creation rate of one address: its
// connection_creation_rate client quota (quota true; the address's own
// entity, else the default ip entity), else
// max.connection.creation.rate.per.ip (0: unlimited). The client quota
// does not apply to the inter-broker listener: a default ip quota meant
// for clients must not refuse the brokers' own connections.
func (s *Server) ipCreationRate(ip string, interBroker bool) (rate float64, quota bool) {
	if f := s.cfg.IPConnectionCreationRate; f != nil && !interBroker {
		if r, ok := f(ip); ok {
			return r, true
		}
	}
	return s.cfg.MaxConnectionCreationRatePerIP, false
}

// releaseConnLocked undoes admitConnLocked. s.mu must be held.
func (s *Server) releaseConnLocked(remote net.Addr, listener string) {
	ip := remoteIP(remote)
	if s.perIP[ip]--; s.perIP[ip] <= 0 {
		delete(s.perIP, ip)
	}
	lname := strings.ToLower(listener)
	if s.perListener[lname]--; s.perListener[lname] <= 0 {
		delete(s.perListener, lname)
	}
}

// pruneRatesLocked drops the per-IP rate buckets that are full again (as
// good as new), once there are many: the map holds the addresses that
// connected within the last second or so, not every address ever seen.
func (s *Server) pruneRatesLocked(now time.Time) {
	if len(s.ipRates) < 1024 {
		return
	}
	for ip, b := range s.ipRates {
		if b.full(now, b.rate) {
			delete(s.ipRates, ip)
		}
	}
}

// tokenBucket is a connection creation rate: rate tokens a second, at
// most one second's worth (at least 1) saved up.
type tokenBucket struct {
	tokens float64
	last   time.Time
	rate   float64 // the rate of the last take (pruneRatesLocked)
}

func (b *tokenBucket) refill(now time.Time, rate float64) {
	b.rate = rate
	burst := max(rate, 1)
	if b.last.IsZero() {
		b.tokens = burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(burst, b.tokens+d.Seconds()*rate)
	}
	b.last = now
}

func (b *tokenBucket) take(now time.Time, rate float64) bool {
	b.refill(now, rate)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *tokenBucket) full(now time.Time, rate float64) bool {
	return b.last.IsZero() || b.tokens+now.Sub(b.last).Seconds()*rate >= max(rate, 1)
}

// CanonicalIP returns the form of an address that
// max.connections.per.ip.overrides is keyed by (and false if s is no IP
// address).
func CanonicalIP(s string) (string, bool) {
	ip := net.ParseIP(s)
	if ip == nil {
		return "", false
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return ip.String(), true
}

func remoteIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if tcp, ok := a.(*net.TCPAddr); ok {
		if v4 := tcp.IP.To4(); v4 != nil {
			return v4.String()
		}
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// connRefused counts a connection refused or closed early by a limit.
func (s *Server) connRefused(listener, reason string) {
	if o, ok := s.cfg.Observer.(ConnLimitObserver); ok {
		o.ConnRefused(listener, reason)
	}
}

// authenticationTimeout is connections.authentication.timeout.ms.
func (s *Server) authenticationTimeout() time.Duration {
	if s.cfg.AuthenticationTimeout <= 0 {
		return DefaultAuthenticationTimeout
	}
	return s.cfg.AuthenticationTimeout
}
