package replication

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/log/faultfs"
)

// TestLastISRMemberPowerLoss is window 1 of issue #25: acks=all records
// are acknowledged by all three replicas; both followers die (SIGKILL:
// their page caches keep the data), so the ISR shrinks to the leader
// alone; then the leader's machine loses power, which takes what it had
// not fsynced (the topic's flush.ms is an hour, so that is everything
// without the fix). When all three come back, the leader, the last ISR
// member, is the only one that may lead and the others truncate to it.
// The acknowledged records must survive: the leader makes its log durable
// before an acks=all acknowledgement and followers report only durable
// offsets (Partition.WaitHighWatermarkSince, flushFetchPositions).
func TestLastISRMemberPowerLoss(t *testing.T) {
	t.Setenv(faultfs.EnvVar, "1") // the broker subprocesses inherit it
	c := brokertest.StartProcessCluster(t, zones, brokertest.WithStableAddr())
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	two, hour := "2", "3600000"
	const topic = "powerloss"
	createTopic(t, adm, topic, 1, map[string]*string{"min.insync.replicas": &two, "flush.ms": &hour})
	isrOf := func() (int32, []int32) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return -1, nil
		}
		p := md.Topics[topic].Partitions[0]
		return p.Leader, p.ISR
	}
	waitFor(t, "a leader with a full ISR", 30*time.Second, func() bool { l, isr := isrOf(); return l > 0 && len(isr) == 3 })
	leader, _ := isrOf()

	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	const n = 50
	for i := range n {
		pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := prod.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr()
		pcancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	prod.Close()

	var followers []*brokertest.Process
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			followers = append(followers, c.Processes[id-1])
		}
	}
	for _, f := range followers {
		f.Kill()
	}
	waitFor(t, "the ISR shrunk to the leader alone", 30*time.Second, func() bool {
		l, isr := isrOf()
		return l == leader && slices.Equal(isr, []int32{leader})
	})

	// The leader's machine loses power.
	lp := c.Processes[leader-1]
	lp.Kill()
	if err := faultfs.DropUnsynced(lp.Dir()); err != nil {
		t.Fatal(err)
	}
	for _, f := range followers {
		f.Start()
	}
	lp.Start()
	waitFor(t, "the partition led again", 60*time.Second, func() bool { l, _ := isrOf(); return l > 0 })

	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < n && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) < n {
		l, isr := isrOf()
		t.Fatalf("after the power loss of the last ISR member (leader %d, ISR %v) %d of %d acknowledged records are left: %q", l, isr, len(got), n, got)
	}
	for i := range n {
		if want := fmt.Sprintf("v%d", i); got[i] != want {
			t.Fatalf("offset %d holds %q, want %q", i, got[i], want)
		}
	}
}

// TestDiskFullFailStop: the leader's data directory fills up (faultfs
// answers ENOSPC). The broker must not acknowledge what it could not
// write, and must not keep leading partitions it cannot append to: it
// stops (fail-stop, as Kafka stops a broker whose last log directory
// failed), another ISR member leads, and producers go on. Started again
// on a disk with room, it rejoins, and every acknowledged record is there
// once.
func TestDiskFullFailStop(t *testing.T) {
	t.Setenv(faultfs.EnvVar, "1")
	c := brokertest.StartProcessCluster(t, zones, brokertest.WithStableAddr())
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	two := "2"
	const topic = "diskfull"
	createTopic(t, adm, topic, 1, map[string]*string{"min.insync.replicas": &two})
	leaderOf := func() (int32, []int32) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return -1, nil
		}
		p := md.Topics[topic].Partitions[0]
		return p.Leader, p.ISR
	}
	waitFor(t, "a leader with a full ISR", 30*time.Second, func() bool { l, isr := leaderOf(); return l > 0 && len(isr) == 3 })
	leader, _ := leaderOf()
	lp := c.Processes[leader-1]

	prod := newClient(t, c.Addrs(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(60*time.Second))
	var acked []string
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			v := fmt.Sprintf("v%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr()
			cancel()
			if err == nil {
				acked = append(acked, v)
			} else {
				t.Logf("record %s not acknowledged: %v", v, err)
			}
		}
	}
	produce(0, 20)
	// Wait for the broker to put the fault in force: on a busy machine its
	// next poll of the control file can come after the next writes.
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := faultfs.SetFaultAndWait(fctx, lp.Dir(), faultfs.NoSpace)
	fcancel()
	if err != nil {
		t.Fatal(err)
	}
	produce(20, 25)
	waitFor(t, "the leader with the full disk stopped", 60*time.Second, lp.Exited)
	waitFor(t, "another leader", 30*time.Second, func() bool { l, _ := leaderOf(); return l > 0 && l != leader })
	produce(25, 45)
	if err := faultfs.SetFault(lp.Dir(), faultfs.None); err != nil {
		t.Fatal(err)
	}
	lp.Kill() // reap the exited process
	lp.Start()
	waitFor(t, "the restarted broker back in the ISR", 60*time.Second, func() bool { _, isr := leaderOf(); return slices.Contains(isr, leader) })
	if len(acked) < 40 {
		t.Fatalf("only %d of 45 records acknowledged: the other replicas should have taken over", len(acked))
	}

	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for n := 0; n < len(acked) && ctx.Err() == nil; {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
	}
	for _, v := range acked {
		if seen[v] != 1 {
			t.Errorf("acknowledged record %s read %d times", v, seen[v])
		}
	}
}
