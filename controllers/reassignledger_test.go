package controllers

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-dev/strata/controllers/plan"
)

// view is a metadata view of topic t with partition 0's replicas (and
// reassignment) as given and partition 1 on [1 2 3].
func view(replicas, adding, removing []int32) plan.Metadata {
	return plan.Metadata{Partitions: []plan.Partition{
		{Topic: "t", Partition: 0, Replicas: replicas, Adding: adding, Removing: removing},
		{Topic: "t", Partition: 1, Replicas: []int32{1, 2, 3}},
	}}
}

// TestReassignLedger walks one reassignment of t-0 from [1 2 3] to
// [4 2 3] through the views a planner may read while brokers lag: a view
// from before the start or of the old replicas after the end lags, one of
// the move in flight or done does not, and the ledger forgets the move
// once views agreed with it for ledgerKeep, or when none did for as long.
func TestReassignLedger(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "kc"}
	t0 := time.Unix(1000, 0)
	var l reassignLedger
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign("t", 0, []int32{4, 2, 3})
	req.Assign("t", 1, []int32{5, 2, 3})
	resps := kadm.AlterPartitionAssignmentsResponses{"t": {
		0: {Topic: "t", Partition: 0},
		1: {Topic: "t", Partition: 1, Err: kerr.InvalidReplicaAssignment},
	}}
	l.note(key, req, resps, t0)

	before := view([]int32{1, 2, 3}, nil, nil)
	if why := l.lagging(key, before, t0.Add(time.Second)); !strings.Contains(why, "t-0") {
		t.Fatalf("a view from before the start: %q, want t-0 named", why)
	}
	// The controller lists the reassignment, the broker does not yet.
	mixed := view([]int32{1, 2, 3}, []int32{4}, []int32{1})
	if why := l.lagging(key, mixed, t0.Add(time.Second)); !strings.Contains(why, "broker 4") {
		t.Fatalf("a view without the adding replica: %q, want broker 4 named", why)
	}
	inFlight := view([]int32{4, 2, 3, 1}, []int32{4}, []int32{1})
	if why := l.lagging(key, inFlight, t0.Add(2*time.Second)); why != "" {
		t.Fatalf("a view of the move in flight: %q", why)
	}
	done := view([]int32{2, 4, 3}, nil, nil) // another order: the same brokers
	if why := l.lagging(key, done, t0.Add(3*time.Second)); why != "" {
		t.Fatalf("a view of the move done: %q", why)
	}
	// A lagging broker's view after the end, within ledgerKeep of the
	// first view that showed it done.
	if why := l.lagging(key, before, t0.Add(3*time.Second+ledgerKeep)); !strings.Contains(why, "t-0") {
		t.Fatalf("a view of the old replicas after the end: %q, want t-0 named", why)
	}
	if why := l.lagging(key, done, t0.Add(4*time.Second+ledgerKeep)); why != "" {
		t.Fatalf("done, ledgerKeep later: %q", why)
	}
	if why := l.lagging(key, before, t0.Add(5*time.Second+ledgerKeep)); why != "" {
		t.Fatalf("forgotten ledgerKeep after the end, the view is taken as it is: %q", why)
	}

	// Someone else moved the partition: no view agrees; after ledgerKeep
	// the views are planned on again.
	l.note(key, req, resps, t0)
	other := view([]int32{7, 2, 3}, nil, nil)
	if why := l.lagging(key, other, t0.Add(time.Second)); why == "" {
		t.Fatal("a view that does not show the move, a second after its start, was taken")
	}
	if why := l.lagging(key, other, t0.Add(time.Second+ledgerKeep)); why != "" {
		t.Fatalf("no view agreed for ledgerKeep: %q", why)
	}

	// A cancellation forgets the move at once.
	l.note(key, req, resps, t0)
	cancel := kadm.AlterPartitionAssignmentsReq{}
	cancel.CancelAssign("t", 0)
	l.note(key, cancel, kadm.AlterPartitionAssignmentsResponses{"t": {0: {Topic: "t", Partition: 0}}}, t0.Add(time.Second))
	if why := l.lagging(key, before, t0.Add(2*time.Second)); why != "" {
		t.Fatalf("after the cancellation: %q", why)
	}
	// Another cluster's moves do not hold this one's views.
	l.note(key, req, resps, t0)
	if why := l.lagging(types.NamespacedName{Namespace: "ns", Name: "other"}, before, t0.Add(time.Second)); why != "" {
		t.Fatalf("another cluster: %q", why)
	}
	l.forget(key)
	if why := l.lagging(key, before, t0.Add(time.Second)); why != "" {
		t.Fatalf("after forget: %q", why)
	}
}
