package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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
