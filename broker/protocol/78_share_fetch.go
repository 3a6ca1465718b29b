package protocol

// ShareFetch (key 78), versions 1-2 (KIP-932 as Kafka 4.1; v2 adds
// ShareAcquireMode, KIP-1206, and renew acknowledgements, KIP-1222).
//
// Fetches records for a share-group member from the partitions this broker
// leads, acquiring them under an acquisition lock
// (AcquisitionLockTimeoutMillis, share.record.lock.duration.ms); the
// response carries whole record batches and the acquired offset ranges
// with their delivery counts (broker/group, share_partition.go). At most
// MaxRecords records are acquired per request, in both acquire modes
// (Kafka may exceed it to a batch boundary in the default mode). MaxBytes
// bounds the record bytes, except that the first partition with records
// returns at least one batch (KIP-74); PartitionMaxBytes is not used. Each
// request starts at another partition of the session. Acknowledgements of
// earlier deliveries may ride on the request (accept, release, reject,
// gap; renew with IsRenewAck, which fetches nothing); their result is
// AcknowledgeErrorCode per partition (INVALID_RECORD_STATE when the
// records are not acquired by the member any more, e.g. their lock
// expired).
//
// Share sessions: epoch 0 opens the member's session (acknowledgements on
// it are INVALID_REQUEST), later epochs must follow the session's
// (INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND) and
// name only the partitions added and forgotten; epoch -1 acknowledges and
// closes the session, releasing what the member still holds, as does the
// connection that opened the session closing. Long poll: with nothing
// acquired the request waits up to MaxWaitMillis for new records, a
// release or a lock expiry.
//
// share.isolation.level (group.ShareConfig): read_uncommitted, Kafka's
// default, delivers up to the high watermark, control batches excepted;
// read_committed up to the last stable offset, and the records of aborted
// transactions are archived without being delivered.
//
// Requires READ on the group (GROUP_AUTHORIZATION_FAILED, top level) and
// READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition). Unknown
// topic ids answer UNKNOWN_TOPIC_ID, partitions led elsewhere
// NOT_LEADER_OR_FOLLOWER.

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
)

func init() { register(kmsg.ShareFetch, 1, 2, handleShareFetch) }

// shareAckBatch is one acknowledgement batch of either request kind.
type shareAckBatch struct {
	first, last int64
	types       []int8
}

func toShareAcks(bs []shareAckBatch) []group.ShareAck {
	out := make([]group.ShareAck, 0, len(bs))
	for _, b := range bs {
		out = append(out, group.ShareAck{First: b.first, Last: b.last, Types: b.types})
	}
	return out
}

// sharePartitionLog reads a partition's log for the share-partition state.
// readCommitted (share.isolation.level) ends it at the last stable offset
// and marks the batches of aborted transactions.
type sharePartitionLog struct {
	p             *broker.Partition
	end           int64
	readCommitted bool
}

func (l sharePartitionLog) Bounds() (int64, int64) { return l.p.KnownStartOffset(), l.end }

func (l sharePartitionLog) Batches(offset int64, maxBytes int) ([]group.ShareBatch, error) {
	var recs []byte
	remote := false
	if l.p.Tiered() != nil && offset < l.p.Log.StartOffset() {
		records, ok, err := l.p.ReadRemote(offset, maxBytes, l.end)
		if err != nil {
			return nil, err
		}
		if ok {
			recs, remote = records, true
		}
	}
	if recs == nil {
		res, err := l.p.Log.Read(offset, maxBytes, l.end)
		if errors.Is(err, log.ErrOffsetOutOfRange) {
			return nil, nil // retention moved the start; the next fetch starts there
		}
		if err != nil {
			return nil, err
		}
		recs = res.Records
	}
	batches, _, err := record.Split(recs)
	if err != nil {
		return nil, err
	}
	out := make([]group.ShareBatch, 0, len(batches))
	for _, b := range batches {
		h := b.Header()
		out = append(out, group.ShareBatch{Base: h.BaseOffset, Last: h.LastOffset(), Control: h.IsControl(), Data: b})
	}
	if l.readCommitted && len(out) > 0 {
		from, upTo := out[0].Base, out[len(out)-1].Last+1
		aborted := l.p.Log.AbortedTxns(from, upTo)
		if remote {
			var err error
			if aborted, err = l.p.RemoteAbortedTxns(from, upTo); err != nil {
				return nil, err
			}
		}
		for i, b := range batches {
			h := b.Header()
			if !h.IsTransactional() || h.IsControl() {
				continue
			}
			for _, a := range aborted {
				if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
					out[i].Aborted = true
				}
			}
		}
	}
	return out, nil
}

// sharePartition resolves a partition this broker must lead for share
// fetches and acknowledgements: its log, leader epoch (-1 standalone) and
// the channel that fires when its deliverable end moves.
func sharePartition(b *broker.Broker, topic string, partition int32, readCommitted bool) (sharePartitionLog, int32, <-chan struct{}, error) {
	p, err := b.Partition(topic, partition)
	if err != nil {
		return sharePartitionLog{}, 0, nil, err
	}
	l := sharePartitionLog{p: p, readCommitted: readCommitted}
	var (
		epoch int32 = -1
		wait  <-chan struct{}
	)
	if rep := p.Replica; rep == nil {
		wait = p.Log.Wait()
		l.end = p.Log.EndOffset()
	} else {
		if rep.Role() != replica.RoleLeader {
			return sharePartitionLog{}, 0, nil, kerr.NotLeaderForPartition
		}
		wait = rep.Changed()
		l.end, epoch = rep.HighWatermark(), rep.LeaderEpoch()
	}
	if readCommitted {
		l.end = min(l.end, p.Log.LastStableOffset(l.end))
	}
	return l, epoch, wait, nil
}

// shareTopics resolves topic ids, once per request.
type shareTopics struct {
	b     *broker.Broker
	names map[[16]byte]string
}

func (t *shareTopics) name(id [16]byte) (string, bool) {
	if n, ok := t.names[id]; ok {
		return n, n != ""
	}
	ti, ok := t.b.TopicByID(id)
	if t.names == nil {
		t.names = map[[16]byte]string{}
	}
	t.names[id] = ti.Name
	return ti.Name, ok
}

// shareAcknowledge applies one partition's acknowledgements and returns the
// error code for it.
func shareAcknowledge(ctx context.Context, r *Request, sc *group.ShareCoordinator, groupID, member, topic string, partition int32, acks []shareAckBatch, renew bool) int16 {
	if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, topic) {
		return kerr.TopicAuthorizationFailed.Code
	}
	_, epoch, _, err := sharePartition(r.Env.Broker, topic, partition, false)
	if err != nil {
		return group.ShareErrorCode(err)
	}
	return group.ShareErrorCode(sc.Acknowledge(ctx, groupID, member, topic, partition, epoch, toShareAcks(acks), renew))
}

func handleShareFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ShareFetchRequest)
	resp := r.NewResponse().(*kmsg.ShareFetchResponse)
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	groupID, member, sc, e, msg := shareMember(r, req.GroupID, req.MemberID)
	if e != nil {
		return fail(e, msg)
	}
	resp.AcquisitionLockTimeoutMillis = int32(sc.Config().RecordLockDuration / time.Millisecond)

	topics := &shareTopics{b: r.Env.Broker}
	out := &shareFetchOut{}
	type ackReq struct {
		id        [16]byte
		topic     string
		partition int32
		acks      []shareAckBatch
	}
	var (
		add, forget []group.TopicPartition
		acks        []ackReq
		unknown     []ackReq
		ids         = map[string][16]byte{}
	)
	for _, t := range req.Topics {
		name, ok := topics.name(t.TopicID)
		for _, p := range t.Partitions {
			if !ok {
				unknown = append(unknown, ackReq{id: t.TopicID, partition: p.Partition})
				continue
			}
			ids[name] = t.TopicID
			add = append(add, group.TopicPartition{Topic: name, Partition: p.Partition})
			if len(p.AcknowledgementBatches) > 0 {
				a := ackReq{id: t.TopicID, topic: name, partition: p.Partition}
				for _, b := range p.AcknowledgementBatches {
					a.acks = append(a.acks, shareAckBatch{b.FirstOffset, b.LastOffset, b.AcknowledgeTypes})
				}
				acks = append(acks, a)
			}
		}
	}
	for _, ft := range req.ForgottenTopicsData {
		if name, ok := topics.name(ft.TopicID); ok {
			for _, p := range ft.Partitions {
				forget = append(forget, group.TopicPartition{Topic: name, Partition: p})
			}
		}
	}
	if req.ShareSessionEpoch == group.ShareSessionInitial && (len(acks) > 0 || req.IsRenewAck) {
		return fail(kerr.InvalidRequest, "Acknowledge data present on initial epoch of share session.")
	}
	if req.ShareSessionEpoch < group.ShareSessionFinal {
		return fail(kerr.InvalidShareSessionEpoch, "")
	}
	session, err := sc.ShareSessionUpdate(groupID, member, req.ShareSessionEpoch, true, add, forget)
	if err != nil {
		resp.ErrorCode = group.ShareErrorCode(err)
		return resp, nil
	}
	if req.ShareSessionEpoch == group.ShareSessionInitial {
		// As Kafka, the session lives as long as this connection.
		sc.BindShareSession(ctx, groupID, member)
	}
	for _, u := range unknown {
		out.get(u.id, u.partition).ErrorCode = kerr.UnknownTopicID.Code
	}
	for _, a := range acks {
		out.get(a.id, a.partition).AcknowledgeErrorCode = shareAcknowledge(ctx, r, sc, groupID, member, a.topic, a.partition, a.acks, req.IsRenewAck)
	}
	if req.ShareSessionEpoch == group.ShareSessionFinal {
		sc.CloseShareSession(groupID, member)
		out.fill(resp)
		return resp, nil
	}
	if req.IsRenewAck {
		out.fill(resp)
		return resp, nil // renewing fetches nothing (KIP-1222)
	}

	for _, tp := range session {
		if _, ok := ids[tp.Topic]; !ok {
			if ti, ok := r.Env.Broker.Topic(tp.Topic); ok {
				ids[tp.Topic] = ti.ID
			}
		}
	}
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = 500
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	if n := len(session); n > 1 {
		// Start each request at another partition, so that MaxRecords
		// does not always go to the same one.
		start := int(uint32(req.ShareSessionEpoch) % uint32(n))
		session = append(session[start:], session[:start]...)
	}
	denied := map[string]bool{}
	for {
		var (
			waits   []<-chan struct{}
			next    time.Time
			got     bool
			records = maxRecords
			budget  = maxBytes
		)
		type result struct {
			tp   group.TopicPartition
			code int16
			res  group.ShareAcquireResult
		}
		var results []result
		for _, tp := range session {
			if records <= 0 || budget <= 0 && got {
				break // only the first partition with records may exceed MaxBytes (KIP-74)
			}
			if _, seen := denied[tp.Topic]; !seen {
				denied[tp.Topic] = !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, tp.Topic)
			}
			if denied[tp.Topic] {
				results = append(results, result{tp: tp, code: kerr.TopicAuthorizationFailed.Code})
				continue
			}
			pl, epoch, wait, err := sharePartition(r.Env.Broker, tp.Topic, tp.Partition, sc.Config().ReadCommitted())
			if err != nil {
				results = append(results, result{tp: tp, code: group.ShareErrorCode(err)})
				continue
			}
			waits = append(waits, wait)
			res, err := sc.Acquire(ctx, groupID, member, tp.Topic, tp.Partition, epoch, pl, records, max(budget, 1))
			if res.Changed != nil {
				waits = append(waits, res.Changed)
			}
			if !res.NextExpiry.IsZero() && (next.IsZero() || res.NextExpiry.Before(next)) {
				next = res.NextExpiry
			}
			if err != nil {
				results = append(results, result{tp: tp, code: group.ShareErrorCode(err)})
				continue
			}
			if len(res.Acquired) > 0 {
				got = true
				for _, a := range res.Acquired {
					records -= int(a.Last - a.First + 1)
				}
				budget -= len(res.Records)
				results = append(results, result{tp: tp, res: res})
			}
		}
		if got || len(results) > 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			for _, res := range results {
				id, ok := ids[res.tp.Topic]
				if !ok {
					continue
				}
				rp := out.get(id, res.tp.Partition)
				rp.ErrorCode = res.code
				if res.code == 0 {
					rp.Records = res.res.Records
					for _, a := range res.res.Acquired {
						rp.AcquiredRecords = append(rp.AcquiredRecords, kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{
							FirstOffset: a.First, LastOffset: a.Last, DeliveryCount: a.DeliveryCount,
						})
					}
				}
			}
			out.fill(resp)
			return resp, nil
		}
		// Park until new records, a release, a lock expiry, the deadline
		// or the connection ending.
		until := deadline
		if !next.IsZero() && next.Before(until) {
			until = next
		}
		timer := time.NewTimer(max(time.Until(until), 0))
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
		}
		for _, w := range waits {
			if w != nil {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
			}
		}
		reflect.Select(cases)
		timer.Stop()
	}
}

// shareFetchOut collects the response partitions, in first-touched order.
type shareFetchOut struct {
	order []shareOutKey
	parts map[shareOutKey]*kmsg.ShareFetchResponseTopicPartition
}

type shareOutKey struct {
	id        [16]byte
	partition int32
}

func (o *shareFetchOut) get(id [16]byte, partition int32) *kmsg.ShareFetchResponseTopicPartition {
	k := shareOutKey{id, partition}
	if rp := o.parts[k]; rp != nil {
		return rp
	}
	if o.parts == nil {
		o.parts = map[shareOutKey]*kmsg.ShareFetchResponseTopicPartition{}
	}
	rp := kmsg.NewShareFetchResponseTopicPartition()
	rp.Partition = partition
	rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
	o.parts[k] = &rp
	o.order = append(o.order, k)
	return &rp
}

func (o *shareFetchOut) fill(resp *kmsg.ShareFetchResponse) {
	index := map[[16]byte]int{}
	for _, k := range o.order {
		i, ok := index[k.id]
		if !ok {
			i = len(resp.Topics)
			index[k.id] = i
			resp.Topics = append(resp.Topics, kmsg.ShareFetchResponseTopic{TopicID: k.id})
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, *o.parts[k])
	}
}
