package controllers

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/brokertest"
)

// TestAdoptionNote: the TopicAdopted note states the replication factor
// of a topic the brokers report whole, and waits (no note) while a
// broker's answer lists partitions without their replicas (its metadata
// lags behind the topic's creation), instead of announcing 0.
func TestAdoptionNote(t *testing.T) {
	part := func(id int32, replicas ...int32) kadm.PartitionDetail {
		p := kadm.PartitionDetail{Topic: "legacy", Partition: id, Leader: -1, LeaderEpoch: -1, Replicas: replicas, ISR: replicas}
		if len(replicas) > 0 {
			p.Leader, p.LeaderEpoch = replicas[0], 0
		} else {
			p.Err = kerr.LeaderNotAvailable
		}
		return p
	}
	topic := func(parts ...kadm.PartitionDetail) kadm.TopicDetail {
		td := kadm.TopicDetail{Topic: "legacy", Partitions: kadm.PartitionDetails{}}
		for _, p := range parts {
			td.Partitions[p.Partition] = p
		}
		return td
	}
	for _, tc := range []struct {
		name     string
		td       kadm.TopicDetail
		recorded string
		note     string
	}{
		{name: "whole, RF 1", td: topic(part(0, 1), part(1, 2)),
			note: "adopted existing topic legacy (2 partitions, replication factor 1); its configs converge to the spec"},
		{name: "whole, RF 3", td: topic(part(0, 1, 2, 3), part(1, 2, 3, 1), part(2, 3, 1, 2)),
			note: "adopted existing topic legacy (3 partitions, replication factor 3); its configs converge to the spec"},
		{name: "no partition has its replicas yet", td: topic(part(0), part(1))},
		{name: "one partition without its replicas", td: topic(part(0, 1, 2), part(1))},
		{name: "no partitions yet", td: topic()},
		{name: "recorded before (created or adopted)", td: topic(part(0, 1)), recorded: "AAAAAAAAAAAAAAAAAAAAAA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := adoptionNote("legacy", tc.td, tc.recorded); got != tc.note {
				t.Errorf("note %q, want %q", got, tc.note)
			}
		})
	}
}

// TestTopicAdoptedWhileMetadataLags reconciles a KafkaTopic for an
// existing topic while the broker the operator asks answers Metadata as a
// broker whose metadata lags behind the topic's creation does: the
// topic's partitions, each with LEADER_NOT_AVAILABLE and no replicas
// (lagProxy). The reconcile must neither announce the adoption with a
// replication factor of 0 nor record one in status nor start a
// reassignment; once the answers are whole, the adoption is announced
// once, with the replication factor the topic has.
func TestTopicAdoptedWhileMetadataLags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := brokertest.StartCluster(t, []string{"a"})
	direct, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	adm := kadm.NewClient(direct)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "legacy_Events"); err != nil {
		t.Fatalf("create topic: %v", err)
	}

	proxy := startLagProxy(t, c.Addrs()[0], "legacy_Events")
	proxy.lagging.Store(true)
	pool := NewAdminPool(&staticEndpoints{seeds: []string{proxy.addr()}})
	defer pool.Close()

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, strata.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kc := &strata.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kafka"}}
	kt := &strata.KafkaTopic{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "legacy-events", Generation: 1},
		Spec: strata.KafkaTopicSpec{ClusterRef: strata.LocalObjectReference{Name: "kafka"}, TopicName: "legacy_Events",
			Partitions: 2, ReplicationFactor: 1},
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(kc, kt).WithStatusSubresource(kt).
		WithIndex(&strata.KafkaTopic{}, indexTopicCluster, func(o client.Object) []string {
			return []string{o.(*strata.KafkaTopic).Spec.ClusterRef.Name}
		}).Build()
	rec := events.NewFakeRecorder(100)
	r := &KafkaTopicReconciler{Client: cl, Recorder: rec, Admin: pool}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "legacy-events"}}
	adopted := func() []string {
		var out []string
		for {
			select {
			case e := <-rec.Events:
				if strings.Contains(e, " "+EventTopicAdopted+" ") {
					out = append(out, e)
				}
			default:
				return out
			}
		}
	}
	status := func() strata.KafkaTopicStatus {
		got := &strata.KafkaTopic{}
		if err := cl.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}

	// Lagging answers: nothing announced or recorded, no reassignment,
	// and a prompt look again.
	for round := range 2 {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatalf("lagging round %d: %v", round, err)
		}
		if ev := adopted(); len(ev) > 0 {
			t.Fatalf("lagging round %d announced %q; the answer had no replicas to count", round, ev)
		}
		if res.RequeueAfter <= 0 || res.RequeueAfter > topicReassignPoll {
			t.Errorf("lagging round %d: requeue after %v, want at most %v", round, res.RequeueAfter, topicReassignPoll)
		}
		st := status()
		if st.TopicID != "" || st.ReplicationFactor != 0 || len(st.Partitions) != 0 {
			t.Errorf("lagging round %d recorded status from an incomplete answer: topicId %q, replication factor %d, partitions %v",
				round, st.TopicID, st.ReplicationFactor, st.Partitions)
		}
		ready := meta.FindStatusCondition(st.Conditions, strata.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonCreating {
			t.Errorf("lagging round %d: Ready %+v, want False/%s", round, ready, ReasonCreating)
		}
	}
	if n := proxy.stripped.Load(); n == 0 {
		t.Fatal("the proxy never answered for a lagging broker: the test tested nothing")
	}
	md, err := adm.Metadata(ctx, "legacy_Events")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics["legacy_Events"].Partitions {
		if len(p.Replicas) != 1 {
			t.Fatalf("partition %d has replicas %v after the lagging rounds; the operator moved them", p.Partition, p.Replicas)
		}
	}

	// The broker caught up: adopted once, with the topic's replication
	// factor. (The admin client may answer from its metadata cache for up
	// to adminMetadataMinAge, so the rounds go on until a whole answer.)
	proxy.lagging.Store(false)
	var ev []string
	for deadline := time.Now().Add(30 * time.Second); len(ev) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no adoption event 30 s after the broker caught up")
		}
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatalf("caught-up round: %v", err)
		}
		if ev = adopted(); len(ev) == 0 {
			time.Sleep(min(res.RequeueAfter, 200*time.Millisecond)) // poll interval
		}
	}
	if len(ev) != 1 || !strings.Contains(ev[0], "adopted existing topic legacy_Events (2 partitions, replication factor 1)") {
		t.Fatalf("adoption events %q, want one with replication factor 1", ev)
	}
	for round := range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("round %d after the adoption: %v", round, err)
		}
		if ev := adopted(); len(ev) > 0 {
			t.Fatalf("round %d after the adoption announced it again: %q", round, ev)
		}
	}
	if st := status(); st.TopicID == "" || st.ReplicationFactor != 1 || st.PartitionCount != 2 {
		t.Errorf("status after catching up: topicId %q, replication factor %d, partitions %d; want an ID, 1, 2", st.TopicID, st.ReplicationFactor, st.PartitionCount)
	}
}

// lagProxy stands between the operator's admin client and one broker. It
// rewrites the broker's address in Metadata answers to its own (so the
// client keeps talking through it) and, while lagging is set, answers for
// topic as a broker whose metadata snapshot has the topic's partition
// count but not yet its partitions' states: LEADER_NOT_AVAILABLE, no
// leader, no replicas, no ISR.
type lagProxy struct {
	ln      net.Listener
	target  string
	topic   string
	lagging atomic.Bool
	// stripped counts the answers rewritten while lagging.
	stripped atomic.Int64
}

func startLagProxy(t *testing.T, target, topic string) *lagProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lagProxy{ln: ln, target: target, topic: topic}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			bc, err := net.Dial("tcp", target)
			if err != nil {
				cc.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, cc, bc)
			mu.Unlock()
			wg.Go(func() { p.serve(cc, bc) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *lagProxy) addr() string { return p.ln.Addr().String() }

// serve relays one connection: requests as they are (noting each one's
// key and version by correlation ID), responses through rewrite.
func (p *lagProxy) serve(cc, bc net.Conn) {
	defer cc.Close()
	defer bc.Close()
	type reqInfo struct{ key, version int16 }
	var mu sync.Mutex
	inflight := map[int32]reqInfo{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer bc.Close()
		for {
			frame, err := readFrame(cc)
			if err != nil {
				return
			}
			if len(frame) >= 12 {
				mu.Lock()
				inflight[int32(binary.BigEndian.Uint32(frame[8:]))] = reqInfo{int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:]))}
				mu.Unlock()
			}
			if _, err := bc.Write(frame); err != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(bc)
		if err != nil {
			break
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:]))
		mu.Lock()
		ri, ok := inflight[corr]
		delete(inflight, corr)
		mu.Unlock()
		if ok && ri.key == int16(kmsg.Metadata) {
			if frame, err = p.rewrite(frame, ri.version); err != nil {
				break
			}
		}
		if _, err := cc.Write(frame); err != nil {
			break
		}
	}
	cc.Close()
	<-done
}

// rewrite is a Metadata response frame with the proxy's address for every
// broker and, while lagging, topic's partitions as a lagging broker
// reports them.
func (p *lagProxy) rewrite(frame []byte, version int16) ([]byte, error) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	header := 8 // size, correlation ID
	if resp.IsFlexible() {
		if frame[header] != 0 {
			return nil, errors.New("lagProxy: tagged fields in a response header")
		}
		header++
	}
	if err := resp.ReadFrom(frame[header:]); err != nil {
		return nil, fmt.Errorf("lagProxy: decode Metadata v%d: %w", version, err)
	}
	host, port, err := net.SplitHostPort(p.addr())
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(port)
	for i := range resp.Brokers {
		resp.Brokers[i].Host, resp.Brokers[i].Port = host, int32(n)
	}
	if p.lagging.Load() {
		for i := range resp.Topics {
			mt := &resp.Topics[i]
			if mt.Topic == nil || *mt.Topic != p.topic || mt.ErrorCode != 0 {
				continue
			}
			for j := range mt.Partitions {
				mp := &mt.Partitions[j]
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
				mp.Leader, mp.LeaderEpoch = -1, -1
				mp.Replicas, mp.ISR, mp.OfflineReplicas = []int32{}, []int32{}, []int32{}
			}
			p.stripped.Add(1)
		}
	}
	out := append([]byte(nil), frame[:header]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// readFrame reads one size-prefixed Kafka frame, the size included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}
