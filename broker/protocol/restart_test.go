package protocol_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
)

// TestRestartRecoversTopics checks that topics (names, UUIDs, partition
// counts, config overrides) and their records survive a broker restart on
// the same data directory, and that a deleted topic stays deleted.
func TestRestartRecoversTopics(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "kept", 3, map[string]*string{"retention.ms": sp("7200000")})
	createTopic(t, adm, "gone", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("kept"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 30 {
		r := &kgo.Record{Value: []byte(fmt.Sprint(i)), Partition: int32(i % 3)}
		if err := p.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adm.DeleteTopics(testCtx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	before, err := adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}

	b.Restart()

	adm = newAdmin(t, b.Addr())
	after, err := adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after.Has("gone") || !after.Has("kept") || len(after["kept"].Partitions) != 3 || after["kept"].ID != before["kept"].ID {
		t.Fatalf("after restart: %+v; before: %+v", after, before)
	}
	rc, err := adm.DescribeTopicConfigs(testCtx(t), "kept")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rc.On("kept", nil)
	for _, c := range r.Configs {
		if c.Key == "retention.ms" && c.MaybeValue() != "7200000" {
			t.Fatalf("retention.ms after restart = %s", c.MaybeValue())
		}
	}
	ends, err := adm.ListEndOffsets(testCtx(t), "kept")
	if err != nil {
		t.Fatal(err)
	}
	for part := range int32(3) {
		if o, _ := ends.Lookup("kept", part); o.Offset != 10 {
			t.Fatalf("partition %d end offset %d after restart, want 10", part, o.Offset)
		}
	}
	got := consume(t, b.Addr(), "kept", 30)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	if len(seen) != 30 {
		t.Fatalf("read %d distinct records after restart, want 30", len(seen))
	}
}
