//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// The journey's disruption steps: a KafkaRebalance proposed, approved and
// run; a managed etcd member deleted during a roll; a `kubectl drain` of a
// broker's node.

// rebalanceThrottle is the spec.rebalance.throttle the rebalance-approve
// step sets (bytes/s), so the proposal has a time at the throttle.
const rebalanceThrottle = 10 << 20

// rebalanceApprove: with zone b at two brokers, two of b-1's replicas
// are reassigned to b-0 through the admin API (as a user's tool would);
// a KafkaRebalance (mode full) proposes to even it out, with the bytes,
// cross-zone bytes, time at the throttle and cost in status; approved by
// annotation, it runs to Ready and the cluster is healthy again. The
// step raises spec.rebalance.imbalanceTolerancePercent to its maximum
// first: at the default (10 %) the operator would even the imbalance out
// by itself before the proposal, which would then have nothing to move.
func (j *journey) rebalanceApprove(ctx context.Context) (string, error) {
	if _, err := j.h.run(ctx, "-n", namespace, "patch", "kafkacluster", clusterName, "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"rebalance":{"throttle":%d,"imbalanceTolerancePercent":1000}}}`, rebalanceThrottle)); err != nil {
		return "", err
	}
	v, err := j.h.metadata(ctx)
	if err != nil {
		return "", err
	}
	b0, ok0 := v.byPod[clusterName+"-b-0"]
	b1, ok1 := v.byPod[clusterName+"-b-1"]
	if !ok0 || !ok1 {
		return "", fmt.Errorf("zone b brokers not both registered: %v", v.byPod)
	}
	// Two of b-1's replicas to b-0 (one stays: a broker that holds
	// nothing would draw the operator's own scale-up rebalance).
	assign := kadm.AlterPartitionAssignmentsReq{}
	var moved []string
	for _, p := range v.topic.Partitions.Sorted() {
		if len(moved) == 2 || !slices.Contains(p.Replicas, b1) {
			continue
		}
		to := slices.Clone(p.Replicas)
		to[slices.Index(to, b1)] = b0
		assign.Assign(topic, p.Partition, to)
		moved = append(moved, fmt.Sprintf("%s-%d %v -> %v", topic, p.Partition, p.Replicas, to))
	}
	if len(moved) < 2 {
		return "", fmt.Errorf("broker %d (b-1) holds fewer than 3 replicas: %d", b1, v.replicasOn(b1))
	}
	resp, err := j.h.admin.AlterPartitionAssignments(ctx, assign)
	if err != nil {
		return "", fmt.Errorf("alter partition assignments: %w", err)
	}
	if err := resp.Error(); err != nil {
		return "", fmt.Errorf("alter partition assignments: %w", err)
	}
	// Done in every broker's view (the operator's admin client asks any
	// of them), so the proposal is planned on the imbalance.
	err = poll(ctx, 3*time.Minute, "the reassignments off b-1 done", func(ctx context.Context) (bool, string, error) {
		views, err := j.h.replicasOnInEveryView(ctx, b1)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, n := range views {
			if n[b1] != 1 {
				return false, fmt.Sprintf("b-1 holds %d replicas in a broker's view", n[b1]), nil
			}
		}
		v, err := j.h.metadata(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		ok, why := v.fullISR(3)
		return ok, why, nil
	})
	if err != nil {
		return "", err
	}

	const name = "journey-even-out"
	kr := &strata.KafkaRebalance{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       strata.KafkaRebalanceSpec{ClusterRef: strata.LocalObjectReference{Name: clusterName}, Mode: strata.RebalanceFull},
	}
	if err := j.h.kube.Create(ctx, kr); err != nil {
		return "", fmt.Errorf("create KafkaRebalance: %w", err)
	}
	var prop strata.RebalanceProposal
	err = poll(ctx, 3*time.Minute, "a proposal with bytes, time and cost", func(ctx context.Context) (bool, string, error) {
		if err := j.h.kube.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			return false, "", err
		}
		st := kr.Status
		if st.State != strata.RebalanceStateProposalReady || st.Proposal == nil {
			return false, fmt.Sprintf("state %s: %s", st.State, st.Message), nil
		}
		prop = *st.Proposal
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	var problems []string
	if prop.Moves < 1 || prop.BytesToMove <= 0 {
		problems = append(problems, fmt.Sprintf("proposal moves %d replicas, %d bytes: nothing to approve", prop.Moves, prop.BytesToMove))
	}
	if prop.EstimatedDuration == nil || prop.EstimatedDuration.Duration <= 0 {
		problems = append(problems, fmt.Sprintf("proposal without a time at the throttle: %+v", prop.EstimatedDuration))
	}
	if prop.CostUSD.Kafka == "" || prop.CostUSD.Strata == "" {
		problems = append(problems, fmt.Sprintf("proposal without a cost: %+v", prop.CostUSD))
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	if _, err := j.h.run(ctx, "-n", namespace, "annotate", "kafkarebalance", name, strata.RebalanceAnnotation+"="+strata.RebalanceApprove); err != nil {
		return "", err
	}
	var after map[int32]int
	err = poll(ctx, 5*time.Minute, "the approved rebalance Ready", func(ctx context.Context) (bool, string, error) {
		if err := j.h.kube.Get(ctx, client.ObjectKeyFromObject(kr), kr); err != nil {
			return false, "", err
		}
		if kr.Status.State != strata.RebalanceStateReady {
			return false, fmt.Sprintf("state %s: %s", kr.Status.State, kr.Status.Message), nil
		}
		if ok, why, err := j.h.healthy(ctx); !ok || err != nil {
			return ok, why, err
		}
		// Even in every broker's view: one may lag the moves' end by a
		// moment (CI once read 5/1 from one right after Ready).
		views, err := j.h.replicasOnInEveryView(ctx, b0, b1)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, n := range views {
			if n[b0]-n[b1] > 1 || n[b1]-n[b0] > 1 {
				return false, fmt.Sprintf("Ready, but b-0 holds %d replicas and b-1 %d in a broker's view", n[b0], n[b1]), nil
			}
			after = n
		}
		return after != nil, "no broker's view", nil
	})
	if err != nil {
		return "", err
	}
	done := "?"
	if p := kr.Status.Progress; p != nil {
		done = fmt.Sprintf("%d of %d moves done, %d bytes moved", p.MovesDone, p.MovesStarted, p.BytesMoved)
	}
	if _, err := j.h.run(ctx, "-n", namespace, "delete", "kafkarebalance", name, "--timeout=120s"); err != nil {
		return "", err
	}
	return fmt.Sprintf("reassigned %v; proposal: %d moves, %d bytes, %d cross-zone bytes Kafka / %d Strata, %s at %d B/s, cost $%s Kafka / $%s Strata; approved: %s; b-0/b-1 hold %d/%d replicas",
		moved, prop.Moves, prop.BytesToMove, prop.CrossZoneBytes, prop.CrossZoneBytesStrata, prop.EstimatedDuration.Duration, rebalanceThrottle,
		prop.CostUSD.Kafka, prop.CostUSD.Strata, done, after[b0], after[b1]), nil
}

// etcdSelector: the managed etcd's pods.
var etcdSelector = client.MatchingLabels{controllers.LabelCluster: clusterName, controllers.LabelComponent: controllers.ComponentEtcd}

// etcdMemberDelete: a static config change starts a roll; once its first
// broker is down, a managed etcd member's pod is deleted. The roll waits
// for the member (status.roll says "the metadata store first"), restarts
// no broker while the member is not serving, then finishes.
func (j *journey) etcdMemberDelete(ctx context.Context) (string, error) {
	old, err := j.podUIDs(ctx)
	if err != nil {
		return "", err
	}
	var members corev1.PodList
	if err := j.h.kube.List(ctx, &members, client.InNamespace(namespace), etcdSelector); err != nil {
		return "", err
	}
	if len(members.Items) == 0 {
		return "", errors.New("no managed etcd pod")
	}
	sort.Slice(members.Items, func(a, b int) bool { return members.Items[a].Name < members.Items[b].Name })
	victim := members.Items[len(members.Items)-1]
	if err := j.patch(ctx, `[{"op":"replace","path":"/spec/config/log.retention.check.interval.ms","value":"297000"}]`); err != nil {
		return "", err
	}
	err = poll(ctx, 5*time.Minute, "the roll takes a first broker down", func(ctx context.Context) (bool, string, error) {
		pods, err := j.h.brokerPods(ctx)
		if err != nil {
			return false, "", err
		}
		for n, uid := range old {
			if p := pods[n]; p == nil || p.UID != uid || p.DeletionTimestamp != nil {
				return true, "", nil
			}
		}
		return false, "no broker pod deleted yet", nil
	})
	if err != nil {
		return "", err
	}
	w := &etcdRollWatch{h: j.h, member: victim.Name}
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); w.run(wctx) }()
	defer func() { stop(); <-watched }()
	t0 := time.Now()
	if _, err := j.h.run(ctx, "-n", namespace, "delete", "pod", victim.Name, "--wait=false"); err != nil {
		return "", err
	}
	err = poll(ctx, 10*time.Minute, "every broker restarted, the etcd member back, the cluster healthy", func(ctx context.Context) (bool, string, error) {
		if ok, why, err := j.rolled(ctx, old); !ok || err != nil {
			return ok, why, err
		}
		var p corev1.Pod
		if err := j.h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: victim.Name}, &p); err != nil {
			return false, err.Error(), nil
		}
		if p.UID == victim.UID || !podReady(&p) {
			return false, "etcd member " + victim.Name + " not back", nil
		}
		return j.h.healthy(ctx)
	})
	stop()
	<-watched
	if err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		return "", fmt.Errorf("broker restarts began while etcd member %s was not serving: %v", victim.Name, w.violations)
	}
	if w.waited == "" {
		return "", fmt.Errorf("status.roll never said the roll waits for the metadata store while %s was down (%.1f s not serving)", victim.Name, w.memberDown.Seconds())
	}
	return fmt.Sprintf("deleted etcd member %s during the roll; it was not serving for %.1f s and the roll waited (%q); %d brokers restarted in %.0f s, none while the member was down",
		victim.Name, w.memberDown.Seconds(), w.waited, len(old), time.Since(t0).Seconds()), nil
}

// etcdRollWatch polls (every 200 ms) one etcd member, the broker pods and
// status.roll: a broker pod whose deletion began between two looks that
// both saw the member not serving is a violation of "etcd quorum
// first"; waited keeps the roll's first blocked reason naming the
// metadata store.
type etcdRollWatch struct {
	h      *harness
	member string

	mu         sync.Mutex
	violations []string
	waited     string
	memberDown time.Duration
}

func (w *etcdRollWatch) run(ctx context.Context) {
	prevDown := false
	var prevAlive map[string]types.UID // broker pods not terminating, by name
	last := time.Now()
	for ctx.Err() == nil {
		var p corev1.Pod
		err := w.h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: w.member}, &p)
		memberDown := err != nil || !podReady(&p)
		pods, perr := w.h.brokerPods(ctx)
		var kc strata.KafkaCluster
		kerr := w.h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, &kc)
		now := time.Now()
		w.mu.Lock()
		if memberDown && prevDown {
			w.memberDown += now.Sub(last)
		}
		if kerr == nil && kc.Status.Roll != nil && w.waited == "" && strings.Contains(kc.Status.Roll.BlockedReason, "the metadata store first") {
			w.waited = kc.Status.Roll.BlockedReason
		}
		if perr == nil {
			alive := map[string]types.UID{}
			for n, bp := range pods {
				if bp.DeletionTimestamp == nil {
					alive[n] = bp.UID
				}
			}
			for n, uid := range prevAlive {
				if bp := pods[n]; (bp == nil || bp.UID != uid || bp.DeletionTimestamp != nil) && memberDown && prevDown {
					w.violations = append(w.violations, fmt.Sprintf("%s at %s", n, now.Format("15:04:05.0")))
				}
			}
			prevAlive = alive
		}
		w.mu.Unlock()
		prevDown, last = memberDown, now
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// drainNode: `kubectl drain` of the node of broker c-0 while the workload
// produces. The brokers' PodDisruptionBudget allows no disruption, so
// the drain's eviction of c-0 is refused until the operator, seeing the
// node cordoned, deletes c-0 itself through the roll's gate; the drain
// then completes. c-0's volume is local to the node, so its new pod waits
// (Pending) until the node is uncordoned; then it rejoins every ISR.
func (j *journey) drainNode(ctx context.Context) (string, error) {
	victim := clusterName + "-c-0"
	pods, err := j.h.brokerPods(ctx)
	if err != nil {
		return "", err
	}
	p := pods[victim]
	if p == nil || p.Spec.NodeName == "" {
		return "", fmt.Errorf("%s not bound to a node", victim)
	}
	node, oldUID := p.Spec.NodeName, p.UID
	var pdb policyv1.PodDisruptionBudget
	if err := j.h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: controllers.BrokerPDBName(clusterName)}, &pdb); err != nil {
		return "", fmt.Errorf("get the brokers' PodDisruptionBudget: %w", err)
	}
	if pdb.Status.DisruptionsAllowed != 0 {
		return "", fmt.Errorf("the brokers' PodDisruptionBudget allows %d disruptions: a drain would not go through the operator", pdb.Status.DisruptionsAllowed)
	}
	t0 := time.Now()
	// Combined output: the refused evictions are on stderr.
	out, err := runCmd(ctx, j.h.kubectl, "--kubeconfig", j.h.kubecfg, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s")
	drained := time.Since(t0)
	// Whatever the drain did, the node goes back into service.
	if _, uerr := j.h.run(context.WithoutCancel(ctx), "uncordon", node); uerr != nil {
		err = errors.Join(err, uerr)
	}
	if err != nil {
		return "", fmt.Errorf("kubectl drain %s: %w: %s", node, err, out)
	}
	refused := strings.Count(out, "disruption budget")
	err = poll(ctx, 6*time.Minute, victim+" back and in every ISR", func(ctx context.Context) (bool, string, error) {
		if ok, why, err := j.rolled(ctx, map[string]types.UID{victim: oldUID}); !ok || err != nil {
			return ok, why, err
		}
		return j.h.healthy(ctx)
	})
	if err != nil {
		return "", err
	}
	evicted, err := j.evictionEvent(ctx, victim)
	if err != nil {
		return "", err
	}
	if evicted == "" {
		return "", fmt.Errorf("no %s event for %s: the drain did not go through the operator", controllers.EventEvictingBroker, victim)
	}
	return fmt.Sprintf("kubectl drain %s done in %.0f s (the PodDisruptionBudget refused %d evictions; the operator: %q); uncordoned, %s back in every ISR after %.0f s",
		node, drained.Seconds(), refused, evicted, victim, time.Since(t0).Seconds()), nil
}

// evictionEvent is the note of the operator's EvictingBroker event for
// pod, "" when there is none.
func (j *journey) evictionEvent(ctx context.Context, pod string) (string, error) {
	out, err := j.h.run(ctx, "-n", namespace, "get", "events.events.k8s.io",
		"--field-selector", "reason="+controllers.EventEvictingBroker, "-o", "jsonpath={range .items[*]}{.note}{\"\\n\"}{end}")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "pod "+pod+")") {
			return l, nil
		}
	}
	return "", nil
}
