package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/log"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Reasons of ConditionKafkaReachable, and of Ready when Kafka is the part
// that fails.
const (
	ReasonKafkaReachable       = "KafkaReachable"
	ReasonKafkaUnreachable     = "KafkaUnreachable"
	ReasonBrokersNotRegistered = "BrokersNotRegistered"
	ReasonPartitionsOffline    = "PartitionsOffline"
	ReasonMetadataUnhealthy    = "MetadataUnhealthy"
	ReasonClusterHealthy       = "ClusterHealthy"
	// Degraded reasons.
	ReasonPartitionsUnderReplicated = "PartitionsUnderReplicated"
	ReasonWALDegraded               = "WALDegraded"
)

// Events of the Kafka health step and of preferred-leader election.
const (
	EventLeadersElected       = "PreferredLeadersElected"
	EventLeaderElectionFailed = "PreferredLeaderElectionFailed"
	// EventKafkaUnreachable and EventKafkaReachable mark the transitions
	// of KafkaReachable, not every failed probe.
	EventKafkaUnreachable = "KafkaUnreachable"
	EventKafkaReachable   = "KafkaReachable"
)

const (
	// kafkaProbeTimeout bounds one Kafka probe (a Metadata request, with
	// kgo's retries on dial errors): well inside AdminCallTimeout, so an
	// unreachable cluster holds a worker this long at most, and the
	// backoff below keeps that rare.
	kafkaProbeTimeout = 10 * time.Second
	// DefaultKafkaProbeInterval is how often a cluster's Kafka health is
	// read when nothing else triggers a reconcile: killed brokers and
	// offline partitions change nothing the operator watches.
	DefaultKafkaProbeInterval = 30 * time.Second
	// kafkaBackoffInitial and kafkaBackoffMax: after a failed probe the
	// next one waits this long, doubling per failure; reconciles in
	// between keep the last result.
	kafkaBackoffInitial = 5 * time.Second
	kafkaBackoffMax     = 2 * time.Minute
	// walScrapeTimeout bounds one broker's /metrics scrape.
	walScrapeTimeout = 3 * time.Second
	// walScrapeParallel is how many brokers are scraped at once.
	walScrapeParallel = 8
	// LeaderElectionMinInterval is the least time between two
	// preferred-leader elections the operator asks for in one cluster:
	// after a restart, replicas rejoin their ISR one by one, and one
	// election per interval catches them in batches instead of one
	// request per partition.
	LeaderElectionMinInterval = 30 * time.Second
	// MaxPartitionsPerElection caps one ElectLeaders request; the rest
	// waits for the next interval, so a cluster-wide failover does not
	// move thousands of leaders at once.
	MaxPartitionsPerElection = 200
)

// walDegradedMetric is the broker gauge that is 1 while the broker's WAL
// uploader refuses data because uploads fail, i.e. while it replicates
// inline (broker/wal UploaderCollector). A broker without WAL does not
// export it.
const walDegradedMetric = "strata_wal_degraded"

// SummarizeKafka turns a Metadata answer into the status health line.
// wanted are the broker IDs the spec wants (status.brokers).
func SummarizeKafka(md kadm.Metadata, wanted []int32) strata.KafkaHealth {
	h := strata.KafkaHealth{Reachable: true, Controller: md.Controller, RegisteredBrokers: int32(len(md.Brokers))}
	rack := map[int32]string{}
	for _, b := range md.Brokers {
		if b.Rack != nil {
			rack[b.NodeID] = *b.Rack
		}
	}
	for _, id := range wanted {
		if _, ok := brokerIn(md.Brokers, id); !ok {
			h.UnregisteredBrokers = append(h.UnregisteredBrokers, id)
		}
	}
	leaders := map[string]int32{}
	for _, t := range md.Topics {
		if t.Err != nil {
			continue
		}
		h.Topics++
		for _, p := range t.Partitions {
			h.Partitions++
			if p.Leader < 0 {
				h.OfflinePartitions++
				continue
			}
			if len(p.ISR) < len(p.Replicas) {
				h.UnderReplicatedPartitions++
			}
			if len(p.Replicas) > 0 && p.Replicas[0] != p.Leader {
				h.NonPreferredLeaders++
			}
			if z, ok := rack[p.Leader]; ok {
				leaders[z]++
			}
		}
	}
	for z, n := range leaders {
		h.LeadersPerZone = append(h.LeadersPerZone, strata.ZoneLeaders{Zone: z, Leaders: n})
	}
	slices.SortFunc(h.LeadersPerZone, func(a, b strata.ZoneLeaders) int { return cmp.Compare(a.Zone, b.Zone) })
	return h
}

func brokerIn(brokers kadm.BrokerDetails, id int32) (kadm.BrokerDetail, bool) {
	for _, b := range brokers {
		if b.NodeID == id {
			return b, true
		}
	}
	return kadm.BrokerDetail{}, false
}

// LeaderDrift lists the partitions whose leader drifted off their
// preferred (first) replica while that replica is registered and in the
// ISR, so a preferred-leader election would move them back, at most max
// limit of them (ordered by topic and partition), and how many drifted. Partitions whose preferred
// replica is gone or out of sync are left alone: an election would fail.
func LeaderDrift(md kadm.Metadata, limit int) (kadm.TopicsSet, int) {
	type tp struct {
		topic     string
		partition int32
	}
	var drifted []tp
	for _, t := range md.Topics {
		if t.Err != nil {
			continue
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || len(p.Replicas) == 0 {
				continue
			}
			preferred := p.Replicas[0]
			if p.Leader == preferred || !slices.Contains(p.ISR, preferred) {
				continue
			}
			if _, ok := brokerIn(md.Brokers, preferred); !ok {
				continue
			}
			drifted = append(drifted, tp{t.Topic, p.Partition})
		}
	}
	slices.SortFunc(drifted, func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	total := len(drifted)
	set := kadm.TopicsSet{}
	for _, d := range drifted[:min(total, limit)] {
		set.Add(d.topic, d.partition)
	}
	return set, total
}

// WALDegraded reads a broker's /metrics text: whether strata_wal_degraded
// is exported (the broker runs a WAL uploader) and whether it is 1.
func WALDegraded(r io.Reader) (degraded, exported bool, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return false, false, fmt.Errorf("parse metrics: %w", err)
	}
	mf, ok := families[walDegradedMetric]
	if !ok {
		return false, false, nil
	}
	for _, m := range mf.GetMetric() {
		if gaugeValue(m) != 0 {
			return true, true, nil
		}
	}
	return false, true, nil
}

func gaugeValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// brokerWAL is one broker's scrape result.
type brokerWAL struct {
	id           int32
	zone         string
	degraded     bool
	policyInline bool
	metrics      BrokerMetrics
	err          error
}

// ZoneWAL sums the scrapes of one zone's registered brokers up as the
// zone's WAL state: Degraded when any broker fell back to inline, Unknown
// when a scrape failed or no broker was scraped, Healthy otherwise.
func ZoneWAL(scrapes []brokerWAL) *strata.ZoneWALStatus {
	st := &strata.ZoneWALStatus{State: strata.WALHealthy}
	var problems []string
	for _, s := range scrapes {
		switch {
		case s.err != nil:
			problems = append(problems, fmt.Sprintf("broker %d: %v", s.id, s.err))
		case s.degraded:
			st.DegradedBrokers = append(st.DegradedBrokers, s.id)
		case s.policyInline:
			st.PolicyInlineBrokers = append(st.PolicyInlineBrokers, s.id)
		}
		if s.err == nil && s.metrics.Point != nil {
			st.OperatingPoints = append(st.OperatingPoints, OperatingPoint(s.id, s.policyInline, *s.metrics.Point))
		}
	}
	st.ZoneLocal = ZoneLocalStatus(scrapes)
	switch {
	case len(st.DegradedBrokers) > 0:
		st.State = strata.WALDegraded
	case len(scrapes) == 0:
		st.State, st.Message = strata.WALUnknown, "no registered broker to read metrics from"
	case len(problems) > 0:
		st.State, st.Message = strata.WALUnknown, strings.Join(problems, "; ")
	}
	return st
}

// probeBackoff is the reconciler's per-cluster probe backoff: after a
// failed probe, reconciles until the backoff ends keep the last result
// instead of waiting on the unreachable brokers again.
func (r *KafkaClusterReconciler) probeBackoff() *flowcontrol.Backoff {
	r.kafkaBackoffOnce.Do(func() { r.kafkaBackoff = flowcontrol.NewBackOff(kafkaBackoffInitial, kafkaBackoffMax) })
	return r.kafkaBackoff
}

func clusterKey(kc *strata.KafkaCluster) string { return kc.Namespace + "/" + kc.Name }

// reconcileKafkaHealth reads the cluster through the Kafka admin API and
// the brokers' metrics into status.kafka, status.brokers[].registered and
// status.zones[].wal, and sets KafkaReachable. It never fails the
// reconcile: an unreachable cluster is reported and probed again after a
// backoff (s.requeueAfter).
func (r *KafkaClusterReconciler) reconcileKafkaHealth(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	key := clusterKey(kc)
	bo := r.probeBackoff()
	now := time.Now()
	interval := cmp.Or(r.KafkaProbeInterval, DefaultKafkaProbeInterval)
	if last := kc.Status.Kafka; last != nil && last.LastProbeTime != nil && bo.IsInBackOffSinceUpdate(key, now) {
		// Still backing off after a failed probe: keep what we know.
		s.requeueAfter = max(bo.Get(key)-now.Sub(last.LastProbeTime.Time), time.Second)
		r.applyKafkaToBrokers(s)
		return nil
	}
	wasReachable := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionKafkaReachable)
	h, md := r.probeKafka(ctx, kc)
	probed := metav1.NewTime(now)
	h.LastProbeTime = &probed
	if last := kc.Status.Kafka; last != nil {
		h.LastLeaderElectionTime = last.LastLeaderElectionTime
	}
	kc.Status.Kafka = &h
	s.metadata = md
	if !h.Reachable {
		bo.Next(key, now)
		s.requeueAfter = bo.Get(key)
		if wasReachable == nil || wasReachable.Status != metav1.ConditionFalse {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventKafkaUnreachable, "ProbeKafka", "brokers unreachable (next probe in %s): %s", s.requeueAfter.Round(time.Second), h.Error)
		}
		setCondition(kc, strata.ConditionKafkaReachable, metav1.ConditionFalse, ReasonKafkaUnreachable, h.Error)
		log.FromContext(ctx).V(logDebug).Info("Kafka unreachable", "error", h.Error, "retryIn", s.requeueAfter)
		r.applyKafkaToBrokers(s)
		// Which brokers run is not known: an earlier WAL state would be
		// stale.
		for i := range kc.Status.Zones {
			kc.Status.Zones[i].WAL = &strata.ZoneWALStatus{State: strata.WALUnknown, Message: "brokers unreachable"}
			if !kc.Spec.WAL.IsEnabled() {
				kc.Status.Zones[i].WAL = &strata.ZoneWALStatus{State: strata.WALDisabled}
			}
		}
		return nil
	}
	bo.Reset(key)
	if wasReachable != nil && wasReachable.Status == metav1.ConditionFalse {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventKafkaReachable, "ProbeKafka", "brokers reachable again: %d registered, controller %d", h.RegisteredBrokers, h.Controller)
	}
	s.requeueAfter = interval
	setCondition(kc, strata.ConditionKafkaReachable, metav1.ConditionTrue, ReasonKafkaReachable,
		fmt.Sprintf("%d brokers registered, controller %d", h.RegisteredBrokers, h.Controller))
	r.applyKafkaToBrokers(s)
	r.scrapeWAL(ctx, s)
	return nil
}

// probeKafka reads Metadata (all topics) within kafkaProbeTimeout.
func (r *KafkaClusterReconciler) probeKafka(ctx context.Context, kc *strata.KafkaCluster) (strata.KafkaHealth, *kadm.Metadata) {
	unreachable := func(err error) (strata.KafkaHealth, *kadm.Metadata) {
		return strata.KafkaHealth{Controller: -1, Error: err.Error()}, nil
	}
	if r.Admin == nil {
		return unreachable(errors.New("no Kafka admin client configured"))
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return unreachable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, min(kafkaProbeTimeout, AdminCallTimeout))
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		return unreachable(fmt.Errorf("metadata: %w", err))
	}
	var wanted []int32
	for _, b := range kc.Status.Brokers {
		wanted = append(wanted, b.ID)
	}
	return SummarizeKafka(md, wanted), &md
}

// applyKafkaToBrokers marks the brokers of status.brokers registered as
// the last probe saw them, and carries the zones' last WAL state over
// when this reconcile does not scrape.
func (r *KafkaClusterReconciler) applyKafkaToBrokers(s *clusterScope) {
	st := &s.cluster.Status
	for i := range st.Brokers {
		st.Brokers[i].Registered = st.Kafka != nil && st.Kafka.Reachable && !slices.Contains(st.Kafka.UnregisteredBrokers, st.Brokers[i].ID)
	}
	for i := range st.Zones {
		st.Zones[i].WAL = s.lastZoneWAL[st.Zones[i].Name]
	}
}

// scrapeWAL reads every registered broker's /metrics: strata_wal_degraded
// and strata_wal_policy_inline set each zone's WAL state,
// strata_zonelocal_path and strata_zonelocal_partitions_total its
// zone-local produce forwarding, the cost counters status.cost
// (kafkacluster_cost.go).
func (r *KafkaClusterReconciler) scrapeWAL(ctx context.Context, s *clusterScope) {
	kc := s.cluster
	st := &kc.Status
	var targets []strata.BrokerStatus
	for _, b := range st.Brokers {
		if b.Registered {
			targets = append(targets, b)
		}
	}
	results := make([]brokerWAL, len(targets))
	// Without the token (its Secret not written yet: the certificates
	// step did not run) the scrape goes without one: brokers that
	// require it answer 401, and each such result says why.
	token, tokenErr := r.readMetricsToken(ctx, kc)
	sem := make(chan struct{}, walScrapeParallel)
	var wg sync.WaitGroup
	for i, b := range targets {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = brokerWAL{id: b.ID, zone: b.Zone}
			results[i].metrics, results[i].err = r.scrapeBroker(ctx, kc, b, token)
			if results[i].err != nil && tokenErr != nil {
				results[i].err = fmt.Errorf("%w (%v)", results[i].err, tokenErr)
			}
			if results[i].err == nil && kc.Spec.WAL.IsEnabled() && !results[i].metrics.WALExported {
				results[i].err = fmt.Errorf("%s not exported: the broker runs without WAL", walDegradedMetric)
			}
			results[i].degraded = results[i].metrics.Degraded
			results[i].policyInline = results[i].metrics.PolicyInline
		})
	}
	wg.Wait()
	s.scrapes, s.scraped = results, true
	var scraped []BrokerMetrics
	for _, res := range results {
		if res.err == nil {
			scraped = append(scraped, res.metrics)
		}
	}
	if c := CostReport(scraped, time.Now()); c != nil {
		st.Cost = c
	}
	if !kc.Spec.WAL.IsEnabled() {
		for i := range st.Zones {
			st.Zones[i].WAL = &strata.ZoneWALStatus{State: strata.WALDisabled}
		}
		return
	}
	byZone := map[string][]brokerWAL{}
	for _, res := range results {
		byZone[res.zone] = append(byZone[res.zone], res)
	}
	for i := range st.Zones {
		st.Zones[i].WAL = ZoneWAL(byZone[st.Zones[i].Name])
	}
}

// scrapeBroker reads one broker's /metrics with the cluster's metrics
// token.
func (r *KafkaClusterReconciler) scrapeBroker(ctx context.Context, kc *strata.KafkaCluster, b strata.BrokerStatus, token string) (BrokerMetrics, error) {
	ord := b.ID - zoneBase(kc, b.Zone)
	base, err := r.Admin.Endpoints().HTTP(kc, b.Zone, ord, b.ID)
	if err != nil {
		return BrokerMetrics{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, walScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return BrokerMetrics{}, fmt.Errorf("metrics request: %w", err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return BrokerMetrics{}, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return BrokerMetrics{}, fmt.Errorf("scrape metrics: %s", resp.Status)
	}
	return ParseBrokerMetrics(resp.Body)
}

// zoneBase is the broker ID base of a zone in status.zones.
func zoneBase(kc *strata.KafkaCluster, zone string) int32 {
	for _, z := range kc.Status.Zones {
		if z.Name == zone {
			return z.BrokerIDBase
		}
	}
	return 0
}

// balanceLeaders carries out leader placement for policies Balanced and
// Zone: partitions whose leader drifted off their preferred replica
// (after a failover or a restart) get a preferred-leader election, at most
// MaxPartitionsPerElection at a time and at most once per
// LeaderElectionMinInterval per cluster. The brokers choose preferred
// replicas by the policy when they place partitions; the operator only
// moves leadership back to them.
func (r *KafkaClusterReconciler) balanceLeaders(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	h := kc.Status.Kafka
	if s.metadata == nil || h == nil || !h.Reachable {
		return nil
	}
	drifted, total := LeaderDrift(*s.metadata, MaxPartitionsPerElection)
	if total == 0 {
		return nil
	}
	interval := cmp.Or(r.LeaderElectionInterval, LeaderElectionMinInterval)
	now := time.Now()
	if last := h.LastLeaderElectionTime; last != nil && now.Sub(last.Time) < interval {
		wait := interval - now.Sub(last.Time)
		if s.requeueAfter == 0 || wait < s.requeueAfter {
			s.requeueAfter = wait
		}
		return nil
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		return nil // probed a moment ago; the next probe reports it
	}
	elected := metav1.NewTime(now)
	h.LastLeaderElectionTime = &elected
	if s.requeueAfter == 0 || interval < s.requeueAfter {
		s.requeueAfter = interval // check the outcome, elect the rest
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	results, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, drifted)
	if err != nil {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventLeaderElectionFailed, "ElectLeaders",
			"preferred-leader election of %d partitions: %v", partitionCount(drifted), err)
		return nil
	}
	moved := 0
	var failed []string
	for _, parts := range results {
		for _, res := range parts {
			if res.Err == nil {
				moved++
				continue
			}
			failed = append(failed, fmt.Sprintf("%s/%d: %v", res.Topic, res.Partition, res.Err))
		}
	}
	sort.Strings(failed)
	log.FromContext(ctx).Info("preferred-leader election", "drifted", total, "asked", partitionCount(drifted), "moved", moved, "failed", len(failed))
	if moved > 0 {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventLeadersElected, "ElectLeaders",
			"moved %d partition leaders back to their preferred replica (%d drifted, policy %s)", moved, total, cmp.Or(kc.Spec.LeaderPlacement.Policy, strata.LeaderPlacementBalanced))
	}
	if len(failed) > 0 {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventLeaderElectionFailed, "ElectLeaders",
			"preferred-leader election failed for %d partitions: %s", len(failed), strings.Join(failed[:min(len(failed), 5)], "; "))
	}
	return nil
}

func partitionCount(s kadm.TopicsSet) int {
	n := 0
	for _, ps := range s {
		n += len(ps)
	}
	return n
}

// forgetKafka drops a deleted cluster's admin client and probe backoff.
func (r *KafkaClusterReconciler) forgetKafka(kc *strata.KafkaCluster) {
	if r.Admin != nil {
		r.Admin.Forget(types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name})
	}
	r.probeBackoff().DeleteEntry(clusterKey(kc))
}

// readiness decides the Ready condition from the pods, the managed etcd,
// the Kafka health line and MetadataHealthy: the first part that fails
// gives the reason, the message lists every failing part.
func readiness(kc *strata.KafkaCluster, podsMsg string, podsReady bool) (metav1.ConditionStatus, string, string) {
	type part struct{ reason, msg string }
	var failing []part
	if !podsReady {
		failing = append(failing, part{ReasonBrokersNotReady, podsMsg})
	}
	h := kc.Status.Kafka
	switch {
	case h == nil:
		failing = append(failing, part{ReasonKafkaUnreachable, "Kafka not probed yet"})
	case !h.Reachable:
		failing = append(failing, part{ReasonKafkaUnreachable, "Kafka unreachable: " + h.Error})
	default:
		if h.OfflinePartitions > 0 {
			failing = append(failing, part{ReasonPartitionsOffline, fmt.Sprintf("%d of %d partitions offline (no leader)", h.OfflinePartitions, h.Partitions)})
		}
		if len(h.UnregisteredBrokers) > 0 {
			failing = append(failing, part{ReasonBrokersNotRegistered, fmt.Sprintf("brokers %v not registered", h.UnregisteredBrokers)})
		}
	}
	if c := meta.FindStatusCondition(kc.Status.Conditions, strata.ConditionMetadataHealthy); c == nil || c.Status != metav1.ConditionTrue {
		msg := "metadata health not probed yet"
		if c != nil {
			msg = fmt.Sprintf("metadata %s: %s", c.Reason, c.Message)
		}
		failing = append(failing, part{ReasonMetadataUnhealthy, msg})
	}
	if len(failing) == 0 {
		msg := podsMsg
		if h != nil {
			msg += fmt.Sprintf("; %d brokers registered, %d partitions, none offline, %d under-replicated", h.RegisteredBrokers, h.Partitions, h.UnderReplicatedPartitions)
		}
		return metav1.ConditionTrue, ReasonClusterHealthy, msg
	}
	msgs := make([]string, len(failing))
	for i, f := range failing {
		msgs[i] = f.msg
	}
	return metav1.ConditionFalse, failing[0].reason, strings.Join(msgs, "; ")
}
