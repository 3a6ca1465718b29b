package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/placement"
)

// Condition reasons of a KafkaTopic's Ready condition. They are API.
const (
	ReasonTopicReady               = "TopicReady"
	ReasonCreating                 = "Creating"
	ReasonReassigning              = "Reassigning"
	ReasonPartitionDecreaseRefused = "PartitionDecreaseRefused"
	ReasonReplicationFactorInvalid = "ReplicationFactorInvalid"
	ReasonLeaderZoneNotInCluster   = "LeaderZoneNotInCluster"
	ReasonTopicConflict            = "TopicConflict"
	ReasonClusterNotFound          = "ClusterNotFound"
	ReasonKafkaError               = "KafkaError"
)

// Event reasons of a KafkaTopic.
const (
	EventTopicCreated        = "TopicCreated"
	EventTopicAdopted        = "TopicAdopted"
	EventTopicDeleted        = "TopicDeleted"
	EventTopicRetained       = "TopicRetained"
	EventConfigsChanged      = "ConfigsChanged"
	EventDriftReverted       = "DriftReverted"
	EventUnmanagedConfigs    = "UnmanagedConfigs"
	EventPartitionsAdded     = "PartitionsAdded"
	EventReassignmentStarted = "ReassignmentStarted"
	EventReassignmentDone    = "ReassignmentDone"
	EventTopicNotReady       = "TopicNotReady"
	EventTopicNotOwned       = "TopicNotOwned"
)

const (
	// TopicFinalizer holds a KafkaTopic until its Kafka topic is deleted
	// (deletionPolicy Delete) or released (Retain).
	TopicFinalizer = "kafka.strata.dev/topic"
	// DefaultTopicResync is how often a KafkaTopic is compared with its
	// Kafka topic when nothing in Kubernetes changes: it is how changes
	// made with other tools (kafka-configs.sh, kadm) are found and reverted.
	DefaultTopicResync = time.Minute
	// topicReassignPoll is how often a replication factor change is
	// checked until the brokers report it done.
	topicReassignPoll = 2 * time.Second
	// indexTopicCluster indexes KafkaTopics by spec.clusterRef.name.
	indexTopicCluster = "spec.clusterRef.name"
)

// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkatopics,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkatopics/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkatopics/finalizers,verbs=update
// +kubebuilder:rbac:groups=kafka.strata.dev,resources=kafkaclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// KafkaTopicReconciler makes a Kafka topic match its KafkaTopic through the
// Kafka admin API of the topic's cluster.
type KafkaTopicReconciler struct {
	client.Client
	// LiveReader reads from the API server, bypassing the cache: a status
	// write refused because the KafkaTopic changed since it was read is
	// retried over the live version when only its spec or metadata
	// changed (patchTopicStatus). Nil uses Client.
	LiveReader client.Reader
	Recorder   recorder.EventRecorder
	// Admin holds the clusters' Kafka admin clients (kafkaadmin.go).
	Admin *AdminPool
	// Resync is the periodic comparison interval; 0 is DefaultTopicResync.
	Resync time.Duration
}

// topicScope is what the reconcile steps share.
type topicScope struct {
	topic   *strata.KafkaTopic
	name    string // the Kafka topic name
	cluster *strata.KafkaCluster
	adm     *kadm.Client
	// brokers are the live brokers and their racks, from metadata.
	brokers []placement.Broker
	zoneOf  map[int32]string
	// detail is the topic as the brokers report it; exists is false
	// until it is created.
	detail kadm.TopicDetail
	exists bool
	// changed: a step altered the topic, so the status step reads it again.
	changed bool
	// reassigned: this reconcile submitted a reassignment, so its end is
	// announced even when it completes before the status step (the Ready
	// condition never went through Reassigning).
	reassigned bool
	// created: this round created the topic with everything the spec
	// asks; settling: the brokers report the topic without partitions
	// yet (metadata still propagating). Either way the converging steps
	// wait for the next round.
	created, settling bool
	requeue           time.Duration
}

// topicStop ends a reconcile with Ready=False and a reason. retry returns
// the error to controller-runtime, which retries with exponential backoff
// (Kafka unreachable, cluster not there yet); otherwise the topic waits for
// its spec to change or for the next resync.
type topicStop struct {
	reason  string
	message string
	retry   bool
}

func (e *topicStop) Error() string { return e.message }

// Reconcile brings one Kafka topic to its KafkaTopic's spec.
func (r *KafkaTopicReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	kt := &strata.KafkaTopic{}
	if err := r.Get(ctx, req.NamespacedName, kt); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger := log.FromContext(ctx).WithValues("kafkaTopic", kt.KafkaTopicName(), "generation", kt.Generation)
	ctx = log.IntoContext(ctx, logger)

	if !kt.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, kt)
	}
	if err := ensureFinalizer(ctx, r.Client, kt, TopicFinalizer); err != nil {
		return ctrl.Result{}, err
	}

	before := kt.DeepCopy()
	s := &topicScope{topic: kt, name: kt.KafkaTopicName(), requeue: cmp.Or(r.Resync, DefaultTopicResync)}
	defer func() {
		kt.Status.ObservedGeneration = kt.Generation
		kt.Status.TopicName = s.name
		err := r.patchTopicStatus(ctx, kt, before)
		switch {
		case err == nil || apierrors.IsNotFound(err):
		case apierrors.IsConflict(err) && reterr == nil:
			// The status changed since this reconcile read the KafkaTopic
			// (a cache lagging the previous reconcile's write): reconciled
			// again from the newer version.
			logger.Info("status not written: it changed since this reconcile read the KafkaTopic; reconciling again", "resourceVersion", before.ResourceVersion)
			res = ctrl.Result{RequeueAfter: conflictRequeue}
		default:
			reterr = errors.Join(reterr, fmt.Errorf("patch status: %w", err))
		}
	}()

	// One bound for the whole admin conversation: an unreachable cluster
	// makes the reconcile report and back off instead of holding a worker.
	actx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	steps := []step[*topicScope]{
		{"owner", r.checkOwner},
		{"cluster", r.resolveCluster},
		{"describe", r.describe},
		{"create", r.create},
		{"partitions", r.reconcilePartitions},
		{"configs", r.reconcileConfigs},
		{"replication factor", r.reconcileReplicationFactor},
		{"status", r.observe},
	}
	report := stepReport{object: kt, conditions: &kt.Status.Conditions, event: EventTopicNotReady, what: "topic",
		setReady: func(status metav1.ConditionStatus, reason, msg string) { setTopicCondition(kt, status, reason, msg) }}
	if res, stopped, err := runSteps(actx, r.Recorder, report, &s.requeue, s, steps); stopped {
		return res, err
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}

// patchTopicStatus writes the status changes made to kt since before, the
// version the reconcile read (from the cache, which may lag the previous
// reconcile's own write). The patch names before's resourceVersion: a
// status computed from an older version is never written over a newer
// one, whose configs list the keys this KafkaTopic manages on the topic
// (a key that leaves spec.config is removed from the topic because it
// is listed there) and whose topicId tells a created topic from an
// adopted one. When the KafkaTopic changed since and its status did not
// (a user's spec or metadata edit), the patch goes again over the live
// version: what this reconcile did in Kafka is recorded.
func (r *KafkaTopicReconciler) patchTopicStatus(ctx context.Context, kt, before *strata.KafkaTopic) error {
	err := r.Status().Patch(ctx, kt, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	if !apierrors.IsConflict(err) {
		return err
	}
	live := r.LiveReader
	if live == nil {
		live = r.Client
	}
	latest := &strata.KafkaTopic{}
	if gerr := live.Get(ctx, client.ObjectKeyFromObject(kt), latest); gerr != nil {
		return errors.Join(err, gerr)
	}
	if !equality.Semantic.DeepEqual(latest.Status, before.Status) {
		return err
	}
	base := before.DeepCopy()
	base.ResourceVersion = latest.ResourceVersion
	return r.Status().Patch(ctx, kt, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// kafkaFailure classifies an admin call's error: an error code from a
// broker is KafkaError, anything else (dial, timeout) KafkaUnreachable.
func kafkaFailure(what string, err error) *topicStop {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return &topicStop{reason: ReasonKafkaError, message: fmt.Sprintf("%s: %v", what, err), retry: true}
	}
	return &topicStop{reason: ReasonKafkaUnreachable, message: fmt.Sprintf("%s: %v", what, err), retry: true}
}

// withMessage adds a broker's error message to its error code (Strata's
// brokers start the message with the code's own text; it is said once).
func withMessage(err error, msg string) error {
	if err == nil || msg == "" || strings.Contains(err.Error(), msg) {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.TrimPrefix(msg, err.Error()+": "))
}

// owner is the KafkaTopic that manages Kafka topic name of cluster in
// namespace ns: of all live KafkaTopics naming it, the oldest (ties broken
// by name). Two CRs driving one topic would revert each other's configs
// forever, and deleting the younger would delete the topic the older one
// still manages.
func (r *KafkaTopicReconciler) owner(ctx context.Context, ns, cluster, name string) (*strata.KafkaTopic, error) {
	var list strata.KafkaTopicList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexTopicCluster: cluster}); err != nil {
		return nil, fmt.Errorf("list KafkaTopics of KafkaCluster %s: %w", cluster, err)
	}
	var first *strata.KafkaTopic
	for i := range list.Items {
		kt := &list.Items[i]
		if kt.KafkaTopicName() != name || !kt.DeletionTimestamp.IsZero() {
			continue
		}
		if first == nil || kt.CreationTimestamp.Before(&first.CreationTimestamp) ||
			(kt.CreationTimestamp.Equal(&first.CreationTimestamp) && kt.Name < first.Name) {
			first = kt
		}
	}
	return first, nil
}

// checkOwner stops a KafkaTopic that names a topic another, older
// KafkaTopic of the same cluster already manages: it is reported Stalled
// and changes nothing in Kafka until the other one is gone.
func (r *KafkaTopicReconciler) checkOwner(ctx context.Context, s *topicScope) error {
	o, err := r.owner(ctx, s.topic.Namespace, s.topic.Spec.ClusterRef.Name, s.name)
	if err != nil {
		return err
	}
	if o != nil && o.UID != s.topic.UID {
		return &topicStop{reason: ReasonTopicConflict,
			message: fmt.Sprintf("topic %s of KafkaCluster %s is already managed by KafkaTopic %s; this one changes nothing until that one is deleted",
				s.name, s.topic.Spec.ClusterRef.Name, o.Name)}
	}
	return nil
}

// resolveCluster finds the topic's KafkaCluster and its admin client.
func (r *KafkaTopicReconciler) resolveCluster(ctx context.Context, s *topicScope) error {
	kc := &strata.KafkaCluster{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.topic.Namespace, Name: s.topic.Spec.ClusterRef.Name}, kc)
	if apierrors.IsNotFound(err) || (err == nil && !kc.DeletionTimestamp.IsZero()) {
		return &topicStop{reason: ReasonClusterNotFound, retry: true,
			message: fmt.Sprintf("KafkaCluster %s not found in namespace %s", s.topic.Spec.ClusterRef.Name, s.topic.Namespace)}
	}
	if err != nil {
		return fmt.Errorf("get KafkaCluster: %w", err)
	}
	s.cluster = kc
	if z := s.topic.Spec.LeaderZone; z != "" {
		zones := make([]string, 0, len(kc.Spec.Zones))
		for _, cz := range kc.Spec.Zones {
			zones = append(zones, cz.Name)
		}
		if !slices.Contains(zones, z) {
			// Checked here, not by CEL: the zones are in another object.
			return &topicStop{reason: ReasonLeaderZoneNotInCluster,
				message: fmt.Sprintf("spec.leaderZone %s is not a zone of KafkaCluster %s (zones: %s)", z, kc.Name, strings.Join(zones, ", "))}
		}
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return &topicStop{reason: ReasonKafkaUnreachable, message: err.Error(), retry: true}
	}
	s.adm = adm
	return nil
}

// describe reads the brokers (with their racks) and the topic.
func (r *KafkaTopicReconciler) describe(ctx context.Context, s *topicScope) error {
	md, err := s.adm.Metadata(ctx, s.name)
	if err != nil {
		return &topicStop{reason: ReasonKafkaUnreachable, retry: true,
			message: fmt.Sprintf("read metadata of KafkaCluster %s: %v", s.cluster.Name, err)}
	}
	s.brokers = s.brokers[:0]
	s.zoneOf = map[int32]string{}
	for _, b := range md.Brokers {
		zone := ""
		if b.Rack != nil {
			zone = *b.Rack
		}
		s.brokers = append(s.brokers, placement.Broker{ID: b.NodeID, Zone: zone})
		s.zoneOf[b.NodeID] = zone
	}
	td, ok := md.Topics[s.name]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		s.exists = false
	case td.Err != nil:
		return fmt.Errorf("describe topic %s: %w", s.name, td.Err)
	default:
		s.exists, s.detail = true, td
		s.settling = !topicComplete(td)
	}
	return nil
}

// topicComplete reports whether a Metadata answer shows the topic whole:
// at least one partition, and every partition with its replicas. A broker
// whose metadata lags behind a topic's creation (or a partition
// addition) can list partitions before it knows their assignment, each
// with LEADER_NOT_AVAILABLE and no replicas, as Kafka's brokers do while
// their metadata cache catches up. Such an answer says nothing about the
// replication factor: read as one it is 0, which an adoption event would
// announce and a replication factor step would "repair" with a
// reassignment. A real partition always has replicas, offline or not.
func topicComplete(td kadm.TopicDetail) bool {
	if len(td.Partitions) == 0 {
		return false
	}
	for _, p := range td.Partitions {
		if len(p.Replicas) == 0 {
			return false
		}
	}
	return true
}

// adoptionNote is the TopicAdopted event's note for a topic the KafkaTopic
// finds in Kafka, or "" when there is nothing to announce: the KafkaTopic
// created or adopted it before (status records its ID), or the brokers do
// not report it whole yet (topicComplete), in which case the note waits
// for a round that can state the replication factor the topic has.
func adoptionNote(name string, td kadm.TopicDetail, recordedID string) string {
	if recordedID != "" || !topicComplete(td) {
		return ""
	}
	return fmt.Sprintf("adopted existing topic %s (%d partitions, replication factor %d); its configs converge to the spec",
		name, len(td.Partitions), topicReplicationFactor(td))
}

// waiting says whether the steps that compare the topic with the spec
// should wait: the topic was just created or is not fully visible yet.
func (s *topicScope) waiting() bool { return s.created || s.settling }

// create creates a missing topic with the spec's partitions, replication
// factor and configs; the brokers place the replicas (zone-aware, through
// broker/placement). An existing topic the KafkaTopic did not create is
// adopted: the following steps converge it to the spec.
func (r *KafkaTopicReconciler) create(ctx context.Context, s *topicScope) error {
	kt := s.topic
	if s.exists {
		if note := adoptionNote(s.name, s.detail, kt.Status.TopicID); note != "" {
			r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventTopicAdopted, "Adopt", "%s", note)
			// Announced once, even if a later step of this round fails.
			kt.Status.TopicID = s.detail.ID.String()
		}
		return nil
	}
	desired := DesiredTopicConfigs(kt)
	configs := make(map[string]*string, len(desired))
	for k, v := range desired {
		configs[k] = kadm.StringPtr(v)
	}
	resp, err := s.adm.CreateTopic(ctx, kt.Spec.Partitions, int16(kt.Spec.ReplicationFactor), configs, s.name)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		// Created meanwhile by someone else: adopt it next round.
		s.requeue = min(s.requeue, topicReassignPoll)
		return r.describe(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", s.name, withMessage(err, resp.ErrMessage))
	}
	kt.Status.Configs = desired
	// Recorded now: the brokers' metadata may not show the topic yet, and
	// an empty topicId next round would read as an adopted topic.
	kt.Status.TopicID = resp.ID.String()
	s.changed, s.created = true, true
	r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventTopicCreated, "Create",
		"created topic %s: %d partitions, replication factor %d", s.name, kt.Spec.Partitions, kt.Spec.ReplicationFactor)
	return r.describe(ctx, s)
}

// reconcilePartitions adds partitions; it refuses to remove any, and then
// nothing else about the topic changes until the spec asks for at least
// as many partitions as the topic has.
func (r *KafkaTopicReconciler) reconcilePartitions(ctx context.Context, s *topicScope) error {
	if s.waiting() {
		return nil
	}
	have, want := int32(len(s.detail.Partitions)), s.topic.Spec.Partitions
	switch {
	case have > want:
		observeTopic(s)
		return &topicStop{reason: ReasonPartitionDecreaseRefused,
			message: fmt.Sprintf("topic %s has %d partitions and spec.partitions is %d: Kafka cannot remove partitions without losing their data; set spec.partitions to at least %d (nothing else is changed until then)", s.name, have, want, have)}
	case have < want:
		resp, err := s.adm.UpdatePartitions(ctx, int(want), s.name)
		if err == nil {
			var one kadm.CreatePartitionsResponse
			one, err = resp.On(s.name, nil)
			err = withMessage(cmp.Or(err, one.Err), one.ErrMessage)
		}
		if err != nil {
			return fmt.Errorf("add partitions to %s: %w", s.name, err)
		}
		s.changed = true
		r.Recorder.Eventf(s.topic, nil, corev1.EventTypeNormal, EventPartitionsAdded, "Update",
			"added %d partitions to topic %s (now %d)", want-have, s.name, want)
	}
	return nil
}

// reconcileConfigs converges the managed configs with incremental
// set/delete operations; configs the spec never managed are reported.
func (r *KafkaTopicReconciler) reconcileConfigs(ctx context.Context, s *topicScope) error {
	kt := s.topic
	if s.waiting() {
		return nil
	}
	rcs, err := s.adm.DescribeTopicConfigs(ctx, s.name)
	if err != nil {
		return fmt.Errorf("describe configs of %s: %w", s.name, err)
	}
	rc, err := rcs.On(s.name, nil)
	if err == nil {
		err = withMessage(rc.Err, rc.ErrMessage)
	}
	if err != nil {
		return fmt.Errorf("describe configs of %s: %w", s.name, err)
	}
	overrides := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			overrides[c.Key] = *c.Value
		}
	}
	desired := DesiredTopicConfigs(kt)
	plan := PlanTopicConfigs(desired, kt.Status.Configs, overrides)
	if !maps.Equal(plan.Unmanaged, kt.Status.UnmanagedConfigs) && len(plan.Unmanaged) > 0 {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventUnmanagedConfigs, "Observe",
			"topic %s has configs spec.config does not manage, left as they are: %s", s.name, formatConfigs(plan.Unmanaged))
	}
	kt.Status.UnmanagedConfigs = plan.Unmanaged
	if len(plan.Ops) == 0 {
		kt.Status.Configs = desired
		return nil
	}
	resps, err := s.adm.AlterTopicConfigs(ctx, plan.Ops, s.name)
	if err == nil {
		var one kadm.AlterConfigsResponse
		one, err = resps.On(s.name, nil)
		err = withMessage(cmp.Or(err, one.Err), one.ErrMessage)
	}
	if err != nil {
		return fmt.Errorf("alter configs of %s: %w", s.name, err)
	}
	if len(plan.Drifted) > 0 {
		var was []string
		for _, k := range plan.Drifted {
			v, ok := overrides[k]
			if !ok {
				v = "<removed>"
			}
			was = append(was, fmt.Sprintf("%s=%s (was %s)", k, desired[k], v))
		}
		r.Recorder.Eventf(kt, nil, corev1.EventTypeWarning, EventDriftReverted, "Update",
			"reverted configs of topic %s changed outside the operator: %s", s.name, strings.Join(was, ", "))
	}
	var ops []string
	for _, op := range plan.Ops {
		if op.Op == kadm.DeleteConfig {
			ops = append(ops, "-"+op.Name)
		} else if !slices.Contains(plan.Drifted, op.Name) {
			ops = append(ops, op.Name+"="+*op.Value)
		}
	}
	if len(ops) > 0 {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventConfigsChanged, "Update",
			"changed configs of topic %s: %s", s.name, strings.Join(ops, ", "))
	}
	kt.Status.Configs = desired
	return nil
}

// reconcileReplicationFactor moves replicas when the replication factor
// changes: ResizeReplicas picks the new replica lists from the live
// brokers' racks (one replica per zone as long as zones last), and one
// AlterPartitionAssignments starts the move. It then waits, polling
// ListPartitionReassignments, until the brokers report it done.
func (r *KafkaTopicReconciler) reconcileReplicationFactor(ctx context.Context, s *topicScope) error {
	kt := s.topic
	if s.waiting() {
		return nil
	}
	n, err := reassigningPartitions(ctx, s)
	if err != nil {
		return err
	}
	if n > 0 {
		return nil // observe reports it and polls
	}
	want := int(kt.Spec.ReplicationFactor)
	parts := s.detail.Partitions.Sorted()
	current := make([][]int32, len(parts))
	mismatch := false
	for i, p := range parts {
		current[i] = p.Replicas
		mismatch = mismatch || len(p.Replicas) != want
	}
	if !mismatch {
		return nil
	}
	next, err := ResizeReplicas(s.brokers, current, want)
	if errors.Is(err, placement.ErrInvalidReplicationFactor) {
		observeTopic(s)
		return &topicStop{reason: ReasonReplicationFactorInvalid,
			message: fmt.Sprintf("topic %s: replication factor %d needs at least %d live brokers, the cluster has %d", s.name, want, want, len(s.brokers))}
	}
	if err != nil {
		return fmt.Errorf("plan replicas: %w", err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	moved := 0
	for i, p := range parts {
		if !slices.Equal(next[i], p.Replicas) {
			req.Assign(s.name, p.Partition, next[i])
			moved++
		}
	}
	resps, err := r.Admin.Reassign(ctx, s.cluster, s.adm, req)
	if err == nil {
		for _, r := range resps.Sorted() {
			if r.Err != nil {
				err = fmt.Errorf("partition %d: %w", r.Partition, withMessage(r.Err, r.ErrMessage))
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("reassign replicas of %s: %w", s.name, err)
	}
	s.changed, s.reassigned = true, true
	r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventReassignmentStarted, "Reassign",
		"moving %d partitions of topic %s to replication factor %d", moved, s.name, want)
	return nil
}

// reassigningPartitions is the number of the topic's partitions with a
// reassignment in progress.
func reassigningPartitions(ctx context.Context, s *topicScope) (int, error) {
	set := kadm.TopicsSet{}
	for p := range s.detail.Partitions {
		set.Add(s.name, p)
	}
	resp, err := s.adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return 0, fmt.Errorf("list reassignments of %s: %w", s.name, err)
	}
	return len(resp[s.name]), nil
}

// observe reads the topic again if a step changed it and writes status:
// partitions, leaders per zone, and Ready (True once every partition has
// the spec's replication factor and no reassignment is running).
func (r *KafkaTopicReconciler) observe(ctx context.Context, s *topicScope) error {
	kt := s.topic
	if s.changed {
		if err := r.describe(ctx, s); err != nil {
			return err
		}
	}
	observeTopic(s)
	if s.waiting() {
		s.requeue = min(s.requeue, topicReassignPoll)
		msg := fmt.Sprintf("topic %s created; waiting for the brokers to report its partitions", s.name)
		if !s.created {
			msg = fmt.Sprintf("waiting for the brokers to report every partition of topic %s with its replicas", s.name)
		}
		setTopicCondition(kt, metav1.ConditionFalse, ReasonCreating, msg)
		return nil
	}
	if s.exists && !s.settling && kt.Status.PartitionCount < kt.Spec.Partitions {
		// Partitions just added: the broker that answered has not applied
		// them yet (CreatePartitions answers once the controller has them,
		// as in Kafka). Not Ready with the old count; look again soon.
		s.requeue = min(s.requeue, topicReassignPoll)
		setTopicCondition(kt, metav1.ConditionFalse, ReasonCreating,
			fmt.Sprintf("waiting for the brokers to report the %d partitions of topic %s (%d so far)", kt.Spec.Partitions, s.name, kt.Status.PartitionCount))
		return nil
	}
	moving, err := reassigningPartitions(ctx, s)
	if err != nil {
		return err
	}
	kt.Status.ReassigningPartitions = int32(moving)
	prev := meta.FindStatusCondition(kt.Status.Conditions, strata.ConditionReady)
	if moving > 0 || kt.Status.ReplicationFactor != kt.Spec.ReplicationFactor || topicMaxReplicas(s.detail) != int(kt.Spec.ReplicationFactor) {
		s.requeue = min(s.requeue, topicReassignPoll)
		setTopicCondition(kt, metav1.ConditionFalse, ReasonReassigning,
			fmt.Sprintf("moving replicas of topic %s to replication factor %d: %d partitions in progress", s.name, kt.Spec.ReplicationFactor, moving))
		return nil
	}
	if s.reassigned || (prev != nil && prev.Reason == ReasonReassigning) {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventReassignmentDone, "Reassign",
			"topic %s has replication factor %d", s.name, kt.Spec.ReplicationFactor)
	}
	setTopicCondition(kt, metav1.ConditionTrue, ReasonTopicReady,
		fmt.Sprintf("topic %s: %d partitions, replication factor %d", s.name, kt.Status.PartitionCount, kt.Status.ReplicationFactor))
	return nil
}

// observeTopic writes what the brokers report into status. An incomplete
// report (s.settling) leaves status as the last complete one wrote it:
// its replica counts are not the topic's, and an adopted topic's ID is
// recorded only with its adoption event.
func observeTopic(s *topicScope) {
	st := &s.topic.Status
	if !s.exists || s.settling {
		return
	}
	st.TopicID = s.detail.ID.String()
	parts := s.detail.Partitions.Sorted()
	st.PartitionCount = int32(len(parts))
	st.ReplicationFactor = int32(topicReplicationFactor(s.detail))
	st.Partitions = st.Partitions[:0]
	leaders := make([]int32, 0, len(parts))
	for _, p := range parts {
		st.Partitions = append(st.Partitions, strata.PartitionStatus{
			Partition:  p.Partition,
			Leader:     p.Leader,
			LeaderZone: s.zoneOf[p.Leader],
			Replicas:   slices.Clone(p.Replicas),
			ISR:        sortedIDs(p.ISR),
		})
		leaders = append(leaders, p.Leader)
	}
	st.LeadersPerZone = LeadersPerZone(leaders, s.zoneOf)
}

// topicReplicationFactor is the smallest replica count of the topic's
// partitions.
func topicReplicationFactor(td kadm.TopicDetail) int {
	rf := -1
	for _, p := range td.Partitions {
		if rf < 0 || len(p.Replicas) < rf {
			rf = len(p.Replicas)
		}
	}
	return max(rf, 0)
}

func topicMaxReplicas(td kadm.TopicDetail) int {
	rf := 0
	for _, p := range td.Partitions {
		rf = max(rf, len(p.Replicas))
	}
	return rf
}

func sortedIDs(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func formatConfigs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

// reconcileDelete deletes the Kafka topic (deletionPolicy Delete) or
// leaves it (Retain), then releases the KafkaTopic. A topic whose cluster
// is gone or going has nothing left to delete.
func (r *KafkaTopicReconciler) reconcileDelete(ctx context.Context, kt *strata.KafkaTopic) error {
	if !controllerutil.ContainsFinalizer(kt, TopicFinalizer) {
		return nil
	}
	name := kt.KafkaTopicName()
	o, err := r.owner(ctx, kt.Namespace, kt.Spec.ClusterRef.Name, name)
	if err != nil {
		return err
	}
	if o != nil {
		// Another KafkaTopic manages the topic (this one was a duplicate,
		// or was deleted together with a younger one): leave it to that one.
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventTopicNotOwned, "Delete",
			"left topic %s in Kafka: KafkaTopic %s manages it", name, o.Name)
	} else if kt.Spec.DeletionPolicy == strata.DeletionPolicyRetain {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventTopicRetained, "Delete",
			"left topic %s in Kafka (deletionPolicy Retain)", name)
	} else if err := r.deleteTopic(ctx, kt, name); err != nil {
		before := kt.DeepCopy()
		stop := &topicStop{}
		if !errors.As(err, &stop) {
			stop = kafkaFailure("delete topic", err)
		}
		setTopicCondition(kt, metav1.ConditionFalse, stop.reason, stop.message)
		if perr := r.patchTopicStatus(ctx, kt, before); perr != nil && !apierrors.IsNotFound(perr) {
			err = errors.Join(err, fmt.Errorf("patch status: %w", perr))
		}
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	return releaseFinalizer(ctx, r.Client, kt, TopicFinalizer)
}

func (r *KafkaTopicReconciler) deleteTopic(ctx context.Context, kt *strata.KafkaTopic, name string) error {
	kc := &strata.KafkaCluster{}
	err := r.Get(ctx, client.ObjectKey{Namespace: kt.Namespace, Name: kt.Spec.ClusterRef.Name}, kc)
	if apierrors.IsNotFound(err) || (err == nil && !kc.DeletionTimestamp.IsZero()) {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventTopicDeleted, "Delete",
			"KafkaCluster %s is gone: nothing to delete for topic %s", kt.Spec.ClusterRef.Name, name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get KafkaCluster: %w", err)
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return &topicStop{reason: ReasonKafkaUnreachable, message: err.Error(), retry: true}
	}
	actx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	resp, err := adm.DeleteTopic(actx, name)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		err = nil
	}
	if err != nil {
		return withMessage(err, resp.ErrMessage)
	}
	r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, EventTopicDeleted, "Delete",
		"deleted topic %s (deletionPolicy Delete)", name)
	return nil
}

// setTopicCondition sets Ready and, from its reason, the kstatus
// conditions (conditions.go): a Ready topic is reconciled (Current); a
// refusal only a spec change can lift (a partition decrease, a replication
// factor the brokers cannot hold, a leader zone the cluster does not have)
// is Stalled (Failed); anything else (creating, reassigning, a cluster
// that does not exist yet or does not answer) is Reconciling (InProgress),
// since the controller retries it on its own.
func setTopicCondition(kt *strata.KafkaTopic, status metav1.ConditionStatus, reason, msg string) {
	setReadyCondition(&kt.Status.Conditions, kt.Generation, topicStalledReasons, "the topic matches the spec", status, reason, msg)
}

// topicStalledReasons are the Ready reasons that need a spec change.
var topicStalledReasons = map[string]bool{
	ReasonPartitionDecreaseRefused: true,
	ReasonReplicationFactorInvalid: true,
	ReasonLeaderZoneNotInCluster:   true,
	ReasonTopicConflict:            true,
}

// SetupWithManager registers the controller. It watches KafkaClusters, so
// the topics of a cluster reconcile when it appears or changes.
func (r *KafkaTopicReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &strata.KafkaTopic{}, indexTopicCluster, func(o client.Object) []string {
		return []string{o.(*strata.KafkaTopic).Spec.ClusterRef.Name}
	}); err != nil {
		return fmt.Errorf("index KafkaTopics by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&strata.KafkaTopic{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deletionPredicate()))).
		Watches(&strata.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.topicsOfCluster),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A KafkaTopic that goes away may hand its topic to a duplicate
		// that waited with TopicConflict: wake the cluster's other topics.
		Watches(&strata.KafkaTopic{}, handler.EnqueueRequestsFromMapFunc(r.siblingTopics),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		// A topic whose cluster does not answer holds its worker for up
		// to AdminCallTimeout: the others must not wait behind it.
		WithOptions(controller.Options{MaxConcurrentReconciles: ClusterWorkers}).
		Named("kafkatopic").
		Complete(r)
}

// siblingTopics are the other KafkaTopics of a KafkaTopic's cluster.
func (r *KafkaTopicReconciler) siblingTopics(ctx context.Context, obj client.Object) []reconcile.Request {
	kt, ok := obj.(*strata.KafkaTopic)
	if !ok {
		return nil
	}
	var list strata.KafkaTopicList
	if err := r.List(ctx, &list, client.InNamespace(kt.Namespace), client.MatchingFields{indexTopicCluster: kt.Spec.ClusterRef.Name}); err != nil {
		log.FromContext(ctx).Error(err, "list KafkaTopics of KafkaCluster", "kafkaCluster", kt.Spec.ClusterRef.Name)
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if o := &list.Items[i]; o.UID != kt.UID && o.KafkaTopicName() == kt.KafkaTopicName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

func (r *KafkaTopicReconciler) topicsOfCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	var list strata.KafkaTopicList
	if err := r.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexTopicCluster: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list KafkaTopics of KafkaCluster", "kafkaCluster", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
