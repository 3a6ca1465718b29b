package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/replica"
)

// TestReplicaFetchIdentity (issue #10 item 8, issue #26): a Fetch naming a
// follower's broker ID does not move that follower's position or the HWM
// unless it carries the follower's current broker epoch (KIP-380 style)
// and its registration's fetch token (meta.BrokerInfo.FetchToken, a secret
// of the metadata store, on every cluster whatever its listeners
// authenticate: the broker here has no authentication and no
// authorizer); refusals are NOT_LEADER_OR_FOLLOWER
// and counted in strata_replica_fetch_refused_total. Broker 1 leads a
// partition replicated on [1 2]; broker 2 is registered (as a current
// broker that sends its epoch) but runs no broker, so only the test's raw
// fetches speak for it.
func TestReplicaFetchIdentity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcd := metatest.Start(t)
	b1 := brokertest.Start(t, brokertest.ClusterOptions(etcd.Endpoints(), 1, "a",
		brokertest.WithSetting("replica.lag.time.max.ms", "600000"))...)
	store, err := meta.New(etcd, "test")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := store.RegisterBroker(ctx, meta.BrokerInfo{ID: 2, Zone: "b", FetchEpoch: true,
		Listeners: []meta.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 1, SecurityProtocol: "PLAINTEXT"}}}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	epoch := reg.Info().Epoch
	token, err := hex.DecodeString(reg.Info().FetchToken)
	if err != nil || len(token) != 16 {
		t.Fatalf("registration's fetch token %q: want 32 hex digits (%v)", reg.Info().FetchToken, err)
	}
	if _, err := store.CreateTopic(ctx, meta.TopicSpec{Name: "ident", Assignment: [][]int32{{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(newClient(t, []string{b1.Addr()}))
	prod := newClient(t, []string{b1.Addr()}, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	const n = 5
	waitFor(t, "broker 1 to take produce requests", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		return prod.ProduceSync(pctx, &kgo.Record{Topic: "ident", Value: []byte("v")}).FirstErr() == nil
	})
	for range n - 1 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "ident", Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if h := highWatermark(t, adm, "ident"); h != 0 {
		t.Fatalf("HWM %d before follower 2 fetched, want 0", h)
	}

	conn, err := net.Dial("tcp", b1.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	corr := int32(0)
	// fetch sends a replica fetch as broker 2 at the log end, with
	// replica.TagReplicaToken = tok unless nil, and returns the partition's
	// error code.
	fetch := func(version int16, replicaState *kmsg.FetchRequestReplicaState, tok []byte) int16 {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		req.ReplicaID = 2
		if replicaState != nil {
			req.ReplicaState = *replicaState
		}
		req.MaxWaitMillis, req.SessionEpoch = 0, -1
		if tok != nil {
			req.UnknownTags.Set(replica.TagReplicaToken, tok)
		}
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "ident"
		if version >= 13 {
			st, err := adm.ListTopics(ctx, "ident")
			if err != nil {
				t.Fatal(err)
			}
			rt.TopicID = st["ident"].ID
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = n, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		corr++
		if _, err := conn.Write(brokertest.RequestFrame(req, corr)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatal(err)
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			t.Fatal(err)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		// Correlation ID, then the flexible header's empty tagged fields.
		if err := resp.ReadFrom(body[5:]); err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	refused := []struct {
		name    string
		version int16
		state   *kmsg.FetchRequestReplicaState
		token   []byte
	}{
		{"no broker epoch", 12, nil, token},
		{"a stale broker epoch", 12, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch - 1}, token},
		{"a broker epoch newer than registered", 12, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch + 1}, token},
		{"the epoch of another broker ID", 12, &kmsg.FetchRequestReplicaState{ID: 3, Epoch: epoch}, token},
		{"v15 ReplicaState with a stale epoch", 15, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch - 1}, token},
		// Issue #26: the broker epoch is an etcd revision, which a client
		// finds in a few thousand tries; the registration's fetch token
		// is what proves the fetch is broker 2's.
		{"its current epoch but no fetch token", 12, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch}, nil},
		{"its current epoch and a wrong fetch token", 12, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch}, bytes.Repeat([]byte{0x5a}, 16)},
		{"v15, its current epoch, no fetch token", 15, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch}, nil},
	}
	for _, r := range refused {
		if code := fetch(r.version, r.state, r.token); code != kerr.NotLeaderForPartition.Code {
			t.Errorf("replica fetch as broker 2 with %s: %v, want NOT_LEADER_OR_FOLLOWER", r.name, kerr.ErrorForCode(code))
		}
		if h := highWatermark(t, adm, "ident"); h != 0 {
			t.Fatalf("a replica fetch as broker 2 with %s moved the HWM to %d", r.name, h)
		}
	}
	var count float64
	mfs, err := b1.Server().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "strata_replica_fetch_refused_total" {
			for _, m := range mf.GetMetric() {
				count += m.GetCounter().GetValue()
			}
		}
	}
	if count != float64(len(refused)) {
		t.Errorf("strata_replica_fetch_refused_total %v, want %d", count, len(refused))
	}
	// Broker 2's own fetch, with its epoch and its token, counts.
	if code := fetch(12, &kmsg.FetchRequestReplicaState{ID: 2, Epoch: epoch}, token); code != 0 {
		t.Fatalf("replica fetch as broker 2 with its epoch and fetch token: %v", kerr.ErrorForCode(code))
	}
	if h := highWatermark(t, adm, "ident"); h != n {
		t.Fatalf("HWM %d after broker 2 fetched at %d with its epoch and fetch token, want %d", h, n, n)
	}
}
