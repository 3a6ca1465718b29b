package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// SetupWithManager registers every Strata reconciler with a manager.
// `strata operator` and the envtest suite both use it, so the suite tests
// the wiring that ships.
func SetupWithManager(mgr ctrl.Manager, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.endpoints == nil {
		o.endpoints = ServiceEndpoints{Secrets: mgr.GetClient()}
	}
	// The uncached reader reads Secrets users name: only in the watched
	// namespaces, whatever the operator's RBAC allows.
	live := NamespacedReader(mgr.GetAPIReader(), o.watchNamespaces)
	admin := NewAdminPool(o.endpoints)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		admin.Close()
		return nil
	})); err != nil {
		return fmt.Errorf("admin client pool: %w", err)
	}
	if err := (&KafkaClusterReconciler{
		Client:     mgr.GetClient(),
		LiveReader: live,
		Recorder:   mgr.GetEventRecorder("strata-kafkacluster"),
		Admin:      admin,

		KafkaProbeInterval: o.kafkaProbeInterval,
		RollStuckAfter:     o.rollStuckAfter,
		OperatorNamespace:  o.operatorNamespace,
		BucketPolicy:       o.bucketPolicy,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("KafkaCluster controller: %w", err)
	}
	if err := (&KafkaTopicReconciler{
		Client:     mgr.GetClient(),
		LiveReader: live,
		Recorder:   mgr.GetEventRecorder("strata-kafkatopic"),
		Admin:      admin,
		Resync:     o.topicResync,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("KafkaTopic controller: %w", err)
	}
	if err := (&KafkaUserReconciler{
		Client:       mgr.GetClient(),
		SecretReader: live,
		Recorder:     mgr.GetEventRecorder("strata-kafkauser"),
		Admin:        admin,
		Resync:       o.userResync,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("KafkaUser controller: %w", err)
	}
	if err := (&KafkaRebalanceReconciler{
		Client:     mgr.GetClient(),
		LiveReader: live,
		Recorder:   mgr.GetEventRecorder("strata-kafkarebalance"),
		Admin:      admin,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("KafkaRebalance controller: %w", err)
	}
	if err := (&FastBucketReconciler{
		Client:       mgr.GetClient(),
		SecretReader: live,
		LiveReader:   live,
		Recorder:     mgr.GetEventRecorder("strata-fastbucket"),
		Clock:        o.sweepClock,
		Policy:       o.bucketPolicy,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("FastBucket controller: %w", err)
	}
	return nil
}

// Option changes how SetupWithManager builds the reconcilers.
type Option func(*options)

type options struct {
	sweepClock         clock.PassiveClock
	endpoints          BrokerEndpoints
	topicResync        time.Duration
	userResync         time.Duration
	kafkaProbeInterval time.Duration
	rollStuckAfter     time.Duration
	bucketPolicy       BucketPolicy
	operatorNamespace  string
	watchNamespaces    []string
}

// WithWatchNamespaces limits the operator to these namespaces (none: all):
// its uncached reads (Secrets a spec names, live state) refuse any other
// namespace. The manager's cache must be limited to them too
// (CacheOptionsFor), so that no object of another namespace is
// reconciled.
func WithWatchNamespaces(namespaces []string) Option {
	return func(o *options) { o.watchNamespaces = namespaces }
}

// WithOperatorNamespace says which namespace the operator's pods run in
// (default DefaultOperatorNamespace): the clusters' NetworkPolicies
// admit pods with the operator's labels from that namespace only.
func WithOperatorNamespace(ns string) Option {
	return func(o *options) { o.operatorNamespace = ns }
}

// WithBucketPolicy sets what FastBuckets may use (default: neither ambient
// credentials nor http endpoints; see BucketPolicy).
func WithBucketPolicy(p BucketPolicy) Option {
	return func(o *options) { o.bucketPolicy = p }
}

// WithRollStuckAfter sets how long a rolling restart may wait for its next
// restart before it is reported Stalled with reason RollStuck (default
// DefaultRollStuckAfter). Envtest suites shorten it.
func WithRollStuckAfter(d time.Duration) Option {
	return func(o *options) { o.rollStuckAfter = d }
}

// WithTopicResync sets how often KafkaTopics are compared with their Kafka
// topics when nothing in Kubernetes changes (default DefaultTopicResync).
// Envtest suites shorten it to see drift reverted without waiting a minute.
func WithTopicResync(d time.Duration) Option {
	return func(o *options) { o.topicResync = d }
}

// WithUserResync sets how often KafkaUsers are compared with the brokers
// when nothing in Kubernetes changes (default DefaultUserResync). Envtest
// suites shorten it.
func WithUserResync(d time.Duration) Option {
	return func(o *options) { o.userResync = d }
}

// WithKafkaProbeInterval sets how often a settled cluster's Kafka health
// is read (default DefaultKafkaProbeInterval). Envtest suites shorten it
// so that a killed broker shows in status within a spec's patience.
func WithKafkaProbeInterval(d time.Duration) Option {
	return func(o *options) { o.kafkaProbeInterval = d }
}

// WithBrokerEndpoints says how the operator reaches brokers (default:
// ServiceEndpoints, the Services it renders). Envtest suites point it at
// broker processes on the loopback.
func WithBrokerEndpoints(e BrokerEndpoints) Option {
	return func(o *options) { o.endpoints = e }
}

// WithSweepClock gives the WAL sweeper a clock other than the real one
// (tests age WAL objects by moving it).
func WithSweepClock(c clock.PassiveClock) Option {
	return func(o *options) { o.sweepClock = c }
}

// CacheOptions restricts the manager's cache to the objects the operator
// writes (all labelled app.kubernetes.io/managed-by=strata-operator), so
// it does not hold every Pod, ConfigMap and Service of the cluster in
// memory; the same holds for Secrets (KafkaUser Secrets are the
// operator's; Secrets users name are read with an uncached reader). An
// unlabelled object with a name the operator wants is then
// invisible to it and its create fails with AlreadyExists, which is
// reported rather than taken over.
// CacheOptionsFor is CacheOptions limited to namespaces (none: all
// namespaces): the operator then lists, watches and reads objects, Secrets
// included, of those namespaces only.
func CacheOptionsFor(namespaces []string) cache.Options {
	opts := CacheOptions()
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// NamespacedReader is r refusing reads of namespaced objects outside
// namespaces (none: r itself). Cluster-scoped objects (an empty
// namespace) pass.
func NamespacedReader(r client.Reader, namespaces []string) client.Reader {
	if len(namespaces) == 0 {
		return r
	}
	return namespacedReader{r: r, allowed: sets.New(namespaces...)}
}

type namespacedReader struct {
	r       client.Reader
	allowed sets.Set[string]
}

// ErrNamespaceNotWatched is a read refused by NamespacedReader.
var ErrNamespaceNotWatched = errors.New("namespace not watched by this operator (--watch-namespaces)")

func (n namespacedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Namespace != "" && !n.allowed.Has(key.Namespace) {
		return fmt.Errorf("read %s/%s: %w", key.Namespace, key.Name, ErrNamespaceNotWatched)
	}
	return n.r.Get(ctx, key, obj, opts...)
}

func (n namespacedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if !n.allowed.Has(lo.Namespace) {
		// An empty namespace lists every namespace: refused too.
		return fmt.Errorf("list in namespace %q: %w", lo.Namespace, ErrNamespaceNotWatched)
	}
	return n.r.List(ctx, list, opts...)
}

func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})
	byObject := map[client.Object]cache.ByObject{}
	for _, obj := range []client.Object{
		&corev1.Pod{}, &corev1.ConfigMap{}, &corev1.Service{}, &appsv1.StatefulSet{}, &policyv1.PodDisruptionBudget{},
		&corev1.Secret{}, &networkingv1.NetworkPolicy{},
	} {
		byObject[obj] = cache.ByObject{Label: managed}
	}
	return cache.Options{ByObject: byObject}
}
