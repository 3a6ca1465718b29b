package protocol

// Connection security: TLS handshake, SASL authentication before the
// request pipeline starts, and the session (principal, KIP-368 expiry)
// that handlers see through Request.Principal.
//
// A connection on a SASL listener is served by establish() alone until it
// is authenticated: one frame at a time, only ApiVersions, SaslHandshake
// and SaslAuthenticate, anything else closes the connection. That
// synchronous loop also serves SaslHandshake v0 clients (kafka-python),
// which send the SASL tokens as raw size-prefixed frames without a Kafka
// request header, which the pipelined reader could not tell from requests.
// Re-authentication (KIP-368, SaslHandshake v1 + SaslAuthenticate on an
// authenticated connection) goes through the normal pipeline: requests of a
// connection are dispatched one at a time, so the session changes between
// two requests.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

// Listener describes what a listener requires of its connections
// (ServeListener). The zero value is an unnamed PLAINTEXT listener.
type Listener struct {
	// Name is the listener name (listeners=NAME://host:port); Metadata,
	// FindCoordinator and DescribeCluster advertise each broker's address
	// on this listener (ClientInfo.Listener).
	Name string
	// SASL requires SASL authentication (SASL_PLAINTEXT, SASL_SSL).
	SASL bool
	// Mechanisms are the enabled SASL mechanisms (PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512).
	Mechanisms []string
	// CertPrincipal maps a verified client certificate to the connection's
	// principal (TLS listeners: ssl.principal.mapping.rules); an error
	// refuses the connection. Nil or no certificate: User:ANONYMOUS.
	CertPrincipal func(*x509.Certificate) (auth.Principal, error)
}

// maxSASLFrameBytes bounds the frames read before authentication
// (ApiVersions, SaslHandshake, SaslAuthenticate are tiny): an
// unauthenticated client cannot make the broker allocate large buffers.
const maxSASLFrameBytes = 64 << 10

// Mechanism names.
const (
	MechanismPlain = "PLAIN"
)

// session is a connection's security state, shared by every Request of
// the connection through ClientInfo. The connection's dispatch loop is its
// only writer; mu lets handlers read the principal from other goroutines
// (deferred work).
type session struct {
	listener Listener

	mu            sync.Mutex
	principal     auth.Principal
	authenticated bool // SASL done, or not required
	// expiry is when the SASL session ends (connections.max.reauth.ms,
	// KIP-368); zero: never.
	expiry time.Time
	// mechanism chosen by the last SaslHandshake ("" when none pending),
	// and its version (0: raw tokens follow).
	mechanism        string
	handshakeVersion int16
	scram            *auth.ScramConversation
	// failed: authentication failed; the connection closes.
	failed bool
}

func newSession(l Listener) *session {
	return &session{listener: l, principal: auth.Anonymous, authenticated: !l.SASL}
}

// Principal returns the authenticated principal of the connection
// (User:ANONYMOUS on a PLAINTEXT listener, the mapped certificate subject
// on an SSL listener with a client certificate, User:<name> after SASL).
func (c ClientInfo) Principal() auth.Principal {
	if c.session == nil {
		return auth.Anonymous
	}
	c.session.mu.Lock()
	defer c.session.mu.Unlock()
	return c.session.principal
}

// Principal returns the principal of the connection the request came from.
func (r *Request) Principal() auth.Principal { return r.Client.Principal() }

// saslAPI says whether key may be sent before authentication.
func saslAPI(key int16) bool {
	return key == kmsg.ApiVersions.Int16() || key == kmsg.SASLHandshake.Int16() || key == kmsg.SASLAuthenticate.Int16()
}

// checkSession refuses (closing the connection) a request that the
// connection's session does not allow: anything but ApiVersions and SASL
// before authentication, after a failed re-authentication, or after the
// session expired (KIP-368: the client must re-authenticate first).
func (c *conn) checkSession(r *Request) error {
	s := c.info.session
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failed:
		return errors.New("SASL authentication failed")
	case saslAPI(r.Header.Key):
		return nil
	case !s.authenticated:
		return fmt.Errorf("%s before SASL authentication", kmsg.NameForKey(r.Header.Key))
	case !s.expiry.IsZero() && time.Now().After(s.expiry):
		return fmt.Errorf("%s after the SASL session expired (connections.max.reauth.ms)", kmsg.NameForKey(r.Header.Key))
	}
	return nil
}

// establish completes the TLS handshake, maps the client certificate and,
// on a SASL listener, serves the connection until it is authenticated. It
// returns false when the connection must close.
func (c *conn) establish() bool {
	s := c.info.session
	// connections.authentication.timeout.ms bounds the TLS handshake and
	// the SASL exchange: a client that connects and stays silent, or stops
	// halfway, does not hold a slot for long.
	deadline := time.Now().Add(c.srv.authenticationTimeout())
	timedOut := func(err error) {
		if (errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, errIdle) || errors.Is(err, context.DeadlineExceeded)) && !c.srv.isClosing() {
			c.log().V(1).Info("closing connection: not authenticated in time", "timeout", c.srv.authenticationTimeout())
			c.refuse(ClosedAuthenticationTimeout)
		}
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.log().Info("closing connection: TLS handshake failed", "err", err.Error())
			timedOut(err)
			return false
		}
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && s.listener.CertPrincipal != nil {
			p, err := s.listener.CertPrincipal(certs[0])
			if err != nil {
				c.log().Info("closing connection: client certificate", "err", err.Error())
				return false
			}
			s.principal = p
		}
	}
	if s.authenticated {
		return true
	}
	_ = c.nc.SetDeadline(deadline)
	defer func() { _ = c.nc.SetDeadline(time.Time{}) }()
	raw := false
	for {
		if raw {
			tok, err := readRawToken(c.nc)
			if err != nil {
				c.log().Info("closing connection: reading SASL token", "err", err.Error())
				timedOut(err)
				return false
			}
			out, done, err := s.step(c.ctx, c.srv.cfg.Env, tok)
			if err != nil {
				// SaslHandshake v0 has no error answer: Kafka closes.
				c.log().Info("closing connection: SASL authentication failed", "mechanism", s.mechanism, "err", err.Error())
				return false
			}
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(out)))
			if _, err := c.nc.Write(append(frame, out...)); err != nil {
				return false
			}
			if done {
				return !c.srv.isClosing()
			}
			continue
		}
		frame, err := readFrame(c.nc, maxSASLFrameBytes, nil, nil)
		if err != nil {
			c.log().V(1).Info("closing connection: before authentication", "err", err.Error())
			timedOut(err)
			return false
		}
		h, msg, err := decodeRequest(frame, true)
		var resp kmsg.Response
		switch {
		case errors.Is(err, ErrUnsupportedVersion) && h.Key == kmsg.ApiVersions.Int16():
			resp = unsupportedAPIVersionsResponse()
		case err != nil:
			c.log().Info("closing connection: bad request before authentication", "key", h.Key, "err", err.Error())
			return false
		case !saslAPI(h.Key):
			c.log().Info("closing connection: request before SASL authentication", "api", kmsg.NameForKey(h.Key))
			return false
		default:
			if h.ClientID != nil {
				c.info.ClientID = *h.ClientID
			}
			resp, err = c.dispatch(&Request{Header: h, Msg: msg, Client: c.info, Env: c.srv.cfg.Env})
			if err != nil {
				c.log().Info("closing connection: SASL", "api", kmsg.NameForKey(h.Key), "err", err.Error())
				return false
			}
		}
		if _, err := c.nc.Write(appendResponse(nil, h.CorrelationID, resp)); err != nil {
			return false
		}
		s.mu.Lock()
		authenticated, failed := s.authenticated, s.failed
		raw = h.Key == kmsg.SASLHandshake.Int16() && s.mechanism != "" && s.handshakeVersion == 0
		s.mu.Unlock()
		switch {
		case failed:
			return false
		case authenticated:
			// Shutdown may have moved the deadline to now meanwhile; the
			// deferred reset would undo that, so stop here instead.
			return !c.srv.isClosing()
		}
	}
}

// readRawToken reads one size-prefixed SASL token (SaslHandshake v0).
func readRawToken(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxSASLFrameBytes {
		return nil, fmt.Errorf("%w: SASL token of %d bytes", ErrFrameTooLarge, n)
	}
	tok := make([]byte, n)
	if _, err := io.ReadFull(r, tok); err != nil {
		return nil, err
	}
	return tok, nil
}

// handshake records the mechanism a SaslHandshake chose; it returns the
// error code of the answer.
func (s *session) handshake(version int16, mechanism string) int16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.listener.SASL {
		return kerr.IllegalSaslState.Code
	}
	if s.mechanism != "" || (s.authenticated && version == 0) {
		// A second handshake mid-exchange; or re-authentication, which
		// needs the SaslAuthenticate framing (v1).
		s.failed = true
		return kerr.IllegalSaslState.Code
	}
	if !slices.Contains(s.listener.Mechanisms, mechanism) {
		return kerr.UnsupportedSaslMechanism.Code
	}
	s.mechanism, s.handshakeVersion, s.scram = mechanism, version, nil
	return 0
}

// step feeds one client token to the pending exchange. done with a nil
// error means authenticated; an error means the credentials were refused
// (the session is marked failed).
func (s *session) step(ctx context.Context, env *Env, token []byte) (out []byte, done bool, err error) {
	s.mu.Lock()
	mech, conv, reauth, prev := s.mechanism, s.scram, s.authenticated, s.principal
	s.mu.Unlock()
	if mech == "" {
		return nil, true, s.fail(errors.New("SaslAuthenticate without a SaslHandshake"))
	}
	if env.Credentials == nil {
		return nil, true, s.fail(errors.New("no credential store"))
	}
	var user string
	switch mech {
	case MechanismPlain:
		u, password, err := auth.ParsePlain(token)
		if err != nil {
			return nil, true, s.fail(err)
		}
		ok, err := auth.CheckPlain(ctx, env.Credentials, u, password)
		if err != nil {
			return nil, true, s.fail(err)
		}
		if !ok {
			return nil, true, s.fail(fmt.Errorf("invalid credentials for user %q", u))
		}
		user, done = u, true
	default:
		m, ok := auth.ParseMechanism(mech)
		if !ok {
			return nil, true, s.fail(fmt.Errorf("mechanism %s", mech))
		}
		if conv == nil {
			if conv, err = auth.NewScramConversation(ctx, m, env.Credentials); err != nil {
				return nil, true, s.fail(err)
			}
			s.mu.Lock()
			s.scram = conv
			s.mu.Unlock()
		}
		if out, done, err = conv.Step(token); err != nil {
			return nil, true, s.fail(err)
		}
		user = conv.Username()
	}
	if !done {
		return out, false, nil
	}
	p := auth.UserPrincipal(user)
	if reauth && p != prev {
		// KIP-368: re-authentication cannot change the principal.
		return nil, true, s.fail(fmt.Errorf("re-authentication as %s on a connection of %s", p, prev))
	}
	s.mu.Lock()
	s.principal, s.authenticated, s.mechanism, s.scram = p, true, "", nil
	s.expiry = time.Time{}
	if env.ReauthMax > 0 {
		s.expiry = time.Now().Add(env.ReauthMax)
	}
	s.mu.Unlock()
	return out, true, nil
}

func (s *session) fail(err error) error {
	s.mu.Lock()
	s.failed, s.mechanism, s.scram = true, "", nil
	s.mu.Unlock()
	return err
}

// Clients describes the open connections, oldest first.
func (s *Server) Clients() []ClientInfo {
	s.mu.Lock()
	out := make([]ClientInfo, 0, len(s.conns))
	for c := range s.conns {
		// The fields fixed at accept (the reader updates ClientID).
		out = append(out, ClientInfo{ConnID: c.info.ConnID, Remote: c.info.Remote, Listener: c.info.Listener, session: c.info.session})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ClientInfo) int { return int(a.ConnID) - int(b.ConnID) })
	return out
}
