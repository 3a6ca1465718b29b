package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Quota keys the operator manages for a KafkaUser (spec.quotas): Kafka's
// names, the ones Strata's brokers enforce.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
)

// managedQuotaKeys are the keys of a user's quota entity the operator
// owns: keys missing from spec.quotas are removed; others set with other
// tools are left.
var managedQuotaKeys = []string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate}

const (
	// ReasonQuotasNotSupported: the brokers do not serve the client
	// quota APIs; the user's credential and ACLs are set, its quotas not.
	ReasonQuotasNotSupported = "QuotasNotSupported"
	// ReasonQuotasRefused: the brokers refused spec.quotas.
	ReasonQuotasRefused = "QuotasRefused"
	// EventQuotasChanged: the user's quotas were set or removed.
	EventQuotasChanged = "QuotasChanged"
)

// QuotaUser is the user name client quotas match for a KafkaUser: its
// principal's name without "User:" (<name>, or CN=<name> for tls users).
func QuotaUser(ku *strata.KafkaUser) string {
	return strings.TrimPrefix(UserPrincipal(ku), "User:")
}

// DesiredQuotas is spec.quotas as quota keys and values.
func DesiredQuotas(ku *strata.KafkaUser) map[string]float64 {
	out := map[string]float64{}
	if q := ku.Spec.Quotas; q != nil {
		if q.ProducerByteRate != nil {
			out[QuotaProducerByteRate] = float64(*q.ProducerByteRate)
		}
		if q.ConsumerByteRate != nil {
			out[QuotaConsumerByteRate] = float64(*q.ConsumerByteRate)
		}
		if q.RequestPercentage != nil {
			out[QuotaRequestPercentage] = float64(*q.RequestPercentage)
		}
		if q.ControllerMutationRate != nil {
			out[QuotaControllerMutationRate] = float64(*q.ControllerMutationRate)
		}
	}
	return out
}

// PlanQuotas returns the changes that make current's managed keys
// desired: values to set and managed keys to remove.
func PlanQuotas(desired, current map[string]float64) (set map[string]float64, remove []string) {
	set = map[string]float64{}
	for _, k := range managedQuotaKeys {
		want, ok := desired[k]
		have, had := current[k]
		switch {
		case ok && (!had || have != want):
			set[k] = want
		case !ok && had:
			remove = append(remove, k)
		}
	}
	return set, remove
}

// userQuotas are the values of the quota entity user=name alone.
func userQuotas(ctx context.Context, adm *kadm.Client, name string) (map[string]float64, error) {
	res, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &name}})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, e := range res {
		for _, v := range e.Values {
			out[v.Key] = v.Value
		}
	}
	return out, nil
}

// errQuotasNotSupported: a broker does not serve the client quota APIs
// (brokers of releases before them).
var errQuotasNotSupported = errors.New("client quotas not supported")

// quotaAPIsServed says whether every broker serves the client quota APIs.
func quotaAPIsServed(ctx context.Context, adm *kadm.Client) error {
	return apisServed(ctx, adm, []kmsg.Key{kmsg.DescribeClientQuotas, kmsg.AlterClientQuotas}, errQuotasNotSupported)
}

// alterUserQuotas applies set and remove to the user entity name.
func alterUserQuotas(ctx context.Context, adm *kadm.Client, name string, set map[string]float64, remove []string) error {
	entry := kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &name}}}
	for k, v := range set {
		entry.Ops = append(entry.Ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
	}
	for _, k := range remove {
		entry.Ops = append(entry.Ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if len(entry.Ops) == 0 {
		return nil
	}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{entry})
	if err != nil {
		return err
	}
	for _, r := range res {
		if err := withMessage(r.Err, r.ErrMessage); err != nil {
			return err
		}
	}
	return nil
}

// reconcileQuotas makes the user's managed quota keys spec.quotas. Brokers
// that do not serve the quota APIs leave a user without quotas Ready and
// one with quotas QuotasNotSupported.
func (r *KafkaUserReconciler) reconcileQuotas(ctx context.Context, s *userScope) error {
	ku := s.user
	name := QuotaUser(ku)
	desired := DesiredQuotas(ku)
	if err := quotaAPIsServed(ctx, s.adm); err != nil {
		if !errors.Is(err, errQuotasNotSupported) {
			return err
		}
		if len(desired) == 0 {
			return nil
		}
		return &topicStop{reason: ReasonQuotasNotSupported,
			message: fmt.Sprintf("the brokers of KafkaCluster %s cannot hold client quotas (%v): user %s is set without its quotas", s.cluster.Name, err, ku.Name)}
	}
	current, err := userQuotas(ctx, s.adm, name)
	if err != nil {
		return fmt.Errorf("describe quotas of user %s: %w", name, err)
	}
	set, remove := PlanQuotas(desired, current)
	if err := alterUserQuotas(ctx, s.adm, name, set, remove); err != nil {
		if errors.Is(err, kerr.InvalidRequest) || errors.Is(err, kerr.InvalidConfig) {
			return &topicStop{reason: ReasonQuotasRefused, message: fmt.Sprintf("the brokers refused the quotas of user %s: %v", name, err)}
		}
		return fmt.Errorf("alter quotas of user %s: %w", name, err)
	}
	if len(set)+len(remove) > 0 {
		var done []string
		for k, v := range set {
			done = append(done, k+"="+strconv.FormatFloat(v, 'f', -1, 64))
		}
		for _, k := range remove {
			done = append(done, "-"+k)
		}
		sort.Strings(done)
		r.Recorder.Eventf(ku, nil, corev1.EventTypeNormal, EventQuotasChanged, "Update",
			"quotas of user %s: %s", name, strings.Join(done, ", "))
	}
	return nil
}

// deleteUserQuotas removes the managed quota keys of the user entity
// (part of removing the user from the brokers).
func deleteUserQuotas(ctx context.Context, adm *kadm.Client, ku *strata.KafkaUser) error {
	name := QuotaUser(ku)
	if err := quotaAPIsServed(ctx, adm); err != nil {
		if errors.Is(err, errQuotasNotSupported) {
			return nil
		}
		return err
	}
	current, err := userQuotas(ctx, adm, name)
	if err != nil {
		return fmt.Errorf("describe quotas of user %s: %w", name, err)
	}
	_, remove := PlanQuotas(nil, current)
	return alterUserQuotas(ctx, adm, name, nil, remove)
}
