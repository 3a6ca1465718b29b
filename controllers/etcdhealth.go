package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Condition reasons of ConditionMetadataHealthy.
const (
	ReasonEtcdHealthy     = "EtcdHealthy"
	ReasonEtcdUnreachable = "EtcdUnreachable"
	ReasonEtcdDegraded    = "EtcdDegraded"
	ReasonEtcdAlarm       = "EtcdAlarm"
	ReasonEtcdNotStarted  = "EtcdNotStarted"
)

// metadataProbeTimeout bounds one health probe of all endpoints: an
// unreachable etcd costs the reconcile this much, never a hang.
const metadataProbeTimeout = 3 * time.Second

// metadataProbeInterval is how often a settled cluster's etcd health line
// is refreshed; reconciles in between reuse the last probe, so a burst of
// events does not cost a probe each.
const metadataProbeInterval = time.Minute

// metadataProbeMinInterval is the least time between two probes of the
// same endpoints.
const metadataProbeMinInterval = 15 * time.Second

// MetadataProber reads the health of an etcd cluster. The reconciler uses
// EtcdProber unless a test plugs another in.
type MetadataProber interface {
	Probe(ctx context.Context, endpoints []string) strata.MetadataHealth
	// Defragment defragments the member behind endpoint, one of endpoints.
	Defragment(ctx context.Context, endpoints []string, endpoint string) error
}

// EtcdProber probes etcd with go.etcd.io/etcd/client/v3: Status on every
// endpoint and one AlarmList, each bounded by Timeout.
type EtcdProber struct {
	// Timeout of the whole probe; zero means metadataProbeTimeout.
	Timeout time.Duration
}

// Probe never fails: what it could not learn is in the members' Error.
func (p EtcdProber) Probe(ctx context.Context, endpoints []string) strata.MetadataHealth {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = metadataProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := strata.MetadataHealth{Endpoints: slices.Clone(endpoints)}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: timeout,
		Context:     ctx,
		Logger:      zap.NewNop(), // failures are reported in the status
	})
	if err != nil {
		for _, ep := range endpoints {
			h.Members = append(h.Members, strata.MetadataMemberHealth{Endpoint: ep, Error: fmt.Sprintf("etcd client: %v", err)})
		}
		return h
	}
	defer cli.Close()
	for _, ep := range endpoints {
		m := strata.MetadataMemberHealth{Endpoint: ep}
		st, err := cli.Status(ctx, ep)
		switch {
		case err != nil:
			m.Error = err.Error()
		case len(st.Errors) > 0:
			m.Error = fmt.Sprintf("%v", st.Errors)
		default:
			m.Healthy = true
		}
		if st != nil {
			if st.Header != nil {
				m.MemberID = fmt.Sprintf("%x", st.Header.MemberId)
			}
			m.DBSizeBytes, m.DBSizeInUseBytes = st.DbSize, st.DbSizeInUse
			h.DBSizeBytes = max(h.DBSizeBytes, st.DbSize)
			h.QuotaBytes = max(h.QuotaBytes, st.DbSizeQuota)
		}
		if m.Healthy {
			h.HealthyMembers++
		}
		h.Members = append(h.Members, m)
	}
	if h.HealthyMembers > 0 {
		alarms, err := cli.AlarmList(ctx)
		if err != nil {
			h.Alarms = append(h.Alarms, fmt.Sprintf("alarm list: %v", err))
		} else {
			for _, a := range alarms.Alarms {
				h.Alarms = append(h.Alarms, fmt.Sprintf("%s on member %x", a.Alarm, a.MemberID))
			}
		}
	}
	return h
}

// reconcileMetadataHealth fills status.metadata and the MetadataHealthy
// condition. It never fails the reconcile: an unhealthy metadata store is
// reported, and the brokers' own objects are already written.
func (r *KafkaClusterReconciler) reconcileMetadataHealth(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	endpoints := MetadataEndpoints(kc)
	if s.etcd != nil && s.etcd.Status.ReadyReplicas == 0 {
		// No managed member runs yet: probing would only wait out the
		// timeout on names that do not resolve.
		kc.Status.Metadata = &strata.MetadataHealth{Endpoints: endpoints}
		setCondition(kc, strata.ConditionMetadataHealthy, metav1.ConditionFalse, ReasonEtcdNotStarted, "no managed etcd member is ready yet")
		return nil
	}
	if last := kc.Status.Metadata; last != nil && last.LastProbeTime != nil &&
		slices.Equal(last.Endpoints, endpoints) && time.Since(last.LastProbeTime.Time) < metadataProbeMinInterval {
		return nil
	}
	prober := r.MetadataProber
	if prober == nil {
		prober = EtcdProber{}
	}
	h := prober.Probe(ctx, endpoints)
	now := metav1.Now()
	h.LastProbeTime = &now
	// Carry each member's last defragmentation over from the last probe:
	// it is the rate limit, and living in the status it survives an
	// operator restart.
	if last := kc.Status.Metadata; last != nil {
		for i := range h.Members {
			for _, lm := range last.Members {
				if lm.Endpoint == h.Members[i].Endpoint {
					h.Members[i].LastDefragTime = lm.LastDefragTime
				}
			}
		}
	}
	r.defragOne(ctx, kc, prober, &h, now)
	kc.Status.Metadata = &h
	reason, msg := metadataCondition(&h)
	status := metav1.ConditionFalse
	if reason == ReasonEtcdHealthy {
		status = metav1.ConditionTrue
	}
	setCondition(kc, strata.ConditionMetadataHealthy, status, reason, msg)
	return nil
}

// metadataCondition sums a health line up as a condition reason and message.
func metadataCondition(h *strata.MetadataHealth) (reason, msg string) {
	total := len(h.Members)
	switch {
	case h.HealthyMembers == 0:
		first := ""
		if total > 0 {
			first = ": " + h.Members[0].Error
		}
		return ReasonEtcdUnreachable, fmt.Sprintf("no etcd endpoint of %d answered%s", total, first)
	case len(h.Alarms) > 0:
		return ReasonEtcdAlarm, fmt.Sprintf("etcd alarms raised: %v", h.Alarms)
	case int(h.HealthyMembers) < total:
		return ReasonEtcdDegraded, fmt.Sprintf("%d/%d etcd endpoints healthy", h.HealthyMembers, total)
	}
	return ReasonEtcdHealthy, fmt.Sprintf("%d/%d etcd endpoints healthy, db %d of quota %d bytes", h.HealthyMembers, total, h.DBSizeBytes, h.QuotaBytes)
}

// Events of the etcd upkeep.
const (
	EventEtcdDefragmented = "EtcdDefragmented"
	EventEtcdDefragFailed = "EtcdDefragFailed"
)

// defragTimeout bounds one defragmentation: the member rewrites its whole
// backend, which takes longer than a probe.
const defragTimeout = time.Minute

// DefragPolicy says when a member is worth defragmenting.
type DefragPolicy struct {
	// MinFreeBytes and MinFreeRatio: the member's backend must hold at
	// least this many bytes, and this share of its size, that are not in
	// use (what a defragmentation gives back).
	MinFreeBytes int64
	MinFreeRatio float64
	// MinInterval between two defragmentations of the same member.
	MinInterval time.Duration
}

// DefaultDefragPolicy defragments a member when at least 100 MiB and half
// of its backend are free, at most once an hour per member.
var DefaultDefragPolicy = DefragPolicy{MinFreeBytes: 100 << 20, MinFreeRatio: 0.5, MinInterval: time.Hour}

// PickDefragMember decides which member, if any, to defragment now: only
// when every member is healthy (a defragmenting member stops serving, so
// the others must carry quorum), and then the member with the most free
// bytes past the policy's thresholds and not defragmented within
// MinInterval; ties go to the first endpoint in order. One member at a
// time: the caller defragments the one returned and decides again on a
// later probe.
func PickDefragMember(members []strata.MetadataMemberHealth, policy DefragPolicy, now time.Time) (int, bool) {
	for _, m := range members {
		if !m.Healthy {
			return -1, false
		}
	}
	best, bestFree := -1, int64(0)
	for i, m := range members {
		free := m.DBSizeBytes - m.DBSizeInUseBytes
		if free <= 0 || free < policy.MinFreeBytes || float64(free) < policy.MinFreeRatio*float64(m.DBSizeBytes) {
			continue
		}
		if m.LastDefragTime != nil && now.Sub(m.LastDefragTime.Time) < policy.MinInterval {
			continue
		}
		if free > bestFree {
			best, bestFree = i, free
		}
	}
	return best, best >= 0
}

// Defragment defragments the member behind endpoint.
func (p EtcdProber) Defragment(ctx context.Context, endpoints []string, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, defragTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: metadataProbeTimeout, Context: ctx, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	return nil
}

// defragOne defragments at most one member of a freshly probed health
// line, recording the attempt in the member's LastDefragTime (also on
// failure, so a member that fails is not retried at every reconcile) and
// as an event.
func (r *KafkaClusterReconciler) defragOne(ctx context.Context, kc *strata.KafkaCluster, prober MetadataProber, h *strata.MetadataHealth, now metav1.Time) {
	i, ok := PickDefragMember(h.Members, DefaultDefragPolicy, now.Time)
	if !ok {
		return
	}
	m := &h.Members[i]
	m.LastDefragTime = &now
	if err := prober.Defragment(ctx, h.Endpoints, m.Endpoint); err != nil {
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventEtcdDefragFailed, "Defragment", "etcd member %s: %v", m.Endpoint, err)
		return
	}
	r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventEtcdDefragmented, "Defragment",
		"etcd member %s defragmented: %d bytes in use of %d before", m.Endpoint, m.DBSizeInUseBytes, m.DBSizeBytes)
}
