package protocol

// SaslAuthenticate (key 36), versions 0-2.
//
// Carries the SASL tokens of the mechanism chosen by SaslHandshake v1:
// PLAIN (checked against the user's SCRAM credential, see package auth) or
// SCRAM-SHA-256/512 (two round trips). A refused exchange answers
// SASL_AUTHENTICATION_FAILED and the connection closes. Success sets the
// connection's principal to User:<name>; v1+ answers carry the session
// lifetime (connections.max.reauth.ms, KIP-368; 0 = no expiry), after which
// any request but a re-authentication closes the connection. A
// re-authentication as another user fails.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SASLAuthenticate, 0, 2, handleSaslAuthenticate) }

func handleSaslAuthenticate(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.SASLAuthenticateRequest)
	resp := r.NewResponse().(*kmsg.SASLAuthenticateResponse)
	s := r.Client.session
	if s == nil || !s.listener.SASL {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	s.mu.Lock()
	mech, raw := s.mechanism, s.handshakeVersion == 0
	s.mu.Unlock()
	if mech == "" || raw {
		s.fail(nil)
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	out, done, err := s.step(ctx, r.Env, req.SASLAuthBytes)
	if err != nil {
		r.Env.Log.Info("SASL authentication failed", "remote", r.Client.Remote.String(), "mechanism", mech, "err", err.Error())
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed: invalid credentials with SASL mechanism " + mech
		resp.ErrorMessage = &msg
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if done && r.Env.ReauthMax > 0 {
		resp.SessionLifetimeMillis = r.Env.ReauthMax.Milliseconds()
	}
	return resp, nil
}
