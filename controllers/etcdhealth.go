package controllers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	// RecoverNoSpace frees an etcd that raised NOSPACE (noSpaceRecovery).
	RecoverNoSpace(ctx context.Context, endpoints []string) (NoSpaceRecovery, error)
}

// EtcdProber probes etcd with go.etcd.io/etcd/client/v3: Status on every
// endpoint and one AlarmList, each bounded by Timeout.
type EtcdProber struct {
	// Timeout of the whole probe; zero means metadataProbeTimeout.
	Timeout time.Duration
	// TLS is the client configuration for https endpoints (the managed
	// etcd: the operator's client certificate and the cluster CA).
	TLS *tls.Config
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
		TLS:         p.TLS,
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
		case slices.ContainsFunc(st.Errors, func(e string) bool { return !strings.Contains(e, "alarm:") }):
			m.Error = fmt.Sprintf("%v", st.Errors)
		default:
			// A raised alarm (NOSPACE, CORRUPT) is listed in Errors too, but
			// the member answers: the alarm is reported from AlarmList below
			// rather than as an unreachable member.
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
		p := EtcdProber{}
		if isManagedEtcd(kc) {
			cfg, _, err := OperatorTLSConfig(ctx, r.Client, kc)
			if err != nil {
				return fmt.Errorf("etcd client certificate: %w", err)
			}
			p.TLS = cfg
		} else if cfg, err := externalEtcdTLS(ctx, r.liveReader(), kc); err != nil {
			// reconcileCertificates stalls the cluster with this.
			return fmt.Errorf("etcd client certificate: %w", err)
		} else if cfg != nil {
			p.TLS = cfg
		}
		prober = p
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
	if s.etcd != nil && NeedsNoSpaceRecovery(&h, now.Time) {
		if r.recoverNoSpace(ctx, kc, prober, &h) {
			h = prober.Probe(ctx, endpoints)
			h.LastProbeTime = &now
			for i := range h.Members {
				h.Members[i].LastDefragTime = &now
			}
		}
	} else {
		r.defragOne(ctx, kc, prober, &h, now)
	}
	kc.Status.Metadata = &h
	recordEtcdHealth(kc.Namespace, kc.Name, &h)
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
		msg := fmt.Sprintf("etcd alarms raised: %v", h.Alarms)
		if slices.ContainsFunc(h.Alarms, func(a string) bool { return strings.HasPrefix(a, "NOSPACE") }) {
			msg += fmt.Sprintf(" (database %d of quota %d bytes; etcd refuses writes until the alarm is disarmed)", h.DBSizeBytes, h.QuotaBytes)
		}
		return ReasonEtcdAlarm, msg
	case int(h.HealthyMembers) < total:
		return ReasonEtcdDegraded, fmt.Sprintf("%d/%d etcd endpoints healthy", h.HealthyMembers, total)
	}
	return ReasonEtcdHealthy, fmt.Sprintf("%d/%d etcd endpoints healthy, db %d of quota %d bytes", h.HealthyMembers, total, h.DBSizeBytes, h.QuotaBytes)
}

// Events of the etcd upkeep.
const (
	EventEtcdDefragmented      = "EtcdDefragmented"
	EventEtcdDefragFailed      = "EtcdDefragFailed"
	EventEtcdNoSpaceRecovered  = "EtcdNoSpaceRecovered"
	EventEtcdNoSpaceNotCleared = "EtcdNoSpaceNotCleared"
)

// noSpaceRetryInterval is the least time between two NOSPACE recoveries
// (compaction and a defragmentation of every member) of one etcd: when the
// live data itself fills the quota, recovering again frees nothing.
const noSpaceRetryInterval = 10 * time.Minute

// noSpaceDisarmRatio: the alarm is disarmed only when, after compaction
// and defragmentation, every member's database fits in this share of the
// quota; disarming a database that is still nearly full would only let
// the brokers raise the alarm again at their next writes.
const noSpaceDisarmRatio = 0.8

// NoSpaceRecovery is what a NOSPACE recovery achieved.
type NoSpaceRecovery struct {
	// Disarmed is set when the NOSPACE alarms were disarmed.
	Disarmed bool
	// DBSizeBytes is the largest member database after the recovery;
	// QuotaBytes the quota.
	DBSizeBytes, QuotaBytes int64
}

// NeedsNoSpaceRecovery decides whether a probed managed etcd should be
// recovered from NOSPACE now: a NOSPACE alarm is raised, every member
// answers (defragmenting a member stops it serving, so the others must
// keep quorum) and no member was defragmented within noSpaceRetryInterval.
func NeedsNoSpaceRecovery(h *strata.MetadataHealth, now time.Time) bool {
	if !slices.ContainsFunc(h.Alarms, func(a string) bool { return strings.HasPrefix(a, "NOSPACE") }) {
		return false
	}
	if len(h.Members) == 0 || int(h.HealthyMembers) < len(h.Members) {
		return false
	}
	for _, m := range h.Members {
		if m.LastDefragTime != nil && now.Sub(m.LastDefragTime.Time) < noSpaceRetryInterval {
			return false
		}
	}
	return true
}

// RecoverNoSpace is etcd's documented way out of NOSPACE: compact the
// history up to the current revision, defragment every member one at a
// time, and disarm the alarm if the database now fits well under the
// quota. Brokers whose watch falls behind the compaction resync from a
// fresh snapshot (broker/meta Watch), so nothing they need is lost.
func (p EtcdProber) RecoverNoSpace(ctx context.Context, endpoints []string) (NoSpaceRecovery, error) {
	var out NoSpaceRecovery
	ctx, cancel := context.WithTimeout(ctx, time.Duration(len(endpoints)+1)*defragTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: metadataProbeTimeout, Context: ctx, TLS: p.TLS, Logger: zap.NewNop()})
	if err != nil {
		return out, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	st, err := cli.Status(ctx, endpoints[0])
	if err != nil {
		return out, fmt.Errorf("status of %s: %w", endpoints[0], err)
	}
	if _, err := cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return out, fmt.Errorf("compact to revision %d: %w", st.Header.Revision, err)
	}
	for _, ep := range endpoints {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			return out, fmt.Errorf("defragment %s: %w", ep, err)
		}
		st, err := cli.Status(ctx, ep)
		if err != nil {
			return out, fmt.Errorf("status of %s: %w", ep, err)
		}
		out.DBSizeBytes = max(out.DBSizeBytes, st.DbSize)
		out.QuotaBytes = max(out.QuotaBytes, st.DbSizeQuota)
	}
	if out.QuotaBytes > 0 && float64(out.DBSizeBytes) > noSpaceDisarmRatio*float64(out.QuotaBytes) {
		return out, nil
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		return out, fmt.Errorf("alarm list: %w", err)
	}
	for _, a := range alarms.Alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue
		}
		if _, err := cli.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			return out, fmt.Errorf("disarm NOSPACE on member %x: %w", a.MemberID, err)
		}
	}
	out.Disarmed = true
	return out, nil
}

// recoverNoSpace runs a NOSPACE recovery and says what it did in an event.
// It reports whether it ran (members were compacted and defragmented), so
// the caller probes again and records the attempt.
func (r *KafkaClusterReconciler) recoverNoSpace(ctx context.Context, kc *strata.KafkaCluster, prober MetadataProber, h *strata.MetadataHealth) bool {
	res, err := prober.RecoverNoSpace(ctx, h.Endpoints)
	switch {
	case err != nil:
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventEtcdNoSpaceNotCleared, "RecoverNoSpace",
			"etcd NOSPACE: compaction and defragmentation failed: %v", err)
	case res.Disarmed:
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventEtcdNoSpaceRecovered, "RecoverNoSpace",
			"etcd NOSPACE cleared: history compacted, every member defragmented, database %d of quota %d bytes, alarm disarmed", res.DBSizeBytes, res.QuotaBytes)
	default:
		r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventEtcdNoSpaceNotCleared, "RecoverNoSpace",
			"etcd NOSPACE not cleared: after compaction and defragmentation the database still holds %d of quota %d bytes; raise spec.metadata.managed.storageSize (the quota is half the volume)", res.DBSizeBytes, res.QuotaBytes)
	}
	return true
}

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
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: metadataProbeTimeout, Context: ctx, TLS: p.TLS, Logger: zap.NewNop()})
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
