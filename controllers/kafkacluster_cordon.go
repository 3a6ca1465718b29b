package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/controllers/plan"
)

// Cordons (issue #27): the brokers a scale-down removes are cordoned on
// the broker side — their dynamic broker config cordoned.log.dirs is "*"
// (Kafka's KIP-1066), so no new topic, new partition or reassignment puts
// a replica on them — from before the first move of their drain until they
// are gone from the metadata (their pods stopped and their registrations
// expired), which covers the window between "empty" and the StatefulSet
// shrinking and the pod's termination after it. A cancelled scale-down
// (the spec wants them again) uncordons them. status.cordonedBrokers
// remembers which cordons are the operator's: a cordon someone else set on
// a wanted broker is left alone.

// EventBrokersCordoned and EventBrokersUncordoned are the events of the
// operator's cordons.
const (
	EventBrokersCordoned   = "BrokersCordoned"
	EventBrokersUncordoned = "BrokersUncordoned"
)

// CordonChanges decides the cordons to set and to remove: toRemove are the
// brokers the scale-down removes that the metadata knows (brokersToRemove),
// ours the brokers the operator cordoned before (status.cordonedBrokers).
func CordonChanges(toRemove, ours []int32) (cordon, uncordon []int32) {
	for _, id := range toRemove {
		if !slices.Contains(ours, id) {
			cordon = append(cordon, id)
		}
	}
	for _, id := range ours {
		if !slices.Contains(toRemove, id) {
			uncordon = append(uncordon, id)
		}
	}
	slices.Sort(cordon)
	slices.Sort(uncordon)
	return cordon, uncordon
}

// syncCordons brings the operator's cordons to toRemove (md is the
// metadata toRemove comes from: its registered brokers carry the
// requests). status.cordonedBrokers follows each request that went
// through; an error leaves the rest for the next reconcile, and the
// caller starts no move while a broker to drain is not cordoned.
func (r *KafkaClusterReconciler) syncCordons(ctx context.Context, kc *strata.KafkaCluster, md plan.Metadata, toRemove []int32) error {
	cordon, uncordon := CordonChanges(toRemove, kc.Status.CordonedBrokers)
	if len(cordon) == 0 && len(uncordon) == 0 {
		return nil
	}
	if len(md.Brokers) == 0 {
		return fmt.Errorf("no registered broker to send the cordons of brokers %v to", append(cordon, uncordon...))
	}
	// A broker's resource is accepted by every broker (the metadata
	// holds it); kadm would route it to the broker it names, which may
	// be gone. The lowest wanted-or-not registered broker takes them.
	via := slices.MinFunc(md.Brokers, func(a, b plan.Broker) int { return cmp.Compare(a.ID, b.ID) }).ID
	if len(cordon) > 0 {
		if err := r.alterCordons(ctx, kc, via, cordon, true); err != nil {
			return fmt.Errorf("cordon brokers %v: %w", cordon, err)
		}
		kc.Status.CordonedBrokers = slices.Sorted(slices.Values(append(kc.Status.CordonedBrokers, cordon...)))
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventBrokersCordoned, "Cordon",
			"brokers %v cordoned (%s=*): the scale-down removes them, they take no new replica", cordon, meta.ConfigCordonedLogDirs)
	}
	if len(uncordon) > 0 {
		if err := r.alterCordons(ctx, kc, via, uncordon, false); err != nil {
			return fmt.Errorf("uncordon brokers %v: %w", uncordon, err)
		}
		kc.Status.CordonedBrokers = slices.DeleteFunc(kc.Status.CordonedBrokers, func(id int32) bool { return slices.Contains(uncordon, id) })
		if len(kc.Status.CordonedBrokers) == 0 {
			kc.Status.CordonedBrokers = nil
		}
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventBrokersUncordoned, "Cordon",
			"brokers %v uncordoned: gone from the metadata or wanted again", uncordon)
	}
	return nil
}

// alterCordons sets (or deletes) cordoned.log.dirs=* on brokers with one
// IncrementalAlterConfigs sent to broker via.
func (r *KafkaClusterReconciler) alterCordons(ctx context.Context, kc *strata.KafkaCluster, via int32, brokers []int32, set bool) error {
	cl, err := r.Admin.Client(kc)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, id := range brokers {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType = kmsg.ConfigResourceTypeBroker
		res.ResourceName = strconv.Itoa(int(id))
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = meta.ConfigCordonedLogDirs
		if set {
			c.Op = kmsg.IncrementalAlterConfigOpSet
			c.Value = kmsg.StringPtr("*")
		} else {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
	}
	ctx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl.Broker(int(via)))
	if err != nil {
		return fmt.Errorf("incremental alter configs through broker %d: %w", via, err)
	}
	for _, res := range resp.Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			return fmt.Errorf("broker %s: %w (%s)", res.ResourceName, err, ptrOr(res.ErrorMessage))
		}
	}
	return nil
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
