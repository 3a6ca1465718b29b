package protocol

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/quota"
)

// quotaThrottle records a handled request against the client quotas
// (Env.Quotas, package broker/quota) and returns how long the connection
// stays muted: Produce counts the request's bytes, a consumer's Fetch the
// record bytes of its answer, and every request but the exempt ones
// (requestTimeExempt) spent, the time its handler ran, against
// request_percentage. The throttle is the longest of these and of a
// partition-mutation budget's (Request.throttle), as Kafka answers the
// largest; the response, if it has one, carries it (KIP-219: answered at
// once, then muted).
func (c *conn) quotaThrottle(item inbound, resp kmsg.Response, spent time.Duration) time.Duration {
	q := c.srv.cfg.Env.Quotas
	if q == nil || item.reject || item.req.Msg == nil || item.req.internal {
		return 0
	}
	user, clientID := quotaUser(item.req), item.req.Client.ClientID
	// Set by the handler (a partition-mutation budget, mutationQuota).
	d := item.req.throttle
	switch req := item.req.Msg.(type) {
	case *kmsg.ProduceRequest:
		d = max(d, q.Record(quota.Produce, user, clientID, item.size))
	case *kmsg.FetchRequest:
		if req.ReplicaID >= 0 {
			return 0 // replica fetches follow the replication throttle, not client quotas
		}
		if fr, ok := resp.(*kmsg.FetchResponse); ok {
			n := 0
			for _, t := range fr.Topics {
				for _, p := range t.Partitions {
					n += len(p.RecordBatches)
				}
			}
			if n > 0 {
				d = max(d, q.Record(quota.Fetch, user, clientID, n))
			}
		}
	}
	if !requestTimeExempt(item.req) {
		d = max(d, q.RecordTime(user, clientID, spent))
	}
	if d <= 0 {
		return 0
	}
	if tr, ok := resp.(kmsg.SetThrottleResponse); ok && resp != nil {
		tr.SetThrottle(int32(min(d.Milliseconds(), math.MaxInt32)))
	}
	return d
}

// requestTimeExempt: requests whose handler time request_percentage does
// not count, as in Kafka (RequestQuotaManager's exempt requests): the
// version and SASL exchanges a client needs before anything else, and
// the cluster actions of other brokers (replica fetches, their leader
// epoch lookups, transaction markers), which a default user quota must
// never slow down.
func requestTimeExempt(r *Request) bool {
	switch req := r.Msg.(type) {
	case *kmsg.ApiVersionsRequest, *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest, *kmsg.WriteTxnMarkersRequest:
		return true
	case *kmsg.FetchRequest:
		return req.ReplicaID >= 0
	case *kmsg.OffsetForLeaderEpochRequest:
		return req.Version >= 3 && req.ReplicaID >= 0 // ReplicaID is v3+
	}
	return false
}

// quotaUser is the user name client quotas match: the principal's name
// (Kafka's KafkaPrincipal.getName: "ANONYMOUS" on listeners without
// authentication).
func quotaUser(r *Request) string {
	p := string(r.Client.Principal())
	if _, name, ok := strings.Cut(p, ":"); ok {
		return name
	}
	return p
}

// waitMuted holds the connection's next request until a throttle ends or
// the connection closes.
func waitMuted(ctx context.Context, until time.Time) {
	d := time.Until(until)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// mutationBudget is the KIP-599 partition-mutation budget of the
// request's client (CreateTopics, CreatePartitions, DeleteTopics); nil
// without a controller_mutation_rate quota, for the broker's own
// requests, or when validating only.
type mutationBudget struct {
	q      *quota.Mutations
	strict bool
}

func (r *Request) mutationBudget(strict, validateOnly bool) *mutationBudget {
	if r.Env.Quotas == nil || r.internal || validateOnly {
		return nil
	}
	q := r.Env.Quotas.Mutations(quotaUser(r), r.Client.ClientID)
	if q == nil {
		return nil
	}
	return &mutationBudget{q: q, strict: strict}
}

// refuse reports whether a topic must be refused with
// THROTTLING_QUOTA_EXCEEDED: the request version is strict (the client
// retries such topics after the throttle) and the budget is spent.
// Older versions are served whole and throttled afterwards.
func (m *mutationBudget) refuse() (int16, *string, bool) {
	if m == nil || !m.strict || !m.q.Exceeded() {
		return 0, nil, false
	}
	msg := "the client's controller_mutation_rate quota is spent: retry after the throttle time"
	return kerr.ThrottlingQuotaExceeded.Code, &msg, true
}

func (m *mutationBudget) record(n int) {
	if m != nil {
		m.q.Record(n)
	}
}

// finish sets the answer's throttle time (and the connection's mute) to
// the time the budget needs to be no longer negative.
func (m *mutationBudget) finish(r *Request, resp kmsg.Response) {
	if m == nil {
		return
	}
	if d := m.q.Throttle(); d > 0 {
		r.throttle = d
		if tr, ok := resp.(kmsg.SetThrottleResponse); ok {
			tr.SetThrottle(int32(d.Milliseconds()))
		}
	}
}
