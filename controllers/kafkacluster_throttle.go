package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/placement"
	"github.com/strata-dev/strata/controllers/plan"
)

// Replication throttle of the operator's moves (spec.rebalance.throttle):
// Kafka's own mechanism, as kafka-reassign-partitions.sh --throttle uses
// it. While reassignments are in flight the brokers involved get
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (dynamic broker configs, per broker), and each topic with moving
// partitions gets leader.replication.throttled.replicas (the partitions'
// current replicas, which may lead the copy) and
// follower.replication.throttled.replicas (the replicas being added). The
// brokers then throttle only the catch-up of the new replicas, never
// in-sync replication (docs/replication.md).
//
// Nothing is remembered in the operator: each time, the wanted throttle is
// computed from the spec and the reassignments the brokers report
// (DesiredThrottle), the configs set are read back from the brokers, and
// the difference is applied, so a restarted operator, a move that ended, or
// the spec field removed all converge the same way. The ReplicationThrottled
// condition says whether a throttle is in effect; while it is True the
// operator keeps looking (and removes the configs once no move is left).

const (
	// ConditionReplicationThrottled is True while the operator keeps a
	// replication throttle on brokers and topics for moves in flight.
	ConditionReplicationThrottled = "ReplicationThrottled"
	// ReasonMovesThrottled: moves in flight are throttled.
	ReasonMovesThrottled = "MovesThrottled"
	// ReasonThrottleRemoved: no move left (or no throttle wanted), the
	// configs are removed.
	ReasonThrottleRemoved = "ThrottleRemoved"
	// EventThrottleApplied / EventThrottleRemoved report the changes.
	EventThrottleApplied = "ReplicationThrottleApplied"
	EventThrottleRemoved = "ReplicationThrottleRemoved"
)

// Kafka's throttle config names (broker/dynconfig.go).
const (
	configLeaderRate       = "leader.replication.throttled.rate"
	configFollowerRate     = "follower.replication.throttled.rate"
	configLeaderReplicas   = "leader.replication.throttled.replicas"
	configFollowerReplicas = "follower.replication.throttled.replicas"
)

// TopicThrottle is one topic's throttled-replica lists ("" for none).
type TopicThrottle struct {
	Leader, Follower string
}

// ThrottleTarget is the replication throttle wanted on the cluster.
type ThrottleTarget struct {
	// Rate is the bytes/s of both rates on Brokers; 0 means no throttle.
	Rate int64
	// Brokers are the brokers involved in a move (sources and
	// destinations), sorted.
	Brokers []int32
	// Topics holds the lists of the topics with moving partitions.
	Topics map[string]TopicThrottle
	// Partitions is the number of moving partitions.
	Partitions int
}

// Empty says that no throttle is wanted anywhere.
func (t ThrottleTarget) Empty() bool { return len(t.Brokers) == 0 && len(t.Topics) == 0 }

// DesiredThrottle is the throttle for rate (bytes/s, 0: none) given the
// reassignments in flight in md and the moves about to start: every
// broker holding or receiving a replica of a moving partition gets both
// rates; per topic, the leader list names each moving partition's current
// replicas (any may lead the copy), the follower list its replicas being
// added, as kafka-reassign-partitions.sh does.
func DesiredThrottle(rate int64, md plan.Metadata, starting []placement.Move) ThrottleTarget {
	t := ThrottleTarget{Topics: map[string]TopicThrottle{}}
	if rate <= 0 {
		return ThrottleTarget{}
	}
	type pair struct{ partition, broker int32 }
	leaders, followers := map[string][]pair{}, map[string][]pair{}
	brokers := map[int32]bool{}
	moving := map[tpKey]bool{}
	add := func(topic string, partition int32, existing, adding []int32) {
		key := tpKey{Topic: topic, Partition: partition}
		if moving[key] || len(adding) == 0 && len(existing) == 0 {
			return
		}
		moving[key] = true
		for _, b := range existing {
			leaders[topic] = append(leaders[topic], pair{partition, b})
			brokers[b] = true
		}
		for _, b := range adding {
			followers[topic] = append(followers[topic], pair{partition, b})
			brokers[b] = true
		}
	}
	current := map[tpKey]plan.Partition{}
	for _, p := range md.Partitions {
		current[tpKey{Topic: p.Topic, Partition: p.Partition}] = p
		if len(p.Adding) > 0 {
			existing := slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return slices.Contains(p.Adding, id) })
			add(p.Topic, p.Partition, existing, p.Adding)
		}
	}
	for _, m := range starting {
		p, ok := current[tpKey{Topic: m.Topic, Partition: m.Partition}]
		if !ok {
			continue
		}
		adding := slices.DeleteFunc(slices.Clone(m.To), func(id int32) bool { return slices.Contains(p.Replicas, id) })
		if len(adding) > 0 {
			add(m.Topic, m.Partition, p.Replicas, adding)
		}
	}
	if len(moving) == 0 {
		return ThrottleTarget{}
	}
	format := func(ps []pair) string {
		slices.SortFunc(ps, func(a, b pair) int {
			return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.broker, b.broker))
		})
		ps = slices.Compact(ps)
		items := make([]string, len(ps))
		for i, p := range ps {
			items[i] = fmt.Sprintf("%d:%d", p.partition, p.broker)
		}
		return strings.Join(items, ",")
	}
	for topic := range moving {
		t.Topics[topic.Topic] = TopicThrottle{Leader: format(leaders[topic.Topic]), Follower: format(followers[topic.Topic])}
	}
	t.Rate = rate
	t.Brokers = slices.Sorted(maps.Keys(brokers))
	t.Partitions = len(moving)
	return t
}

// tpKey names a partition.
type tpKey struct {
	Topic     string
	Partition int32
}

// throttleState is what the brokers hold: per broker its own (not
// cluster-wide) rates, per topic its own throttled-replica lists.
type throttleState struct {
	brokers map[int32][2]string // leader, follower rate ("" unset)
	topics  map[string]TopicThrottle
}

// throttleOps is what turns a state into a target.
type throttleOps struct {
	brokers map[int32][]kadm.AlterConfig
	topics  map[string][]kadm.AlterConfig
}

func (o throttleOps) empty() bool { return len(o.brokers) == 0 && len(o.topics) == 0 }

// planThrottleOps is the pure difference between the configs set (state) and
// the target, for the registered brokers.
func planThrottleOps(target ThrottleTarget, st throttleState, registered []int32) throttleOps {
	ops := throttleOps{brokers: map[int32][]kadm.AlterConfig{}, topics: map[string][]kadm.AlterConfig{}}
	op := func(name, have, want string) []kadm.AlterConfig {
		switch {
		case have == want:
			return nil
		case want == "":
			return []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: name}}
		default:
			return []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(want)}}
		}
	}
	for _, id := range registered {
		want := ""
		if slices.Contains(target.Brokers, id) {
			want = strconv.FormatInt(target.Rate, 10)
		}
		have := st.brokers[id]
		if o := slices.Concat(op(configLeaderRate, have[0], want), op(configFollowerRate, have[1], want)); len(o) > 0 {
			ops.brokers[id] = o
		}
	}
	topics := map[string]bool{}
	for t := range st.topics {
		topics[t] = true
	}
	for t := range target.Topics {
		topics[t] = true
	}
	for t := range topics {
		have, want := st.topics[t], target.Topics[t]
		if o := slices.Concat(op(configLeaderReplicas, have.Leader, want.Leader), op(configFollowerReplicas, have.Follower, want.Follower)); len(o) > 0 {
			ops.topics[t] = o
		}
	}
	return ops
}

// reconcileThrottle keeps the throttle of the operator's moves in step
// with the moves in flight: while status.scaling shows moves or the
// ReplicationThrottled condition is True, it converges the brokers'
// throttle configs to DesiredThrottle (empty once no move is left or the
// spec field is gone). It skips a reconcile that just started moves
// (throttleMoves set their throttle before starting them, and the
// brokers may not list them yet).
func (r *KafkaClusterReconciler) reconcileThrottle(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	if s.throttleSet {
		return nil
	}
	rate := ptr.Deref(kc.Spec.Rebalance.Throttle, 0)
	active := meta.IsStatusConditionTrue(kc.Status.Conditions, ConditionReplicationThrottled)
	if !active && (rate <= 0 || kc.Status.Scaling == nil) {
		return nil
	}
	if active {
		// Look again until the configs are gone.
		s.requeueAfter = minPositive(s.requeueAfter, scalingRequeue)
	}
	md, err := r.readPlanMetadata(ctx, kc)
	if err != nil {
		log.FromContext(ctx).V(1).Info("replication throttle not checked: cannot read the Kafka metadata", "error", err.Error())
		return nil
	}
	return r.applyThrottle(ctx, kc, DesiredThrottle(rate, md, nil), md)
}

// throttleMoves sets the throttle for the moves about to start (and those
// in flight) before the scale executor starts them, so that their
// catch-up is throttled from the first byte. Without a spec throttle it
// does nothing (reconcileThrottle removes one left over).
func (r *KafkaClusterReconciler) throttleMoves(ctx context.Context, s *clusterScope, md plan.Metadata, moves []placement.Move) error {
	rate := ptr.Deref(s.cluster.Spec.Rebalance.Throttle, 0)
	if rate <= 0 {
		return nil
	}
	s.throttleSet = true
	return r.applyThrottle(ctx, s.cluster, DesiredThrottle(rate, md, moves), md)
}

// applyThrottle reads the throttle configs the brokers hold, applies the
// difference to target, and sets the ReplicationThrottled condition.
func (r *KafkaClusterReconciler) applyThrottle(ctx context.Context, kc *strata.KafkaCluster, target ThrottleTarget, md plan.Metadata) error {
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return err
	}
	changed, err := convergeThrottle(ctx, adm, target, md)
	if err != nil {
		return err
	}
	if changed {
		if target.Empty() {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventThrottleRemoved, "Throttle", "replication throttle removed: no move in flight")
		} else {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventThrottleApplied, "Throttle", "replication throttle of %d B/s on brokers %v for %d moving partitions", target.Rate, target.Brokers, target.Partitions)
		}
	}
	if target.Empty() {
		if meta.FindStatusCondition(kc.Status.Conditions, ConditionReplicationThrottled) != nil {
			setCondition(kc, ConditionReplicationThrottled, metav1.ConditionFalse, ReasonThrottleRemoved, "no move in flight: the replication throttle configs are removed")
		}
		return nil
	}
	setCondition(kc, ConditionReplicationThrottled, metav1.ConditionTrue, ReasonMovesThrottled,
		fmt.Sprintf("replication throttle of %d bytes/s (spec.rebalance.throttle) on brokers %v for %d moving partitions in topics %v",
			target.Rate, target.Brokers, target.Partitions, slices.Sorted(maps.Keys(target.Topics))))
	return nil
}

// convergeThrottle reads the throttle configs the brokers hold and
// applies the difference to target; changed says whether it altered
// anything. The KafkaCluster's moves and a KafkaRebalance's both use it:
// the target is computed from every reassignment in flight
// (DesiredThrottle), so the two agree on it.
func convergeThrottle(ctx context.Context, adm *kadm.Client, target ThrottleTarget, md plan.Metadata) (changed bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	registered := make([]int32, 0, len(md.Brokers))
	for _, b := range md.Brokers {
		registered = append(registered, b.ID)
	}
	slices.Sort(registered)
	st, err := readThrottleState(ctx, adm, registered, topicsOf(md))
	if err != nil {
		return false, fmt.Errorf("read replication throttle configs: %w", err)
	}
	ops := planThrottleOps(target, st, registered)
	if ops.empty() {
		return false, nil
	}
	if err := applyThrottleOps(ctx, adm, ops); err != nil {
		return false, fmt.Errorf("apply replication throttle: %w", err)
	}
	log.FromContext(ctx).Info("replication throttle changed", "rate", target.Rate, "brokers", target.Brokers, "partitions", target.Partitions)
	return true, nil
}

func topicsOf(md plan.Metadata) []string {
	seen := map[string]bool{}
	for _, p := range md.Partitions {
		seen[p.Topic] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// readThrottleState reads the brokers' own throttle rates and the topics'
// own throttled-replica lists (values inherited from elsewhere are not
// ours to change).
func readThrottleState(ctx context.Context, adm *kadm.Client, brokers []int32, topics []string) (throttleState, error) {
	st := throttleState{brokers: map[int32][2]string{}, topics: map[string]TopicThrottle{}}
	for _, id := range brokers {
		rcs, err := adm.DescribeBrokerConfigs(ctx, id)
		if err != nil {
			return st, fmt.Errorf("describe broker %d: %w", id, err)
		}
		rc, err := rcs.On(strconv.Itoa(int(id)), nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return st, fmt.Errorf("describe broker %d: %w", id, err)
		}
		var rates [2]string
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
				continue
			}
			switch c.Key {
			case configLeaderRate:
				rates[0] = c.MaybeValue()
			case configFollowerRate:
				rates[1] = c.MaybeValue()
			}
		}
		if rates != [2]string{} {
			st.brokers[id] = rates
		}
	}
	if len(topics) == 0 {
		return st, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return st, fmt.Errorf("describe topic configs: %w", err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return st, fmt.Errorf("describe topic %s: %w", rc.Name, rc.Err)
		}
		var tt TopicThrottle
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				continue
			}
			switch c.Key {
			case configLeaderReplicas:
				tt.Leader = c.MaybeValue()
			case configFollowerReplicas:
				tt.Follower = c.MaybeValue()
			}
		}
		if tt != (TopicThrottle{}) {
			st.topics[rc.Name] = tt
		}
	}
	return st, nil
}

// applyThrottleOps applies the topic lists first when adding (so that
// rates never apply to replicas not meant) and the rates first when
// removing does not matter: each call is idempotent, and a partial failure
// is converged at the next reconcile.
func applyThrottleOps(ctx context.Context, adm *kadm.Client, ops throttleOps) error {
	var errs []error
	for _, t := range slices.Sorted(maps.Keys(ops.topics)) {
		resps, err := adm.AlterTopicConfigs(ctx, ops.topics[t], t)
		errs = append(errs, alterError("topic "+t, resps, err))
	}
	for _, id := range slices.Sorted(maps.Keys(ops.brokers)) {
		resps, err := adm.AlterBrokerConfigs(ctx, ops.brokers[id], id)
		errs = append(errs, alterError(fmt.Sprintf("broker %d", id), resps, err))
	}
	return errors.Join(errs...)
}

func alterError(what string, resps kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range resps {
		if r.Err != nil {
			return fmt.Errorf("%s: %w", what, withMessage(r.Err, r.ErrMessage))
		}
	}
	return nil
}
