package cmd

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
)

// operatorOptions are the flags of `strata operator`.
type operatorOptions struct {
	metricsAddr      string
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	watchNamespace   string
	watchNamespaces  []string
	operatorNS       string
	bucketPolicy     controllers.BucketPolicy
	zap              zap.Options
}

func newOperatorCmd() *cobra.Command {
	o := &operatorOptions{zap: zap.Options{Development: false}}
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the Strata Kubernetes operator (KafkaCluster, FastBucket controllers)",
		Long: `Run the Strata operator against the cluster of the current kubeconfig (or the
in-cluster service account). It lays out each KafkaCluster zone by zone, one
StatefulSet per zone bound to that zone's FastBucket, and probes FastBuckets
through the S3 API.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOperator(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the Prometheus metrics endpoint binds to; 0 disables it")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz endpoints bind to")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so that only one operator replica is active")
	f.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	f.StringVar(&o.watchNamespace, "namespace", "", "watch only this namespace (default: all namespaces; see --watch-namespaces)")
	f.StringSliceVar(&o.watchNamespaces, "watch-namespaces", nil,
		"watch only these namespaces, comma separated (default: all): the operator lists, watches and reads objects, Secrets included, there only")
	f.StringVar(&o.operatorNS, "operator-namespace", "",
		"the namespace of the operator's pods, the only one the clusters' NetworkPolicies admit them from (default: $POD_NAMESPACE, else the service account's namespace, else "+controllers.DefaultOperatorNamespace+")")
	f.BoolVar(&o.bucketPolicy.AllowAmbientCredentials, "allow-ambient-credentials", false,
		"let FastBuckets use ambient credentials (credentials.source Ambient): the operator then probes and sweeps them with its own cloud identity, on any bucket a namespace names")
	f.BoolVar(&o.bucketPolicy.AllowInsecureEndpoints, "allow-insecure-endpoints", false,
		"let FastBuckets use http:// endpoints (credentials sent in the clear; for test stores)")
	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.zap.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	return cmd
}

func runOperator(cmd *cobra.Command, o *operatorOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	logger := ctrl.Log.WithName("operator")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(strata.AddToScheme(scheme))

	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "operator.kafka.strata.dev",
		LeaderElectionNamespace: o.leaderElectionNS,
	}
	watched := o.watched()
	opts.Cache = controllers.CacheOptionsFor(watched)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	operatorNS := operatorNamespace(o.operatorNS)
	if err := controllers.SetupWithManager(mgr, controllers.WithBucketPolicy(o.bucketPolicy), controllers.WithOperatorNamespace(operatorNS),
		controllers.WithWatchNamespaces(watched)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("ready check: %w", err)
	}
	logger.Info("starting operator", "metrics", o.metricsAddr, "probes", o.probeAddr, "leaderElect", o.leaderElect, "watchNamespaces", watched, "operatorNamespace", operatorNS)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// serviceAccountNamespaceFile holds the pod's namespace in a pod with a
// service account token.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorNamespace is flag, else $POD_NAMESPACE (config/manager sets it
// from the downward API), else the service account's namespace, else
// controllers.DefaultOperatorNamespace.
func operatorNamespace(flag string) string {
	if flag != "" {
		return flag
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return controllers.DefaultOperatorNamespace
}

// watched is --watch-namespaces with --namespace, blanks and duplicates
// dropped; nil: every namespace.
func (o *operatorOptions) watched() []string {
	var out []string
	for _, ns := range append(slices.Clone(o.watchNamespaces), o.watchNamespace) {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}
