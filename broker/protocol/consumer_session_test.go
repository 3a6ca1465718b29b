package protocol_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestConsumerFetchSession plays a consumer's fetch session (KIP-227) with
// raw Fetch requests on a standalone broker: a full fetch asking for a
// session gets one; an incremental fetch that leaves a partition out
// still gets that partition's new records, from the offset last named; a
// parked incremental fetch wakes when a partition it left out gets
// records; wrong epochs and unknown IDs get Kafka's errors and leave the
// session usable; SessionEpoch -1 (librdkafka) fetches in full without a
// session; a closed session is gone.
func TestConsumerFetchSession(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	const topic = "consumer-session"
	createTopic(t, adm, topic, 3, nil)
	id := topicID(t, adm, topic)
	prod := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32, v string) {
		t.Helper()
		if err := prod.ProduceSync(testCtx(t), &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for p := range int32(3) {
		produce(p, fmt.Sprintf("p%d-0", p))
	}
	cl := newClient(t, b.Addr())

	// fetch sends a Fetch (kgo picks v16: topics by ID) naming offsets
	// (partition → fetch offset).
	fetch := func(session, epoch int32, maxWait int32, offsets map[int32]int64) *kmsg.FetchResponse {
		t.Helper()
		req := brokertest.ConsumerFetch(topic, id, session, epoch, maxWait, offsets)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// values is what resp carries: partition → the values of its records.
	values := func(resp *kmsg.FetchResponse) map[int32][]string {
		t.Helper()
		out := map[int32][]string{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
				out[rp.Partition] = nil
				fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: rp.Partition}, &rp, kgo.DefaultDecompressor(), nil)
				for _, r := range fp.Records {
					out[rp.Partition] = append(out[rp.Partition], string(r.Value))
				}
			}
		}
		return out
	}

	full := fetch(0, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	session := full.SessionID
	if full.ErrorCode != 0 || session == 0 {
		t.Fatalf("a consumer asking for a session: error %v, session %d; want a session", kerr.ErrorForCode(full.ErrorCode), session)
	}
	if got := values(full); len(got) != 3 || got[0][0] != "p0-0" || got[2][0] != "p2-0" {
		t.Fatalf("the session's full fetch answered %v, want the 3 partitions' records", got)
	}

	// Caught up everywhere: an incremental fetch naming the new positions
	// has nothing to tell.
	if got := values(fetch(session, 1, 50, map[int32]int64{0: 1, 1: 1, 2: 1})); len(got) != 0 {
		t.Fatalf("nothing new: answered %v, want no partition", got)
	}
	// A record to partition 1: an incremental fetch naming nothing gets
	// it, from the offset the session remembers.
	produce(1, "p1-1")
	resp := fetch(session, 2, 60_000, nil)
	if got := values(resp); !slices.Equal(slices.Collect(maps.Keys(got)), []int32{1}) || !slices.Equal(got[1], []string{"p1-1"}) {
		t.Fatalf("after a record to partition 1 the incremental fetch answered %v, want 1: [p1-1]", got)
	}
	if resp.SessionID != session {
		t.Fatalf("incremental answer has session %d, want %d", resp.SessionID, session)
	}

	// A parked incremental fetch wakes for a partition it left out. If it
	// did not, it would wait for its MaxWait (longer than testCtx) and
	// fail.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 120_000, 1, 1<<20
		req.SessionID, req.SessionEpoch = session, 3
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 1, 2, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	produce(2, "p2-1")
	resp = <-done
	if resp == nil {
		t.FailNow()
	}
	if got := values(resp); !slices.Equal(got[2], []string{"p2-1"}) {
		t.Fatalf("the parked fetch answered %v, want 2: [p2-1]", got)
	}

	// Wrong epoch, unknown session: errors, and the session carries on.
	if code := fetch(session, 99, 0, nil).ErrorCode; code != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("epoch 99: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(code))
	}
	if code := fetch(session+1000, 1, 0, nil).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("an unknown session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
	produce(0, "p0-1")
	if got := values(fetch(session, 4, 60_000, map[int32]int64{2: 2})); !slices.Equal(got[0], []string{"p0-1"}) || len(got) != 1 {
		t.Fatalf("the session after the errors answered %v, want 0: [p0-1]", got)
	}

	// librdkafka's way: no session, every partition in full.
	resp = fetch(0, -1, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if got := values(resp); resp.SessionID != 0 || len(got) != 3 || len(got[1]) != 2 {
		t.Fatalf("sessionless fetch: session %d, answered %v; want no session and all 3 partitions", resp.SessionID, got)
	}

	// Closing the session (epoch -1) fetches in full; the ID is gone.
	resp = fetch(session, -1, 0, map[int32]int64{0: 2})
	if resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("closing the session: error %v, session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	if code := fetch(session, 5, 0, nil).ErrorCode; code != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a closed session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(code))
	}
}
