package compat

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

// kcatOffsetsTopic reads __consumer_offsets with kcat to its end and
// decodes each record with Kafka's key and value definitions: the latest
// committed offset per group/topic/partition.
func kcatOffsetsTopic(t *testing.T, addr string) map[string]int64 {
	t.Helper()
	// Each record: "<key length> <value length>\n" then the raw key and
	// value bytes (a tombstone's length is -1).
	out := runTool(t, nil, kcatPath(t), "-b", addr, "-C", "-t", "__consumer_offsets", "-o", "beginning", "-e", "-q", "-f", "%K %S\n%k%s")
	buf := []byte(out)
	got := map[string]int64{}
	for len(buf) > 0 {
		nl := bytes.IndexByte(buf, '\n')
		if nl < 0 {
			t.Fatalf("kcat output: no record header in %q", buf)
		}
		var kl, vl int
		if _, err := fmt.Sscanf(string(buf[:nl]), "%d %d", &kl, &vl); err != nil {
			t.Fatalf("kcat output: header %q: %v", buf[:nl], err)
		}
		buf = buf[nl+1:]
		key := buf[:kl]
		buf = buf[kl:]
		var value []byte
		if vl >= 0 {
			value, buf = buf[:vl], buf[vl:]
		}
		if len(key) < 2 || key[1] > 1 {
			continue // a group metadata record
		}
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			t.Fatalf("offset commit key %x: %v", key, err)
		}
		id := fmt.Sprintf("%s/%s/%d", k.Group, k.Topic, k.Partition)
		if value == nil {
			delete(got, id)
			continue
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			t.Fatalf("offset commit value %x: %v", value, err)
		}
		got[id] = v.Offset
	}
	return got
}

// TestKcatOffsetsTopic: kcat lists __consumer_offsets, and what it
// consumes from it decodes as Kafka's offset commit records holding the
// group's committed offsets, as they change.
func TestKcatOffsetsTopic(t *testing.T) {
	b := brokertest.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if resp, err := adm.CreateTopics(ctx, 2, 1, nil, "orders"); err != nil || resp["orders"].Err != nil {
		t.Fatalf("create topic: %v %v", err, resp["orders"].Err)
	}
	commit := func(g string, offsets map[int32]int64) {
		t.Helper()
		os := kadm.Offsets{}
		for p, o := range offsets {
			os.Add(kadm.Offset{Topic: "orders", Partition: p, At: o, LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, g, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", g, err)
		}
	}
	wait := func(what string, want map[string]int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := kcatOffsetsTopic(t, b.Addr())
			if maps.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: kcat reads %v, want %v", what, got, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	commit("billing", map[int32]int64{0: 3, 1: 8})
	// The first broker that sees a group creates the topic.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		td, err := adm.ListTopicsWithInternal(ctx, "__consumer_offsets")
		if err == nil && td["__consumer_offsets"].Err == nil {
			if !td["__consumer_offsets"].IsInternal {
				t.Fatal("__consumer_offsets is not flagged internal")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("__consumer_offsets was not created: %v", err)
		}
	}
	wait("first commit", map[string]int64{"billing/orders/0": 3, "billing/orders/1": 8})
	commit("billing", map[int32]int64{0: 12})
	commit("audit", map[int32]int64{1: 1})
	wait("later commits", map[string]int64{"billing/orders/0": 12, "billing/orders/1": 8, "audit/orders/1": 1})

	list := runTool(t, nil, kcatPath(t), "-b", b.Addr(), "-L")
	if !strings.Contains(list, `topic "__consumer_offsets" with `+strconv.Itoa(10)+` partitions`) {
		t.Fatalf("kcat -L does not list __consumer_offsets with 10 partitions:\n%s", list)
	}
}
