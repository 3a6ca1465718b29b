package protocol

// Fetch (key 1), versions 4-16.
//
// Consumers (ReplicaID -1) read up to the high watermark (HWM), honouring
// MaxBytes (request, capped by the broker's fetch.max.bytes; 0 or less
// means no more than the first batch), PartitionMaxBytes (partition) and
// KIP-74: the first partition with data returns at least one whole batch
// even if it is larger than the limits. Long poll: when fewer than MinBytes are available the
// request waits, up to MaxWaitMillis, for the HWM of a requested partition
// to move, then answers with what it has; broker shutdown or the
// connection closing ends the wait early. Empty record sets are empty
// bytes, never null. Fetch sessions (KIP-227, v7+) are kept for consumers
// and replicas alike (fetch_session.go): a consumer that asks for one
// (SessionEpoch 0) then sends only the partitions whose position moved and
// gets only those with something new; SessionEpoch -1 (librdkafka) fetches
// in full without one. CurrentLeaderEpoch
// (v9+) is checked (KIP-320: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH),
// and LastFetchedEpoch (v12+) against the epoch cache: a consumer whose log
// position diverged gets DivergingEpoch. v13+ name topics by UUID
// (UNKNOWN_TOPIC_ID for an unknown one).
//
// Transactions (docs/transactions.md): every partition answer carries the
// last stable offset (LSO: below it every transaction is decided and its
// marker replicated). A read_committed consumer (IsolationLevel 1) reads
// below the LSO only and gets AbortedTransactions: the aborted
// transactions (producer ID, first offset) overlapping the returned
// records, from the aborted-transaction index; its client drops their
// records. read_uncommitted reads up to the HWM, as without transactions.
// Control batches are returned to both (clients skip them). A parked
// fetch wakes when the HWM or the log moves, which is when the LSO moves.
//
// In a cluster only the leader serves v4-10 consumers; v11+ consumers may
// fetch from any replica (KIP-392: a follower serves up to its HWM, which
// the leader propagates in replica fetch responses), and a leader asked by a
// consumer that sent its rack (client.rack) names an in-sync replica in
// that rack as PreferredReadReplica instead of returning data.
//
// With ACLs, a consumer fetch needs READ on each topic
// (TOPIC_AUTHORIZATION_FAILED on its partitions) and a replica fetch
// CLUSTER_ACTION on the cluster: a client posing as a replica without it
// gets TOPIC_AUTHORIZATION_FAILED on every partition (Kafka's answer),
// before its position is looked at.
//
// Replica fetches (ReplicaID = a follower's broker ID; v15+: ReplicaState.ID)
// come from registered brokers only: a fetch naming a broker that is not
// registered, or that registered as sending its broker epoch
// (meta.BrokerInfo.FetchEpoch) and does not send the current one in
// ReplicaState (KIP-903's tagged field, read at v12+), or that registered
// with a fetch token (meta.BrokerInfo.FetchToken, a secret only the
// metadata store holds) and does not send it (replica.TagReplicaToken), gets
// NOT_LEADER_OR_FOLLOWER on every partition, as Kafka answers a stale
// replica epoch, and is counted in strata_replica_fetch_refused_total.
// They are served by the leader only: the fetch offset is the follower's log end offset, reported
// to broker/replica (HWM, ISR); records are read up to the leader's log end,
// or the divergence point is returned when the follower's last fetched
// epoch does not match (the follower truncates to it). Every response
// carries the leader's HWM; a parked replica fetch returns on new data, not
// on an HWM move alone (followers learn it with the next response, at most
// replica.fetch.wait.max.ms later when the partition is idle), except for
// the partitions a follower serves to consumers (KIP-392): tagged
// replica.TagHWMWake, an HWM above the follower's answers the fetch.
//
// Tiered topics (remote.storage.enable, docs/tiered-storage.md): a consumer
// fetch below the local log start is served from the slow tier
// (fetchRemote; KAFKA_STORAGE_ERROR, retriable, when the bucket fails) and
// LogStartOffset is the tier's start; it carries the partition's LSO, and
// a read_committed one the aborted transactions from the tier's copies of
// the transaction indexes and the local log's. Replica fetches see the
// local log only.
//
// WAL replication (wal.enable, docs/replication.md): a replica fetch
// partition carrying the tagged field replica.TagWALPointers (v12+,
// flexible) accepts pointers: ranges covered by an uploaded WAL object are
// answered with pointers in the same tagged field of the response
// partition and no record bytes; a range being uploaded parks the fetch
// until the upload finishes; anything else is served inline. Consumer
// fetches and replica fetches without the tag never see the tag. While
// wal.policy replicates inline, the leader tells a follower that asks for
// pointers so once (the response's top-level replica.TagWALPolicy), and
// again when it turns to WAL objects: in between the follower fetches
// without tags, exactly as a classic follower, and is answered inline.

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
	"github.com/strata-dev/strata/broker/traffic"
)

func init() { register(kmsg.Fetch, 4, 16, handleFetch) }

// handleFetch serves a Fetch; a replica fetch's answer also carries the
// leader's wal.policy signal when it changes for the connection
// (replica.SignalWALPolicy): a follower of a leader inline by policy then
// fetches as a classic follower, without pointer tags.
func handleFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	resp, err := serveFetch(ctx, r)
	if err != nil {
		return resp, err
	}
	req, rm := r.Msg.(*kmsg.FetchRequest), r.Env.Broker.Replicas()
	if fr, ok := resp.(*kmsg.FetchResponse); ok && req.ReplicaID >= 0 && req.Version >= 12 && rm != nil && rm.WALEnabled() {
		replica.SignalWALPolicy(req, fr, rm.PolicyInline(), r.Client.walSaidInline)
	}
	return resp, nil
}

// maxFetchWait bounds MaxWaitMillis (clients send at most a few seconds;
// this keeps a bad value from parking a connection for days).
const maxFetchWait = 5 * time.Minute

func serveFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.FetchRequest)
	b := r.Env.Broker
	if req.Version >= 15 {
		// v15+ (KIP-903) names the fetching replica in ReplicaState only.
		req.ReplicaID = req.ReplicaState.ID
	}
	if req.ReplicaID >= 0 && !r.authorizedCluster(kmsg.ACLOperationClusterAction) {
		return refuseReplicaFetch(r, req, kerr.TopicAuthorizationFailed), nil
	}
	if rm := b.Replicas(); rm != nil && req.ReplicaID >= 0 {
		// Only a registered broker, with its current broker epoch and its
		// registration's secret, may report a follower's position (KIP-380
		// style; standalone brokers refuse replica fetches per partition
		// below).
		if err := rm.CheckReplicaFetcher(req.ReplicaID, replicaEpoch(req), replica.ReplicaToken(req)); err != nil {
			return refuseReplicaFetch(r, req, err), nil
		}
	}

	// A fetch may use a fetch session (fetch_session.go): its rounds
	// read the session's partitions (active), and the answer keeps only
	// what changed.
	var session sessionFetch
	if req.Version >= 7 {
		var code int16
		owner := ""
		if req.ReplicaID < 0 {
			owner = string(r.Principal())
		}
		if session, code = r.Env.fetchSessions().openAs(req, owner, time.Now()); code != 0 {
			resp := r.NewResponse().(*kmsg.FetchResponse)
			resp.ErrorCode = code
			return resp, nil
		}
		req = session.req
		defer session.release()
	}

	// done classifies a replica fetch's bytes: one that asked for WAL
	// pointers and got no record bytes is WAL metadata.
	done := func(resp *kmsg.FetchResponse) (kmsg.Response, error) {
		session.finish(resp)
		return resp, nil
	}
	if req.ReplicaID >= 0 {
		zone := ""
		if rm := b.Replicas(); rm != nil {
			if info, ok := rm.Broker(req.ReplicaID); ok {
				zone = info.Zone
			}
		}
		r.SetTraffic(traffic.ReplicationInline, zone)
		if asksPointers(b, req) || session.asksPointers(b) {
			done = func(resp *kmsg.FetchResponse) (kmsg.Response, error) {
				session.finish(resp)
				if replica.RecordBytes(resp) == 0 {
					r.SetTraffic(traffic.ReplicationWALMetadata, zone)
				}
				return resp, nil
			}
		}
	} else {
		r.Client.SetRack(req.Rack)
		r.SetTraffic(traffic.Consume, req.Rack)
	}

	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	wait = min(max(wait, 0), maxFetchWait)
	refreshEvery := quietRefresh(b)
	var timer, refresh *time.Timer
	for {
		// Take the wake-up channels before reading so that a change
		// between the read and the wait is not missed.
		var waits []<-chan struct{}
		var charge leaderCharge
		// An incremental session fetch reads the partitions that are not
		// quiet and learns of a change to the quiet ones on one channel,
		// changed (fetch_session.go).
		now := time.Now()
		visit, changed, due := session.active(req, now, refreshEvery)
		var visits *[]partVisit
		if session.session != nil || req.ReplicaID >= 0 {
			visits = new([]partVisit)
		}
		// READ is checked for every partition read, whether the
		// request named it or its session remembers it.
		resp, total := fetchOnce(r, b, visit, deniedFetchTopics(r, visit), &waits, &charge, visits)
		if visits != nil {
			session.visited(resp, *visits, now)
		}
		// A partition answered with an error (this broker no longer
		// leads it, an offset out of range, an unknown topic) ends the
		// wait at once, as in Kafka: the client has something to act on
		// (refresh its metadata, reset its position) and would otherwise
		// learn it only at MaxWaitMillis (franz-go's default: 5 s).
		answer := total >= int(req.MinBytes) || wait == 0 || len(waits) == 0 && changed == nil || ctx.Err() != nil || partitionError(resp)
		// So does, for a follower serving consumers of a partition (and
		// asking for it), an HWM above the one it has
		// (replica.TagHWMWake).
		if !answer && req.ReplicaID >= 0 && session.hwmNews(resp, *visits) {
			answer = true
			if rm := b.Replicas(); rm != nil {
				rm.CountHWMWake()
			}
		}
		if answer {
			charge.record()
			if timer != nil && total > 0 && req.ReplicaID < 0 {
				observeConsumerWake(b, resp)
			}
			return done(resp)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
			// Parked: the request's memory is small and bounded per
			// connection; the budget is for requests being decoded.
			r.ReleaseMemory()
		}
		// A quiet partition due for its refresh ends the park too.
		var refreshDue <-chan time.Time
		if !due.IsZero() {
			if d := max(time.Until(due), 0); refresh == nil {
				refresh = time.NewTimer(d)
				defer refresh.Stop()
			} else {
				refresh.Reset(d)
			}
			refreshDue = refresh.C
		}
		parkedAt := time.Now()
		chosen := park(ctx.Done(), timer.C, refreshDue, changed, waits)
		r.addParked(time.Since(parkedAt))
		if chosen < 2 {
			// Deadline or shutdown: answer with what is there now.
			var charge leaderCharge
			now := time.Now()
			visit, _, _ := session.active(req, now, refreshEvery)
			var visits *[]partVisit
			if session.session != nil {
				visits = new([]partVisit)
			}
			resp, _ := fetchOnce(r, b, visit, deniedFetchTopics(r, visit), new([]<-chan struct{}), &charge, visits)
			if visits != nil {
				session.visited(resp, *visits, now)
			}
			charge.record()
			return done(resp)
		}
	}
}

// partitionError reports whether a partition of resp carries an error.
func partitionError(resp *kmsg.FetchResponse) bool {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// park waits for the first of: done (0), deadline (1), refreshDue (2),
// changed (3) and waits (4 on). A session's fetch parks on its loud
// partitions' channels only (a few), the rest signal changed; a nil
// channel never fires.
func park(done <-chan struct{}, deadline, refreshDue <-chan time.Time, changed <-chan struct{}, waits []<-chan struct{}) int {
	switch len(waits) {
	case 0:
		select {
		case <-done:
			return 0
		case <-deadline:
			return 1
		case <-refreshDue:
			return 2
		case <-changed:
			return 3
		}
	case 1:
		select {
		case <-done:
			return 0
		case <-deadline:
			return 1
		case <-refreshDue:
			return 2
		case <-changed:
			return 3
		case <-waits[0]:
			return 4
		}
	}
	cases := make([]reflect.SelectCase, 0, len(waits)+4)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(refreshDue)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)})
	for _, w := range waits {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen
}

// quietRefresh is how often a quiet partition of a fetch session is read
// all the same (sessionFetch.active): a quarter of
// replica.lag.time.max.ms, so that a caught-up follower of a partition
// nobody writes stays in the ISR, and at most a second (for a consumer it
// carries what changes without a signal: the log start, a preferred read
// replica).
func quietRefresh(b *broker.Broker) time.Duration {
	refresh := time.Second
	if rm := b.Replicas(); rm != nil {
		refresh = min(refresh, max(rm.LagTimeMax()/4, 10*time.Millisecond))
	}
	return refresh
}

// deniedFetchTopics returns the topics (by name, or by ID from v13) of a
// consumer fetch that the principal may not READ; nil for replica fetches
// (authorized as a whole) and without an authorizer.
func deniedFetchTopics(r *Request, req *kmsg.FetchRequest) map[string]bool {
	if req.ReplicaID >= 0 || !r.authzOn() {
		return nil
	}
	var denied map[string]bool
	for _, rt := range req.Topics {
		name := rt.Topic
		if req.Version >= 13 {
			info, ok := r.Env.Broker.TopicByID(rt.TopicID)
			if !ok {
				continue // UNKNOWN_TOPIC_ID
			}
			name = info.Name
		}
		if !r.Authorized(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, name) {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[name] = true
		}
	}
	return denied
}

// replicaEpoch is the broker epoch a replica fetch carries in ReplicaState
// (a tagged field our followers send at v12 too), -1 when it carries none
// or one for another replica ID.
func replicaEpoch(req *kmsg.FetchRequest) int64 {
	if req.ReplicaState.ID != req.ReplicaID || req.ReplicaState.Epoch < 0 {
		return -1
	}
	return req.ReplicaState.Epoch
}

// refuseReplicaFetch answers every partition of a refused replica fetch
// with err's code (no session, no data, nothing recorded).
func refuseReplicaFetch(r *Request, req *kmsg.FetchRequest, err error) *kmsg.FetchResponse {
	resp := r.NewResponse().(*kmsg.FetchResponse)
	code := broker.ErrorCode(err)
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func asksPointers(b *broker.Broker, req *kmsg.FetchRequest) bool {
	if rm := b.Replicas(); rm == nil || !rm.WALEnabled() {
		return false
	}
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if replica.WantsPointers(&req.Topics[i].Partitions[j]) {
				return true
			}
		}
	}
	return false
}

// leaderCharge collects the bytes of one response that count against the
// leader replication quota. They are recorded once the response is
// chosen, so that every partition of a fetch sees the quota as it was
// before the fetch (as Kafka records after building the response): a
// fetch that finds room serves all its throttled partitions at once
// instead of one per round trip.
type leaderCharge struct {
	quota *replica.Throttle
	bytes int
}

func (c *leaderCharge) add(q *replica.Throttle, n int) {
	if q != nil {
		c.quota = q
		c.bytes += n
	}
}

func (c *leaderCharge) record() {
	if c.quota != nil {
		c.quota.Record(c.bytes)
	}
}

// fetchOnce builds a response from the current log state and returns it
// with the number of record bytes in it. If waits is not nil, the wake-up
// channel of every readable partition is appended to it. Bytes served to
// throttled replicas are added to charge.
//
// With visits (a fetch of a session), what each partition's read
// waits on is appended to it, in the response's order.
func fetchOnce(r *Request, b *broker.Broker, req *kmsg.FetchRequest, denied map[string]bool, waits *[]<-chan struct{}, charge *leaderCharge, visits *[]partVisit) (*kmsg.FetchResponse, int) {
	resp := r.NewResponse().(*kmsg.FetchResponse)
	// WAL pointers, in the form the follower asked for.
	ptrs := replica.NewPointerAnswer(replica.AsksCompactPointers(req))
	defer ptrs.Finish(resp)
	// fetch.max.bytes caps what the request asks for; 0 or less leaves
	// the first batch only (fetchPartition).
	budget := min(int(req.MaxBytes), r.Env.Limits.fetchMaxBytes())
	total := 0
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		topic, topicErr := rt.Topic, error(nil)
		if req.Version >= 13 {
			if info, ok := b.TopicByID(rt.TopicID); ok {
				topic = info.Name
			} else {
				topicErr = kerr.UnknownTopicID
			}
		}
		if topicErr == nil && denied[topic] {
			topicErr = kerr.TopicAuthorizationFailed
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{}
			n, err := 0, topicErr
			var pv partVisit
			before := 0
			if waits != nil {
				before = len(*waits)
			}
			if err == nil {
				n, err = fetchPartition(b, req, topic, rp, &sp, budget, total == 0, waits, ptrs, charge, &pv)
			}
			if visits != nil {
				if waits != nil {
					// No copy: the round appends after it, never into it.
					pv.park = (*waits)[before:len(*waits):len(*waits)]
				}
				*visits = append(*visits, pv)
			}
			if err != nil {
				sp.ErrorCode = broker.ErrorCode(err)
				sp.HighWatermark, sp.LastStableOffset = -1, -1
			}
			total += n
			budget -= n
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total
}

func fetchPartition(b *broker.Broker, req *kmsg.FetchRequest, topic string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition,
	budget int, first bool, waits *[]<-chan struct{}, ptrs *replica.PointerAnswer, charge *leaderCharge, pv *partVisit,
) (int, error) {
	p, err := b.Partition(topic, rp.Partition)
	if err != nil {
		return 0, err
	}
	rep := p.Replica
	var upTo int64 // read below this offset
	// With WAL replication, why a replica fetch gets record bytes inline.
	inlineReason := ""
	// The leader replication quota, when this fetch counts against it.
	var quota *replica.Throttle
	switch {
	case rep == nil:
		// Standalone: this broker is the whole ISR; HWM = log end.
		if req.ReplicaID >= 0 {
			return 0, kerr.NotLeaderForPartition
		}
		pv.src = standaloneSource{p.Log}
		if code := checkLeaderEpoch(rp.CurrentLeaderEpoch); code != 0 {
			return 0, kerr.ErrorForCode(code)
		}
		if waits != nil {
			*waits = append(*waits, p.Log.Wait())
		}
		upTo = p.Log.EndOffset()
		sp.HighWatermark = upTo
		if rp.FetchOffset > upTo {
			return 0, kerr.OffsetOutOfRange
		}
	case req.ReplicaID >= 0:
		// Woken by appends (new data). A moved HWM alone does not answer
		// a parked replica fetch (as in Kafka): the follower learns it
		// with its next response, which saves a round trip of cross-zone
		// bytes per HWM move; unless the follower serves consumers of the
		// partition and asked for HWM wakes (replica.TagHWMWake). A
		// fetch served through the WAL waits for uploads instead (below).
		pv.src = replicaSource{log: p.Log, rep: rep}
		appendWait := p.Log.Wait()
		pv.fetchOffset = rp.FetchOffset
		if pv.followerHWM, pv.wakeHWM = replica.HWMWake(&rp); pv.wakeHWM && waits != nil {
			// Its follower serves consumers of it (KIP-392) and asked to
			// be answered at an HWM move too (hwmNews): for a fetch
			// without a session, or a partition not subscribed yet, the
			// change channel is what says so.
			*waits = append(*waits, rep.Changed())
		}
		div, err := b.Replicas().ServeReplicaFetch(rep, req.ReplicaID, replicaEpoch(req), rp.FetchOffset, rp.LastFetchedEpoch, rp.CurrentLeaderEpoch)
		if err != nil {
			return 0, err
		}
		sp.HighWatermark = rep.HighWatermark()
		if div != nil {
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = div.Epoch, div.EndOffset
			sp.LastStableOffset, sp.LogStartOffset = p.Log.LastStableOffset(sp.HighWatermark), p.Log.StartOffset()
			return 0, nil
		}
		if quota = b.Replicas().LeaderQuota(rep, req.ReplicaID); quota != nil && quota.Exceeded() {
			// A throttled replica outside the ISR and the leader quota is
			// exceeded (Kafka's shouldLeaderThrottle): no data; the fetch
			// long-polls until the quota has room.
			sp.LastStableOffset, sp.LogStartOffset = p.Log.LastStableOffset(sp.HighWatermark), p.Log.StartOffset()
			if waits != nil {
				*waits = append(*waits, quota.Wait())
			}
			pv.unsignalled = true
			return 0, nil
		}
		upTo = p.Log.EndOffset()
		if rm := b.Replicas(); rm.WALEnabled() {
			inlineReason = replica.InlineFollowerAsked
			if rm.PolicyInline() {
				// Its follower fetches untagged because this leader said
				// it is inline by policy (replica.SignalWALPolicy).
				inlineReason = replica.InlinePolicy
			}
		}
		if rm := b.Replicas(); rm.WALEnabled() && replica.WantsPointers(&rp) && rp.FetchOffset >= p.Log.StartOffset() {
			// WAL replication: pointers for uploaded ranges, a wait for
			// ranges being uploaded, inline bytes otherwise.
			plan := rm.PlanWALFetchFor(rep, rp.FetchOffset, max(min(int(rp.PartitionMaxBytes), budget), 1), replica.AsksForeignPointers(req))
			if waits != nil {
				*waits = append(*waits, plan.Wait)
				if plan.Reason != "" {
					// Appends may be served inline.
					*waits = append(*waits, appendWait)
				}
				appendWait = nil
			}
			if len(plan.Pointers) > 0 {
				if err := ptrs.Set(sp, plan.Pointers); err != nil {
					return 0, err
				}
				sp.LastStableOffset, sp.LogStartOffset = p.Log.LastStableOffset(sp.HighWatermark), p.Log.StartOffset()
				n := 0
				for _, ptr := range plan.Pointers {
					n += int(ptr.Length)
				}
				charge.add(quota, n) // served by reference, replication all the same
				return n, nil
			}
			upTo, inlineReason = plan.InlineUpTo, plan.Reason
		}
		if waits != nil && appendWait != nil {
			*waits = append(*waits, appendWait)
		}
	default:
		// A consumer: woken when records become visible to it (an HWM
		// move, which is when the LSO moves) or the role changes.
		pv.src = consumerSource{rep}
		if err := rep.CheckReplica(rp.CurrentLeaderEpoch); err != nil {
			return 0, err
		}
		leader := rep.Role() == replica.RoleLeader
		if !leader && req.Version < 11 {
			return 0, kerr.NotLeaderForPartition
		}
		if !leader {
			// Its replica fetches ask for HWM wakes while consumers read
			// it here (replica.TagHWMWake).
			rep.NoteConsumerRead()
		}
		if waits != nil {
			*waits = append(*waits, rep.Changed())
		}
		if leader && req.Version >= 11 && req.Rack != "" {
			if id := b.PreferredReadReplica(topic, rp.Partition, req.Rack); id >= 0 {
				sp.PreferredReadReplica = id
				sp.HighWatermark = rep.HighWatermark()
				sp.LastStableOffset, sp.LogStartOffset = p.Log.LastStableOffset(sp.HighWatermark), p.Log.StartOffset()
				return 0, nil
			}
		}
		if d := rep.CheckDivergence(rp.FetchOffset, rp.LastFetchedEpoch); d != nil {
			sp.DivergingEpoch.Epoch, sp.DivergingEpoch.EndOffset = d.Epoch, d.EndOffset
			sp.HighWatermark = rep.HighWatermark()
			sp.LastStableOffset, sp.LogStartOffset = p.Log.LastStableOffset(sp.HighWatermark), p.Log.StartOffset()
			return 0, nil
		}
		upTo = rep.HighWatermark()
		sp.HighWatermark = upTo
		// Beyond the log end is out of range on the leader; a follower
		// that has not caught up yet answers with no data instead.
		if leader && rp.FetchOffset > p.Log.EndOffset() {
			return 0, kerr.OffsetOutOfRange
		}
	}
	start := p.Log.StartOffset()
	if req.ReplicaID < 0 {
		// Consumers read below the local log from the slow tier
		// (tiered topics); followers start at the local log start.
		if n, ok, err := fetchRemote(p, rp, sp, upTo, budget, first, req.IsolationLevel == 1); ok {
			return n, err
		}
		start = p.KnownStartOffset()
	}
	if rp.FetchOffset < start {
		// A follower behind the log start restarts its log here.
		sp.LogStartOffset = start
		return 0, kerr.OffsetOutOfRange
	}
	sp.LastStableOffset, sp.LogStartOffset = p.Log.LastStableOffset(sp.HighWatermark), start
	readCommitted := req.ReplicaID < 0 && req.IsolationLevel == 1
	if readCommitted {
		upTo = min(upTo, sp.LastStableOffset)
		sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	maxBytes := min(int(rp.PartitionMaxBytes), budget)
	if rp.FetchOffset >= upTo {
		return 0, nil
	}
	if maxBytes <= 0 && !first {
		pv.unread = true // the response is full
		return 0, nil
	}
	if maxBytes <= 0 {
		maxBytes = 1 // KIP-74: the first non-empty partition gets one batch
	}
	if testHookBeforeLocalRead != nil {
		testHookBeforeLocalRead(p)
	}
	res, err := p.Log.Read(rp.FetchOffset, maxBytes, upTo)
	if errors.Is(err, log.ErrOffsetOutOfRange) && req.ReplicaID < 0 && p.Tiered() != nil {
		// Local retention moved the start past the offset between the
		// check above and the read: it deletes only what the slow tier
		// holds, so the tier serves it (never OFFSET_OUT_OF_RANGE for
		// data that exists).
		if n, ok, err := fetchRemote(p, rp, sp, upTo, budget, first, readCommitted); ok {
			return n, err
		}
		return 0, fmt.Errorf("%w: the local log of %s-%d moved under the read at %d", kerr.KafkaStorageError, p.Topic, p.Index, rp.FetchOffset)
	}
	if errors.Is(err, log.ErrOffsetOutOfRange) {
		// Retention moved the start past the offset between the checks.
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
		return 0, err
	}
	if err != nil {
		return 0, err
	}
	if !first && len(res.Records) > maxBytes {
		// Only the first partition with data may exceed the limits (the log
		// always returns at least one whole batch).
		pv.unread = true
		return 0, nil
	}
	if len(res.Records) > 0 {
		sp.RecordBatches = res.Records
		if readCommitted {
			for _, a := range p.Log.AbortedTxns(rp.FetchOffset, res.HighestOffset+1) {
				t := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				t.ProducerID, t.FirstOffset = a.ProducerID, a.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, t)
			}
		}
		if inlineReason != "" {
			b.Replicas().CountWALInline(inlineReason, len(res.Records))
		}
		charge.add(quota, len(res.Records))
	}
	return len(res.Records), nil
}

// testHookBeforeLocalRead, set by tests only, runs between a fetch's
// checks of the log start and its local read (where retention may run).
var testHookBeforeLocalRead func(p *broker.Partition)

// fetchRemote serves a consumer fetch below the local log start of a
// tiered partition from the slow tier (broker/tier): whole batches of one
// remote segment, as a local read, with the partition's LSO; a
// read_committed fetch reads below the LSO and gets the aborted
// transactions overlapping the records (from the tier's copies of the
// segments' transaction indexes and the local log's). ok is false when
// the local log serves the offset. A failed remote read is
// KAFKA_STORAGE_ERROR (retriable).
func fetchRemote(p *broker.Partition, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition, upTo int64, budget int, first, readCommitted bool) (int, bool, error) {
	if p.Tiered() == nil || rp.FetchOffset >= p.Log.StartOffset() {
		// The local log serves it: nothing more on the consumer fetch path.
		return 0, false, nil
	}
	maxBytes := min(int(rp.PartitionMaxBytes), budget)
	if maxBytes <= 0 && !first {
		return 0, true, nil
	}
	lso := p.Log.LastStableOffset(sp.HighWatermark)
	if readCommitted {
		upTo = min(upTo, lso)
	}
	records, ok, err := p.ReadRemote(rp.FetchOffset, max(maxBytes, 1), upTo)
	if !ok {
		return 0, false, nil
	}
	if err != nil {
		return 0, true, err
	}
	sp.LastStableOffset, sp.LogStartOffset = lso, p.KnownStartOffset()
	if readCommitted {
		sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	}
	if !first && len(records) > maxBytes {
		return 0, true, nil
	}
	if readCommitted && len(records) > 0 {
		last, err := lastOffset(records)
		if err != nil {
			return 0, true, err
		}
		aborted, err := p.RemoteAbortedTxns(rp.FetchOffset, last+1)
		if err != nil {
			return 0, true, err
		}
		for _, a := range aborted {
			t := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			t.ProducerID, t.FirstOffset = a.ProducerID, a.FirstOffset
			sp.AbortedTransactions = append(sp.AbortedTransactions, t)
		}
	}
	sp.RecordBatches = records
	return len(records), true, nil
}

// lastOffset returns the last offset of the last of whole batches (the
// tier checked their frames and CRCs).
func lastOffset(records []byte) (int64, error) {
	last := int64(-1)
	for pos := 0; pos < len(records); {
		h, err := record.ParseHeader(records[pos:])
		if err != nil || h.Size() <= 0 || pos+h.Size() > len(records) {
			return -1, fmt.Errorf("%w: remote read returned a partial batch at byte %d", kerr.KafkaStorageError, pos)
		}
		last = h.LastOffset()
		pos += h.Size()
	}
	return last, nil
}
