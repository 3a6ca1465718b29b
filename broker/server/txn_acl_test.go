package server

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/record"
)

// With ACLs, WriteTxnMarkers needs CLUSTER_ACTION (brokers and super
// users): a client that may write the topic but spoofs the coordinator's
// markers is refused and nothing is appended. A transactional produce
// needs WRITE on its TRANSACTIONAL_ID besides the topic's WRITE.
func TestTxnACLs(t *testing.T) {
	s := startACLBroker(t, nil)
	addr := s.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newUserClient(t, addr, "admin")
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "txn-acl"); err != nil {
		t.Fatal(err)
	}
	if err := allowACL(adm, ctx, kadm.NewACLs().Allow("User:alice").Topics("txn-acl").Operations(kadm.OpWrite, kadm.OpDescribe)); err != nil {
		t.Fatal(err)
	}
	alice := newUserClient(t, addr, "alice")

	marker := func(cl *kgo.Client) int16 {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = 4242, 0, true
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "txn-acl", Partitions: []int32{0}}}
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	end := func() int64 {
		t.Helper()
		ends, err := adm.ListEndOffsets(ctx, "txn-acl")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup("txn-acl", 0)
		return o.Offset
	}
	if code := marker(alice); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice's WriteTxnMarkers: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if e := end(); e != 0 {
		t.Fatalf("a refused marker was appended: end offset %d", e)
	}
	if code := marker(admin); code != 0 {
		t.Fatalf("super user's WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
	mfs, err := s.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	markers := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "strata_txn_markers_written_total" {
			for _, m := range mf.GetMetric() {
				markers[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	if markers["committed"] != 1 || markers["error"] != 1 || markers["aborted"] != 0 {
		t.Fatalf("strata_txn_markers_written_total %v, want committed 1, error 1", markers)
	}

	// DescribeProducers needs READ on the topic (alice may only write).
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "txn-acl", Partitions: []int32{0}}}
	for _, c := range []struct {
		cl   *kgo.Client
		want int16
	}{{alice, kerr.TopicAuthorizationFailed.Code}, {admin, 0}} {
		resp, err := dp.RequestWith(ctx, c.cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != c.want {
			t.Fatalf("DescribeProducers: %v, want %v", kerr.ErrorForCode(code), kerr.ErrorForCode(c.want))
		}
	}

	pid := int64(777) // unknown to the coordinator until InitProducerId below
	produce := func() int16 {
		t.Helper()
		spec := record.DefaultSpec()
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = pid, 0, 0, true
		b, err := record.Build(spec, []record.Record{{Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		id := "t-alice"
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 30000, &id
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "txn-acl", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: b}}}}
		resp, err := req.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional produce without WRITE on the transactional ID: %v", kerr.ErrorForCode(code))
	}
	if err := allowACL(adm, ctx, kadm.NewACLs().Allow("User:alice").TransactionalIDs("t-alice").Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	// KIP-890: the partition must be in the ID's transaction at its
	// coordinator (alice may WRITE the ID now).
	id := "t-alice"
	deadline := time.Now().Add(30 * time.Second)
	for {
		init := kmsg.NewPtrInitProducerIDRequest()
		init.TransactionalID, init.TransactionTimeoutMillis = &id, 60_000
		ir, err := init.RequestWith(ctx, alice)
		if err != nil {
			t.Fatal(err)
		}
		if ir.ErrorCode == 0 {
			pid = ir.ProducerID
			break
		}
		if ir.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || time.Now().After(deadline) {
			t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ir.ErrorCode))
		}
		time.Sleep(50 * time.Millisecond) // polling for the ACL to apply, not synchronisation
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = id, pid, 0
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "txn-acl", Partitions: []int32{0}}}
	if ar, err := add.RequestWith(ctx, alice); err != nil || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, ar)
	}
	for code := produce(); code != 0; code = produce() {
		if code != kerr.TransactionalIDAuthorizationFailed.Code || time.Now().After(deadline) {
			t.Fatalf("transactional produce with the ACL: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond) // polling for the ACL to apply, not synchronisation
	}
}
