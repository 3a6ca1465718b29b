package protocol

// Fetch (key 1), versions 4-16.
//
// Reads up to the high watermark (the log end offset on a single broker),
// honouring MaxBytes (request), PartitionMaxBytes (partition) and KIP-74:
// the first partition with data returns at least one whole batch even if it
// is larger than the limits. Long poll: when fewer than MinBytes are
// available the request waits, up to MaxWaitMillis, for an append to any
// requested partition (log.Wait), then answers with what it has; broker
// shutdown or the connection closing ends the wait early. Empty record
// sets are empty bytes, never null. Fetch sessions (KIP-227) are not kept:
// every response has session ID 0, which tells the client to send full
// requests; a request naming a session ID gets FETCH_SESSION_ID_NOT_FOUND.
// CurrentLeaderEpoch (v9+) is checked; LastStableOffset equals the high
// watermark (no transactions). v13+ name topics by UUID (UNKNOWN_TOPIC_ID
// for an unknown one). Follower fetching (ReplicaID >= 0) is not served by
// this single broker (the replication engineer adds it).

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/log"
)

func init() { register(kmsg.Fetch, 4, 16, handleFetch) }

// maxFetchWait bounds MaxWaitMillis (clients send at most a few seconds;
// this keeps a bad value from parking a connection for days).
const maxFetchWait = 5 * time.Minute

func handleFetch(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.FetchRequest)
	b := r.Env.Broker

	if req.Version >= 7 && req.SessionID != 0 {
		resp := r.NewResponse().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}
	if req.Version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		resp := r.NewResponse().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		return resp, nil
	}

	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	wait = min(max(wait, 0), maxFetchWait)
	var timer *time.Timer
	for {
		// Take the wake-up channels before reading so that an append
		// between the read and the wait is not missed.
		var waits []<-chan struct{}
		resp, total := fetchOnce(r, b, req, &waits)
		if total >= int(req.MinBytes) || wait == 0 || len(waits) == 0 || ctx.Err() != nil {
			return resp, nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		cases := make([]reflect.SelectCase, 0, len(waits)+2)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
		for _, w := range waits {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
		}
		chosen, _, _ := reflect.Select(cases)
		if chosen < 2 {
			// Deadline or shutdown: answer with what is there now.
			resp, _ := fetchOnce(r, b, req, nil)
			return resp, nil
		}
	}
}

// fetchOnce builds a response from the current log state and returns it
// with the number of record bytes in it. If waits is not nil, the wake-up
// channel of every readable partition is appended to it.
func fetchOnce(r *Request, b *broker.Broker, req *kmsg.FetchRequest, waits *[]<-chan struct{}) (*kmsg.FetchResponse, int) {
	resp := r.NewResponse().(*kmsg.FetchResponse)
	budget := int(req.MaxBytes)
	if req.Version < 3 || budget <= 0 {
		budget = int(^uint32(0) >> 1)
	}
	total := 0
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		topic, topicErr := rt.Topic, error(nil)
		if req.Version >= 13 {
			if info, ok := b.TopicByID(rt.TopicID); ok {
				topic = info.Name
			} else {
				topicErr = kerr.UnknownTopicID
			}
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{}
			n, err := 0, topicErr
			if err == nil {
				n, err = fetchPartition(b, topic, rp, &sp, budget, total == 0, waits)
			}
			if err != nil {
				sp.ErrorCode = broker.ErrorCode(err)
			}
			total += n
			budget -= n
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total
}

func fetchPartition(b *broker.Broker, topic string, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition,
	budget int, first bool, waits *[]<-chan struct{},
) (int, error) {
	p, err := b.Partition(topic, rp.Partition)
	if err != nil {
		return 0, err
	}
	if code := checkLeaderEpoch(rp.CurrentLeaderEpoch); code != 0 {
		return 0, kerr.ErrorForCode(code)
	}
	if waits != nil {
		*waits = append(*waits, p.Log.Wait())
	}
	hw := p.Log.EndOffset()
	start := p.Log.StartOffset()
	if rp.FetchOffset < start || rp.FetchOffset > hw {
		return 0, kerr.OffsetOutOfRange
	}
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hw, hw, start
	maxBytes := min(int(rp.PartitionMaxBytes), budget)
	if rp.FetchOffset == hw || maxBytes <= 0 && !first {
		return 0, nil
	}
	if maxBytes <= 0 {
		maxBytes = 1 // KIP-74: the first non-empty partition gets one batch
	}
	res, err := p.Log.Read(rp.FetchOffset, maxBytes, hw)
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
		return 0, nil
	}
	if len(res.Records) > 0 {
		sp.RecordBatches = res.Records
	}
	return len(res.Records), nil
}
