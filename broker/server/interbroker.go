package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-dev/strata/broker/auth"
)

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// secureDial wraps a dial with the inter-broker listener's security: TLS
// (the broker's certificate as client certificate, the listener's CA as
// roots, the leader's advertised host as server name) and SASL (SaslHandshake
// v1 and SaslAuthenticate with this broker's own credentials, through
// franz-go's PLAIN and SCRAM clients). The connection returned is
// authenticated; the replica fetcher speaks the protocol on it as before.
// Re-authentication is not done: when connections.max.reauth.ms ends the
// session the leader closes the connection at the next fetch and the
// fetcher reconnects.
func secureDial(base dialFunc, l resolvedListener, kp *keyPair, creds InterBrokerCredentials) dialFunc {
	if base == nil {
		var d net.Dialer
		base = d.DialContext
	}
	if !l.tls() && !l.sasl() {
		return base
	}
	var mech sasl.Mechanism
	if l.sasl() {
		name := creds.Mechanism
		if name == "" {
			name = l.Mechanisms[len(l.Mechanisms)-1]
		}
		switch name {
		case auth.ScramSHA512.String():
			mech = scram.Auth{User: creds.Username, Pass: creds.Password}.AsSha512Mechanism()
		case auth.ScramSHA256.String():
			mech = scram.Auth{User: creds.Username, Pass: creds.Password}.AsSha256Mechanism()
		default:
			mech = plain.Auth{User: creds.Username, Pass: creds.Password}.AsMechanism()
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		if l.tls() {
			cfg, err := kp.clientConfig(host)
			if err != nil {
				nc.Close()
				return nil, err
			}
			tc := tls.Client(nc, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
			}
			nc = tc
		}
		if mech != nil {
			if err := saslClient(ctx, nc, mech, host); err != nil {
				nc.Close()
				return nil, fmt.Errorf("SASL %s with %s: %w", mech.Name(), addr, err)
			}
		}
		return nc, nil
	}
}

// saslClient authenticates nc: SaslHandshake v1, then SaslAuthenticate
// v1 round trips until the mechanism is done.
func saslClient(ctx context.Context, nc net.Conn, mech sasl.Mechanism, host string) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
		defer func() { _ = nc.SetDeadline(time.Time{}) }()
	}
	rw := &wire{nc: nc, rd: bufio.NewReader(nc), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-broker"))}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = mech.Name()
	resp, err := rw.roundTrip(hs)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("handshake: %w (enabled: %v)", err, resp.(*kmsg.SASLHandshakeResponse).SupportedMechanisms)
	}
	session, msg, err := mech.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = msg
		resp, err := rw.roundTrip(req)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			if ar.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *ar.ErrorMessage)
			}
			return err
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		msg = next
	}
}

// wire is a one-request-at-a-time Kafka client connection for the SASL
// exchange (non-flexible versions only).
type wire struct {
	nc   net.Conn
	rd   *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
}

func (w *wire) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	w.corr++
	if _, err := w.nc.Write(w.f.AppendRequest(nil, req, w.corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(w.rd, size[:]); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return nil, fmt.Errorf("bad %s response size %d", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(w.rd, body); err != nil {
		return nil, err
	}
	if int32(binary.BigEndian.Uint32(body)) != w.corr {
		return nil, errors.New("response correlation ID mismatch")
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
