package protocol

// SaslHandshake (key 17), versions 0-1.
//
// Chooses the SASL mechanism of the connection among the listener's enabled
// ones (UNSUPPORTED_SASL_MECHANISM with the enabled list otherwise). After
// v0 the client sends raw SASL tokens (served by establish in sasl.go);
// after v1 it sends SaslAuthenticate requests. On a listener without SASL
// the answer is ILLEGAL_SASL_STATE. On an authenticated connection a v1
// handshake starts re-authentication (KIP-368).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.SASLHandshake, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.SASLHandshakeRequest)
	resp := r.NewResponse().(*kmsg.SASLHandshakeResponse)
	s := r.Client.session
	if s == nil {
		s = newSession(Listener{})
	}
	resp.SupportedMechanisms = append([]string{}, s.listener.Mechanisms...)
	resp.ErrorCode = s.handshake(req.Version, req.Mechanism)
	return resp, nil
}
