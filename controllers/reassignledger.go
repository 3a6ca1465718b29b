package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"k8s.io/apimachinery/pkg/types"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/plan"
)

// A broker's metadata is a view of the cluster that lags its controller
// (Kafka's and Strata's alike: each broker follows the metadata log, or
// etcd, at its own pace). A planner that reads a view from before a
// reassignment it started, or from before that reassignment ended, plans
// that partition again from its old replicas: it starts the same move a
// second time, or a move that undoes part of one that finished. The
// operator therefore remembers the reassignments it started and plans
// only on a view that shows each of them (in flight or done).
const (
	// ledgerKeep is how long a reassignment is remembered after a view
	// last agreed with it (or showed it done): longer than any broker's
	// metadata lags, short enough that a partition someone else moved
	// meanwhile delays the plans for no longer than this.
	ledgerKeep = 30 * time.Second
	// metadataLagRetries and metadataLagWait bound how long a read waits
	// for a view that shows the reassignments started.
	metadataLagRetries = 20
	metadataLagWait    = 250 * time.Millisecond
)

// reassignLedger is the reassignments the operator started, per cluster.
type reassignLedger struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]map[string]*ledgerEntry
}

// ledgerEntry is one reassignment started: its target replicas, when a
// view last agreed with it, and when one first showed it done.
type ledgerEntry struct {
	target []int32
	agreed time.Time
	done   time.Time
}

// note records the reassignments the brokers accepted (a nil target, a
// cancellation, forgets the partition: its replicas go back).
func (l *reassignLedger) note(key types.NamespacedName, req kadm.AlterPartitionAssignmentsReq, resps kadm.AlterPartitionAssignmentsResponses, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byCluster == nil {
		l.byCluster = map[types.NamespacedName]map[string]*ledgerEntry{}
	}
	m := l.byCluster[key]
	if m == nil {
		m = map[string]*ledgerEntry{}
		l.byCluster[key] = m
	}
	for _, resp := range resps.Sorted() {
		if resp.Err != nil {
			continue
		}
		name := fmt.Sprintf("%s-%d", resp.Topic, resp.Partition)
		target := req[resp.Topic][resp.Partition]
		if target == nil {
			delete(m, name)
			continue
		}
		m[name] = &ledgerEntry{target: slices.Clone(target), agreed: now}
	}
}

// lagging checks a view against the reassignments remembered for the
// cluster: it names the first partition the view shows from before the
// reassignment started or ended ("" when the view shows every one),
// forgets those a view has agreed with long enough, and forgets those no
// view agreed with for ledgerKeep (someone else moved the partition).
func (l *reassignLedger) lagging(key types.NamespacedName, md plan.Metadata, now time.Time) string {
	if why := plan.ViewLags(md); why != "" {
		return why
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.byCluster[key]
	if len(m) == 0 {
		return ""
	}
	parts := make(map[string]plan.Partition, len(md.Partitions))
	for _, p := range md.Partitions {
		parts[p.String()] = p
	}
	var why string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		e := m[name]
		p, ok := parts[name]
		switch {
		case !ok: // topic deleted
			delete(m, name)
		case p.Reassigning():
			e.agreed = now
		case sameSet(p.Replicas, e.target):
			e.agreed = now
			if e.done.IsZero() {
				e.done = now
			}
			if now.Sub(e.done) > ledgerKeep {
				delete(m, name)
			}
		case now.Sub(e.agreed) > ledgerKeep:
			delete(m, name)
		case why == "":
			why = fmt.Sprintf("partition %s shows replicas %v and no reassignment, but a reassignment to %v was started: the broker's metadata lags", name, p.Replicas, e.target)
		}
	}
	return why
}

// sameSet says whether a and b hold the same brokers (a reordering of
// the replicas is no move: its view before and after plan alike).
func sameSet(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(id int32) bool { return !slices.Contains(b, id) })
}

// forget drops a cluster's reassignments (the cluster went away).
func (l *reassignLedger) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byCluster, key)
}

// Reassign sends AlterPartitionReassignments for kc and remembers the
// reassignments the brokers accepted, so that readPlanMetadata waits for
// a view that shows them.
func (p *AdminPool) Reassign(ctx context.Context, kc *strata.KafkaCluster, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) (kadm.AlterPartitionAssignmentsResponses, error) {
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return resps, err
	}
	p.ledger.note(types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}, req, resps, time.Now())
	return resps, nil
}
