package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-dev/strata/broker/auth"
	"github.com/strata-dev/strata/broker/protocol"
)

// Security protocols of a listener (listener.security.protocol.map).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

var securityProtocols = []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}

// SASL mechanisms a listener can enable (sasl.enabled.mechanisms).
var saslMechanisms = []string{protocol.MechanismPlain, auth.ScramSHA256.String(), auth.ScramSHA512.String()}

// defaultSASLMechanisms is sasl.enabled.mechanisms's default: PLAIN sends
// the password itself and is opt-in.
var defaultSASLMechanisms = []string{auth.ScramSHA256.String(), auth.ScramSHA512.String()}

// SecurityConfig is the listener and authentication settings
// (docs/security.md). The listener strings keep Kafka's syntax; Start
// resolves them (resolveListeners) so that a bad combination stops the
// broker with the key named.
type SecurityConfig struct {
	// Listeners is `listeners` (NAME://host:port,...) as written; empty
	// means one PLAINTEXT listener on Config.Listen. The first listener
	// binds Config.Listen (--listen overrides it).
	Listeners string
	// AdvertisedListeners is `advertised.listeners` (${VAR} expanded).
	AdvertisedListeners string
	// ProtocolMap is listener.security.protocol.map (NAME:PROTOCOL,...);
	// a listener named after a protocol needs no entry.
	ProtocolMap map[string]string
	// InterBrokerListener is inter.broker.listener.name (default: the
	// first listener). Replica fetches use it.
	InterBrokerListener string
	// TLS holds ssl.* (key "") and listener.name.<l>.ssl.* (key: the
	// lower-cased listener name) settings.
	TLS map[string]TLSFiles
	// Mechanisms holds sasl.enabled.mechanisms (key "") and
	// listener.name.<l>.sasl.enabled.mechanisms.
	Mechanisms map[string][]string
	// PrincipalMappingRules is ssl.principal.mapping.rules.
	PrincipalMappingRules string
	// ReauthMax is connections.max.reauth.ms (0: sessions never expire).
	ReauthMax time.Duration
	// InterBroker is this broker's own credential on a SASL inter-broker
	// listener: sasl.mechanism.inter.broker.protocol,
	// inter.broker.sasl.username, inter.broker.sasl.password.
	InterBroker InterBrokerCredentials
	// Authorizer is authorizer.class.name set to an accepted class
	// (auth.AuthorizerClassNames): ACLs are enforced.
	Authorizer bool
	// SuperUsers is super.users (principals separated by ';').
	SuperUsers []auth.Principal
	// AllowEveryoneIfNoACL is allow.everyone.if.no.acl.found (default
	// false).
	AllowEveryoneIfNoACL bool
}

// TLSFiles are PEM files of a TLS listener. A field left empty in a
// listener.name.<l>.ssl.* setting takes the ssl.* value.
type TLSFiles struct {
	// CertFile is ssl.certificate.location: the certificate chain the
	// broker presents (and, on the inter-broker listener, its client
	// certificate).
	CertFile string
	// KeyFile is ssl.key.location: its private key (unencrypted PEM).
	KeyFile string
	// CAFile is ssl.ca.location: the CAs that client certificates must
	// chain to, and that the broker trusts for other brokers' listeners.
	CAFile string
	// ClientAuth is ssl.client.auth: none (default), requested, required.
	ClientAuth string
}

// InterBrokerCredentials is the SASL identity a broker uses towards other
// brokers.
type InterBrokerCredentials struct {
	Mechanism string
	Username  string
	Password  string
}

// resolvedListener is one listener ready to bind.
type resolvedListener struct {
	Name       string
	Protocol   string
	Bind       string // host:port
	AdvHost    string // "" until bound: the bound address
	AdvPort    int32
	TLS        TLSFiles
	Mechanisms []string
}

func (l resolvedListener) tls() bool {
	return l.Protocol == ProtocolSSL || l.Protocol == ProtocolSASLSSL
}

func (l resolvedListener) sasl() bool {
	return l.Protocol == ProtocolSASLPlaintext || l.Protocol == ProtocolSASLSSL
}

// applySecuritySetting handles the keys of SecurityConfig; known is false
// for any other key.
func applySecuritySetting(sc *SecurityConfig, k, v string) (known bool, err error) {
	lk := strings.ToLower(k)
	if rest, ok := strings.CutPrefix(lk, "listener.name."); ok {
		name, field, ok := strings.Cut(rest, ".")
		if !ok || name == "" {
			return false, nil
		}
		return applyListenerSetting(sc, name, field, v)
	}
	switch k {
	case "listener.security.protocol.map":
		sc.ProtocolMap = map[string]string{}
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e == "" {
				continue
			}
			name, proto, ok := strings.Cut(e, ":")
			proto = strings.ToUpper(strings.TrimSpace(proto))
			if !ok || !slices.Contains(securityProtocols, proto) {
				return true, fmt.Errorf("want NAME:PROTOCOL entries with PROTOCOL one of %s, got %q", strings.Join(securityProtocols, ", "), e)
			}
			sc.ProtocolMap[strings.ToUpper(strings.TrimSpace(name))] = proto
		}
	case "inter.broker.listener.name":
		sc.InterBrokerListener = strings.ToUpper(strings.TrimSpace(v))
	case "ssl.principal.mapping.rules":
		if _, err := auth.ParseMappingRules(v); err != nil {
			return true, err
		}
		sc.PrincipalMappingRules = v
	case "connections.max.reauth.ms":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return true, fmt.Errorf("want milliseconds >= 0 (0: sessions do not expire)")
		}
		sc.ReauthMax = time.Duration(n) * time.Millisecond
	case "sasl.mechanism.inter.broker.protocol":
		if !slices.Contains(saslMechanisms, v) {
			return true, fmt.Errorf("want one of %s", strings.Join(saslMechanisms, ", "))
		}
		sc.InterBroker.Mechanism = v
	case "authorizer.class.name":
		on, err := auth.ParseAuthorizerClass(v)
		if err != nil {
			return true, err
		}
		sc.Authorizer = on
	case "super.users":
		ps, err := auth.ParseSuperUsers(v)
		if err != nil {
			return true, err
		}
		sc.SuperUsers = ps
	case "allow.everyone.if.no.acl.found":
		on, err := strconv.ParseBool(v)
		if err != nil {
			return true, fmt.Errorf("want true or false")
		}
		sc.AllowEveryoneIfNoACL = on
	case "inter.broker.sasl.username":
		sc.InterBroker.Username = v
	case "inter.broker.sasl.password":
		sc.InterBroker.Password = v
	default:
		if field, ok := strings.CutPrefix(k, "ssl."); ok {
			return applyListenerSetting(sc, "", "ssl."+field, v)
		}
		if k == "sasl.enabled.mechanisms" {
			return applyListenerSetting(sc, "", k, v)
		}
		return false, nil
	}
	return true, nil
}

func applyListenerSetting(sc *SecurityConfig, name, field, v string) (bool, error) {
	if field == "sasl.enabled.mechanisms" {
		var ms []string
		for _, m := range strings.Split(v, ",") {
			m = strings.ToUpper(strings.TrimSpace(m))
			if m == "" {
				continue
			}
			if !slices.Contains(saslMechanisms, m) {
				return true, fmt.Errorf("mechanism %q: want some of %s", m, strings.Join(saslMechanisms, ", "))
			}
			ms = append(ms, m)
		}
		if sc.Mechanisms == nil {
			sc.Mechanisms = map[string][]string{}
		}
		sc.Mechanisms[name] = ms
		return true, nil
	}
	if sc.TLS == nil {
		sc.TLS = map[string]TLSFiles{}
	}
	f := sc.TLS[name]
	switch field {
	case "ssl.certificate.location":
		f.CertFile = v
	case "ssl.key.location":
		f.KeyFile = v
	case "ssl.ca.location":
		f.CAFile = v
	case "ssl.client.auth":
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "none" && v != "requested" && v != "required" {
			return true, fmt.Errorf("want none, requested or required")
		}
		f.ClientAuth = v
	default:
		return false, nil
	}
	sc.TLS[name] = f
	return true, nil
}

// parseListenerList parses NAME://host:port,... (a bare host:port is a
// PLAINTEXT listener named PLAINTEXT, the old `listen` form).
func parseListenerList(key, v string) ([]resolvedListener, error) {
	var out []resolvedListener
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		name, addr := ProtocolPlaintext, e
		// Not url.Parse: listener names such as SASL_SSL are not valid
		// URL schemes.
		if n, a, ok := strings.Cut(e, "://"); ok {
			name, addr = strings.ToUpper(n), a
			if name == "" {
				return nil, fmt.Errorf("%s entry %q: no listener name", key, e)
			}
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", key, e, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("%s entry %q: port: %w", key, e, err)
		}
		for _, o := range out {
			if o.Name == name {
				return nil, fmt.Errorf("%s: listener %s named twice", key, name)
			}
		}
		out = append(out, resolvedListener{Name: name, Bind: addr, AdvHost: host, AdvPort: int32(p)})
	}
	return out, nil
}

// resolveListeners turns the listener settings into the listeners to bind.
// Without `listeners` it is one PLAINTEXT listener on cfg.Listen,
// advertising cfg.Broker.Host/Port, as before listeners had names.
func resolveListeners(cfg *Config) ([]resolvedListener, error) {
	sc := cfg.Security
	var ls []resolvedListener
	if strings.TrimSpace(sc.Listeners) == "" {
		ls = []resolvedListener{{Name: ProtocolPlaintext, Bind: cfg.Listen}}
	} else {
		var err error
		if ls, err = parseListenerList("listeners", sc.Listeners); err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			return nil, fmt.Errorf("listeners %q: no listener", sc.Listeners)
		}
		ls[0].Bind = cfg.Listen // --listen and `listen` name the first listener
	}
	adv, err := parseListenerList("advertised.listeners", sc.AdvertisedListeners)
	if err != nil {
		return nil, err
	}
	for i := range ls {
		l := &ls[i]
		l.AdvHost, l.AdvPort = "", 0
		if i == 0 {
			l.AdvHost, l.AdvPort = cfg.Broker.Host, cfg.Broker.Port
		}
		for _, a := range adv {
			if a.Name == l.Name {
				l.AdvHost, l.AdvPort = a.AdvHost, a.AdvPort
			}
		}
		l.Protocol = sc.ProtocolMap[l.Name]
		if l.Protocol == "" {
			if !slices.Contains(securityProtocols, l.Name) {
				return nil, fmt.Errorf("listener %s: no security protocol; name it in listener.security.protocol.map (%s)", l.Name, strings.Join(securityProtocols, ", "))
			}
			l.Protocol = l.Name
		}
		lower := strings.ToLower(l.Name)
		if l.sasl() {
			l.Mechanisms = defaultSASLMechanisms
			if ms, ok := sc.Mechanisms[""]; ok {
				l.Mechanisms = ms
			}
			if ms, ok := sc.Mechanisms[lower]; ok {
				l.Mechanisms = ms
			}
			if len(l.Mechanisms) == 0 {
				return nil, fmt.Errorf("listener %s (%s): no SASL mechanism enabled (sasl.enabled.mechanisms)", l.Name, l.Protocol)
			}
		}
		if l.tls() {
			def, own := sc.TLS[""], sc.TLS[lower]
			f := own
			if f.CertFile == "" {
				f.CertFile = def.CertFile
			}
			if f.KeyFile == "" {
				f.KeyFile = def.KeyFile
			}
			if f.CAFile == "" {
				f.CAFile = def.CAFile
			}
			if f.ClientAuth == "" {
				f.ClientAuth = def.ClientAuth
			}
			if f.ClientAuth == "" {
				f.ClientAuth = "none"
			}
			if f.CertFile == "" || f.KeyFile == "" {
				return nil, fmt.Errorf("listener %s (%s): needs listener.name.%s.ssl.certificate.location and .ssl.key.location (or ssl.certificate.location, ssl.key.location)", l.Name, l.Protocol, lower)
			}
			if f.ClientAuth != "none" && f.CAFile == "" {
				return nil, fmt.Errorf("listener %s: ssl.client.auth=%s needs ssl.ca.location (the CAs client certificates chain to)", l.Name, f.ClientAuth)
			}
			l.TLS = f
		}
	}
	ib := sc.InterBrokerListener
	if ib == "" {
		ib = ls[0].Name
	}
	found := false
	for _, l := range ls {
		if l.Name == ib {
			found = true
			if l.sasl() && (sc.InterBroker.Username == "" || sc.InterBroker.Password == "") {
				return nil, fmt.Errorf("inter-broker listener %s is %s: set inter.broker.sasl.username and inter.broker.sasl.password", l.Name, l.Protocol)
			}
			if l.sasl() && sc.InterBroker.Mechanism != "" && !slices.Contains(l.Mechanisms, sc.InterBroker.Mechanism) {
				return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol=%s is not enabled on the inter-broker listener %s", sc.InterBroker.Mechanism, l.Name)
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("inter.broker.listener.name=%s is not one of the listeners", ib)
	}
	return ls, nil
}

// advertise fills in the advertised address of a bound listener that
// names none: the bound host (the hostname for a wildcard) and port.
func (l *resolvedListener) advertise(bound net.Addr) error {
	host, portStr, _ := net.SplitHostPort(bound.String())
	if l.AdvPort == 0 {
		p, _ := strconv.Atoi(portStr)
		l.AdvPort = int32(p)
	}
	if l.AdvHost == "" {
		l.AdvHost = host
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			h, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("advertised host: %w", err)
			}
			l.AdvHost = h
		}
	}
	return nil
}

// certPrincipal returns the listener's certificate principal mapper.
func certPrincipal(rules string) (func(*x509.Certificate) (auth.Principal, error), error) {
	r, err := auth.ParseMappingRules(rules)
	if err != nil {
		return nil, err
	}
	return r.CertificatePrincipal, nil
}

// loadKeyPairs reads the TLS files of every TLS listener (errors stop the
// broker before it opens its logs).
func (s *Server) loadKeyPairs() error {
	s.keyPairs = make([]*keyPair, len(s.listeners))
	for i, l := range s.listeners {
		if !l.tls() {
			continue
		}
		kp, err := newKeyPair(l.TLS, s.log.WithValues("listener", l.Name))
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.Name, err)
		}
		s.keyPairs[i] = kp
	}
	return nil
}

// protocolListeners wraps TLS listeners and describes each one to the
// protocol server, in the order of s.lns (which it may replace by their
// TLS wrappers).
func (s *Server) protocolListeners() ([]protocol.Listener, error) {
	out := make([]protocol.Listener, len(s.listeners))
	for i, l := range s.listeners {
		pl := protocol.Listener{Name: l.Name, SASL: l.sasl(), Mechanisms: l.Mechanisms}
		if kp := s.keyPairs[i]; kp != nil {
			s.lns[i] = tls.NewListener(s.lns[i], kp.serverConfig())
			if l.TLS.ClientAuth != "none" {
				mapper, err := certPrincipal(s.cfg.Security.PrincipalMappingRules)
				if err != nil {
					return nil, err
				}
				pl.CertPrincipal = mapper
			}
		}
		out[i] = pl
	}
	return out, nil
}

// interBroker returns the inter-broker listener and its key pair.
func (s *Server) interBroker() (resolvedListener, *keyPair) {
	name := s.cfg.Security.InterBrokerListener
	for i, l := range s.listeners {
		if l.Name == name || (name == "" && i == 0) {
			return l, s.keyPairs[i]
		}
	}
	return s.listeners[0], s.keyPairs[0]
}

func (s *Server) listenerSummary() []string {
	out := make([]string, len(s.listeners))
	for i, l := range s.listeners {
		out[i] = fmt.Sprintf("%s(%s)://%s advertised %s", l.Name, l.Protocol, s.lns[i].Addr(), net.JoinHostPort(l.AdvHost, strconv.Itoa(int(l.AdvPort))))
	}
	return out
}

// ListenerAddr returns the bound address of the named listener ("" if none).
func (s *Server) ListenerAddr(name string) string {
	for i, l := range s.listeners {
		if l.Name == name {
			return s.lns[i].Addr().String()
		}
	}
	return ""
}

// Clients describes the open Kafka connections (listener, principal).
func (s *Server) Clients() []protocol.ClientInfo { return s.proto.Clients() }
