package protocol_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestOffsetsThroughKadmSurviveRestart commits offsets with kadm (simple
// commits), restarts the broker on the same data directory and fetches
// them back; then deletes offsets and the group.
func TestOffsetsThroughKadmSurviveRestart(t *testing.T) {
	b := startGroupBroker(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "orders", 3, nil)

	var os kadm.Offsets
	for p := range int32(3) {
		os.Add(kadm.Offset{Topic: "orders", Partition: p, At: 100 * int64(p+1), LeaderEpoch: 0, Metadata: "m"})
	}
	os.Add(kadm.Offset{Topic: "missing", Partition: 0, At: 1, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(testCtx(t), "billing", os)
	if err != nil {
		t.Fatalf("CommitOffsets: %v", err)
	}
	for p := range int32(3) {
		if r, _ := resp.Lookup("orders", p); r.Err != nil {
			t.Fatalf("commit orders-%d: %v", p, r.Err)
		}
	}
	if r, _ := resp.Lookup("missing", 0); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("commit to a missing topic: %v", r.Err)
	}

	b.Restart()
	adm = newAdmin(t, b.Addr())
	fetched, err := adm.FetchOffsets(testCtx(t), "billing")
	if err != nil {
		t.Fatalf("FetchOffsets: %v", err)
	}
	for p := range int32(3) {
		o, ok := fetched.Lookup("orders", p)
		if !ok || o.Err != nil || o.At != 100*int64(p+1) || o.Metadata != "m" || o.LeaderEpoch != 0 {
			t.Fatalf("after restart orders-%d = %+v (found %v)", p, o, ok)
		}
	}
	listed, err := adm.ListGroups(testCtx(t))
	if err != nil || len(listed) != 1 || listed["billing"].State != "Empty" {
		t.Fatalf("ListGroups after restart: %v %+v", err, listed)
	}

	dresp, err := adm.DeleteOffsets(testCtx(t), "billing", kadm.TopicsSet{"orders": {0: {}}})
	if err != nil || dresp.Error() != nil {
		t.Fatalf("DeleteOffsets: %v %v", err, dresp.Error())
	}
	fetched, _ = adm.FetchOffsets(testCtx(t), "billing")
	if _, ok := fetched.Lookup("orders", 0); ok {
		t.Fatalf("orders-0 still committed: %+v", fetched)
	}
	gresp, err := adm.DeleteGroups(testCtx(t), "billing", "nope")
	if err != nil {
		t.Fatalf("DeleteGroups: %v", err)
	}
	if gresp["billing"].Err != nil || !errors.Is(gresp["nope"].Err, kerr.GroupIDNotFound) {
		t.Fatalf("DeleteGroups: %+v", gresp)
	}
	b.Restart()
	adm = newAdmin(t, b.Addr())
	fetched, _ = adm.FetchOffsets(testCtx(t), "billing")
	if _, ok := fetched.Lookup("orders", 1); ok {
		t.Fatalf("deleted group's offsets back after restart: %+v", fetched)
	}
}
