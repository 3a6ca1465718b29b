package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Internal serves req in this broker as a request the broker sends itself
// (the transaction coordinator writing markers to partitions it leads): no
// connection, no ACL check. The request's version is set to the highest
// both sides know.
func (e *Env) Internal(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	api, ok := Lookup(req.Key())
	if !ok {
		return nil, fmt.Errorf("%s is not served", kmsg.NameForKey(req.Key()))
	}
	req.SetVersion(min(api.Max, req.MaxVersion()))
	r := &Request{
		Header:   Header{Key: req.Key(), Version: req.GetVersion()},
		Msg:      req,
		Env:      e,
		Client:   ClientInfo{ClientID: "strata-internal"},
		internal: true,
	}
	resp, err := api.Handle(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.finish != nil {
		r.finish()
	}
	if resp == nil {
		return nil, fmt.Errorf("%s answered nothing", kmsg.NameForKey(req.Key()))
	}
	return resp, nil
}
