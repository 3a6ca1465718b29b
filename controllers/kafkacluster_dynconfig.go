package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker"
)

// Dynamic spec.config keys (issue #27; docs/operator.md "Configuration").
// The broker defaults of topic configs are dynamic broker configs
// (broker.DynamicTopicDefaults): the operator does not write them into
// the brokers' config file, where a change would roll every broker, but
// sets them cluster-wide through the admin API, and the brokers apply
// them at once. status.dynamicConfig says which keys went that way.

// EventDynamicConfigApplied and EventDynamicConfigRefused are the events of
// a change of the dynamic keys.
const (
	EventDynamicConfigApplied = "DynamicConfigApplied"
	EventDynamicConfigRefused = "DynamicConfigRefused"
)

var dynamicKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range broker.DynamicTopicDefaults() {
		m[k] = true
	}
	return m
}()

// IsDynamicConfigKey reports whether a spec.config key is applied as a
// dynamic broker config rather than through the config file.
func IsDynamicConfigKey(key string) bool { return dynamicKeys[key] }

// dynamicSpecConfig returns the dynamic keys of spec.config.
func dynamicSpecConfig(kc *strata.KafkaCluster) map[string]string {
	out := map[string]string{}
	for k, v := range kc.Spec.Config {
		if dynamicKeys[k] {
			out[k] = v
		}
	}
	return out
}

// dynamicConfigOps plans the IncrementalAlterConfigs operations that take
// the cluster-wide dynamic configs (current: their DYNAMIC_DEFAULT values)
// to want: SET of what differs, DELETE of keys the operator applied before
// (applied) that left the spec. Keys set by someone else, never in the
// spec, are left alone.
func dynamicConfigOps(want, current map[string]string, applied []string) []kadm.AlterConfig {
	var ops []kadm.AlterConfig
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := current[k]; !ok || v != want[k] {
			ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(want[k])})
		}
	}
	for _, k := range slices.Sorted(slices.Values(applied)) {
		if _, still := want[k]; still {
			continue
		}
		if _, set := current[k]; set {
			ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
	}
	return ops
}

// reconcileDynamicConfig applies the dynamic keys of spec.config to the
// cluster-wide broker resource. A broker that refuses a value (INVALID_CONFIG)
// is reported in status and a Warning event; nothing stops the other steps.
func (r *KafkaClusterReconciler) reconcileDynamicConfig(ctx context.Context, s *clusterScope) error {
	kc := s.cluster
	want := dynamicSpecConfig(kc)
	st := kc.Status.DynamicConfig
	if len(want) == 0 && (st == nil || len(st.Applied) == 0) {
		kc.Status.DynamicConfig = nil
		return nil
	}
	next := &strata.DynamicConfigStatus{}
	if st != nil {
		next.Applied = slices.Clone(st.Applied)
		next.LastUpdateTime = st.LastUpdateTime
	}
	kc.Status.DynamicConfig = next
	pendingAll := func(msg string) {
		next.Pending = slices.Sorted(maps.Keys(want))
		next.Message = msg
	}
	adm, err := r.Admin.Admin(kc)
	if err != nil {
		pendingAll("the brokers are not reachable: " + err.Error())
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, AdminCallTimeout)
	defer cancel()
	rcs, err := adm.DescribeBrokerConfigs(actx) // no ID: the cluster-wide resource
	if err == nil {
		_, err = rcs.On("", nil)
	}
	if err != nil {
		pendingAll("cannot read the cluster-wide broker configs: " + err.Error())
		return nil
	}
	current := map[string]string{}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig && dynamicKeys[c.Key] {
				current[c.Key] = c.MaybeValue()
			}
		}
	}
	ops := dynamicConfigOps(want, current, next.Applied)
	if len(ops) == 0 {
		next.Applied = slices.Sorted(maps.Keys(want))
		return nil
	}
	// One key at a time: a refused value leaves the others applied.
	var refused []string
	var changed []string
	for _, op := range ops {
		res, err := adm.AlterBrokerConfigs(actx, []kadm.AlterConfig{op})
		if err == nil {
			for _, rr := range res {
				if rr.Err != nil {
					err = fmt.Errorf("%w: %s", rr.Err, rr.ErrMessage)
				}
			}
		}
		if err != nil {
			what := op.Name
			if op.Value != nil {
				what += "=" + *op.Value
			}
			refused = append(refused, fmt.Sprintf("%s: %v", what, err))
			next.Pending = append(next.Pending, op.Name)
			continue
		}
		if op.Op == kadm.DeleteConfig {
			changed = append(changed, "-"+op.Name)
		} else {
			changed = append(changed, op.Name+"="+*op.Value)
		}
	}
	applied := map[string]bool{}
	for k := range want {
		if !slices.Contains(next.Pending, k) {
			applied[k] = true
		}
	}
	for _, k := range next.Applied {
		if _, inSpec := want[k]; !inSpec && slices.Contains(next.Pending, k) {
			applied[k] = true // a DELETE that failed: still ours to delete
		}
	}
	next.Applied = slices.Sorted(maps.Keys(applied))
	slices.Sort(next.Pending)
	if len(changed) > 0 {
		now := metav1.Now()
		next.LastUpdateTime = &now
		r.Recorder.Eventf(kc, nil, corev1.EventTypeNormal, EventDynamicConfigApplied, "Configure",
			"dynamic broker configs applied cluster-wide without a restart: %s", strings.Join(changed, ", "))
		log.FromContext(ctx).Info("dynamic broker configs applied", "changes", changed)
	}
	if len(refused) > 0 {
		next.Message = "refused by the brokers: " + strings.Join(refused, "; ")
		if st == nil || st.Message != next.Message {
			r.Recorder.Eventf(kc, nil, corev1.EventTypeWarning, EventDynamicConfigRefused, "Configure", "%s", next.Message)
		}
	}
	return nil
}
