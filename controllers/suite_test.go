package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/childproc"
)

// The suite runs the operator's controllers in-process against a real
// kube-apiserver and etcd (built by `make envtest` into bin/k8s). There is
// no StatefulSet controller, scheduler or garbage collector, so pods never
// appear: the specs check the objects the operator writes and its status.
// Specs that need Kafka behind a KafkaCluster start broker processes on
// the loopback (startLoopbackBrokers), which the operator reaches through
// the suite's BrokerEndpoints.

var (
	k8sClient client.Client
	testEnv   *envtest.Environment
	suiteCtx  context.Context
	cancel    context.CancelFunc
	// sweepClock is the WAL sweeper's clock. It stands still unless a
	// spec moves it, so WAL objects age only when a spec says so.
	sweepClock *clocktesting.FakePassiveClock
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	var shard *envtestShard
	switch {
	case os.Getenv(envtestShardEnv) == "2":
		suiteConfig.FocusFiles = append(suiteConfig.FocusFiles, shard2Files)
	case os.Getenv(envtestShardsEnv) == "2" && len(suiteConfig.FocusFiles) == 0:
		var err error
		if shard, err = startEnvtestShard(); err != nil {
			t.Fatal(err)
		}
		suiteConfig.SkipFiles = append(suiteConfig.SkipFiles, shard2Files)
	}
	RunSpecs(t, "Controllers Suite", suiteConfig, reporterConfig)
	// The last lines of a failed run name each failed spec with its
	// message, below everything the specs logged.
	for _, line := range failureSummary(suiteReport) {
		t.Log(line)
	}
	if shard != nil {
		shard.wait(t)
	}
}

// make test runs the suite as two processes (STRATA_ENVTEST_SHARDS=2,
// hack/test.sh): the specs wait on brokers' timers and the operator's
// requeues far more than they compute, and in one process they were the
// run's critical path (9 minutes of a 12-minute make test, the other
// packages long done). The second process is this test binary again,
// with STRATA_ENVTEST_SHARD=2: its own kube-apiserver, etcd and operator,
// and the specs of shard2Files (the files of the moves, rolls, drains and
// TLS users: 16 specs, about half of the suite's time — alone on a quiet
// machine the two halves took 237 s and 295 s before the TLS users moved
// over, against 481 s in one process); this one runs the rest, new files
// included. Files split whole, so Ordered containers stay in one process.
const (
	envtestShardsEnv = "STRATA_ENVTEST_SHARDS"
	envtestShardEnv  = "STRATA_ENVTEST_SHARD"
)

// shard2Files is a Ginkgo file filter (a regexp over the spec's file path).
const shard2Files = `/(roll|kafkarebalance|scaling|scaling_bytes|eviction|throttle|imbalance|cordon|security)_envtest_test\.go$`

// envtestShard is the second process of a sharded run.
type envtestShard struct {
	cmd  *exec.Cmd
	done <-chan struct{}
	out  *os.File
}

// startEnvtestShard starts this test binary as shard 2, with the Ginkgo
// flags and timeout this process got. Its output goes to a file, printed
// whole if it fails (the failing specs' reports, with the operator's
// log, are in it); its Ginkgo JSON report goes beside this one's.
func startEnvtestShard() (*envtestShard, error) {
	args := []string{"-test.run=^TestControllers$", "-test.v"}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-ginkgo.") || strings.HasPrefix(a, "--ginkgo.") || strings.HasPrefix(a, "-test.timeout") {
			args = append(args, a)
		}
	}
	out, err := os.CreateTemp("", "strata-envtest-shard2-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), envtestShardEnv+"=2")
	if report := os.Getenv("STRATA_GINKGO_REPORT"); report != "" {
		cmd.Env = append(cmd.Env, "STRATA_GINKGO_REPORT="+shardReport(report))
	}
	// SIGTERM, not SIGKILL: Ginkgo's interrupt handler then runs the
	// shard's AfterSuite, which stops its kube-apiserver and etcd.
	done, err := childproc.Start(cmd, syscall.SIGTERM)
	if err != nil {
		out.Close()
		os.Remove(out.Name())
		return nil, fmt.Errorf("start envtest shard 2: %w", err)
	}
	return &envtestShard{cmd: cmd, done: done, out: out}, nil
}

// shardReport is where shard 2 writes its Ginkgo JSON report: ginkgo.json
// becomes ginkgo-2.json.
func shardReport(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-2" + ext
}

// wait waits for shard 2 and fails t if it failed, printing its output.
func (s *envtestShard) wait(t *testing.T) {
	<-s.done
	defer os.Remove(s.out.Name())
	defer s.out.Close()
	if s.cmd.ProcessState.Success() {
		t.Logf("envtest shard 2 (%s): passed", shard2Files)
		return
	}
	if _, err := s.out.Seek(0, io.SeekStart); err == nil {
		fmt.Printf("=== envtest shard 2 (%s), whole output:\n", shard2Files)
		_, _ = io.Copy(os.Stdout, s.out)
		fmt.Printf("=== end of envtest shard 2\n")
	}
	t.Errorf("envtest shard 2 (%s) failed: %s; its output is above, its failed specs last in it", shard2Files, s.cmd.ProcessState)
}

// suiteReport is the suite's report, for failureSummary.
var suiteReport Report

var _ = ReportAfterSuite("failure summary", func(r Report) { suiteReport = r })

// failureSummary is one block per failed spec: its full name, where it
// failed and the failure's message (at most summaryLines lines; the
// spec's whole report, with the operator's log, is in the output above).
func failureSummary(r Report) []string {
	failed := r.SpecReports.WithState(types.SpecStateFailureStates)
	if len(failed) == 0 {
		return nil
	}
	ran := 0
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType.Is(types.NodeTypeIt) && !sr.State.Is(types.SpecStateSkipped|types.SpecStatePending) {
			ran++
		}
	}
	out := []string{fmt.Sprintf("%d failed, of %d specs that ran (each one's report above holds the operator's log while it ran; STRATA_TEST_LOG_LEVEL=debug for more):",
		len(failed), ran)}
	for _, sr := range failed {
		name := sr.FullText()
		if name == "" {
			name = "[" + sr.LeafNodeType.String() + "]"
		}
		out = append(out, fmt.Sprintf("[%s] %s", strings.ToUpper(sr.State.String()), name),
			"    at "+sr.Failure.Location.String())
		msg := strings.Split(strings.TrimSpace(sr.Failure.Message), "\n")
		if len(msg) > summaryLines {
			msg = append(msg[:summaryLines], fmt.Sprintf("... (%d more lines in the spec's report above)", len(msg)-summaryLines))
		}
		for _, l := range msg {
			out = append(out, "    "+l)
		}
	}
	return out
}

// summaryLines bounds a failure message in failureSummary.
const summaryLines = 20

// suiteLogger is the operator's logger in the suite: console lines at
// info level into GinkgoWriter, which Ginkgo prints only for a spec that
// fails (in that spec's timeline), so a failed run shows the failing
// specs and their messages, not pages of passing reconciles. With
// STRATA_TEST_LOG_LEVEL set the level is that one instead: a zap level
// name (debug, info, error) or a logr verbosity N (V(N) and below).
func suiteLogger(w io.Writer) (logr.Logger, error) {
	level := zapcore.InfoLevel
	if v := os.Getenv("STRATA_TEST_LOG_LEVEL"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			level = zapcore.Level(-n)
		} else if level, err = zapcore.ParseLevel(v); err != nil {
			return logr.Logger{}, fmt.Errorf("STRATA_TEST_LOG_LEVEL=%q: %w", v, err)
		}
	}
	return zap.New(zap.WriteTo(w), zap.ConsoleEncoder(), zap.Level(level),
		// Reconcile errors are routine in specs (a cluster not there yet,
		// a broker being killed); their stack traces are noise.
		zap.StacktraceLevel(zapcore.PanicLevel)), nil
}

var _ = BeforeSuite(func() {
	logger, err := suiteLogger(GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	ctrl.SetLogger(logger)
	isolateAWSEnv(GinkgoT())
	testEnv, err = newTestEnv()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	var mgr ctrl.Manager
	k8sClient, mgr, err = newTestManager(cfg)
	Expect(err).NotTo(HaveOccurred())
	sweepClock = clocktesting.NewFakePassiveClock(time.Now())
	Expect(controllers.SetupWithManager(mgr, controllers.WithSweepClock(sweepClock), controllers.WithBrokerEndpoints(loopback),
		// KafkaTopic drift is found by the periodic resync, a killed broker
		// by the periodic Kafka probe; a minute is too long for a spec.
		controllers.WithTopicResync(2*time.Second), controllers.WithUserResync(2*time.Second), controllers.WithKafkaProbeInterval(2*time.Second),
		// A roll that cannot go on is reported stuck after 10 minutes.
		controllers.WithRollStuckAfter(15*time.Second),
		// The S3 server of the suite is Versity on plain http, and specs
		// create FastBuckets without credentials (ambient); the refusals
		// themselves are TestBucketPolicy's and, with a cluster using a refused
		// bucket, TestRefusedFastBucketIsNotRendered's.
		controllers.WithBucketPolicy(controllers.BucketPolicy{AllowAmbientCredentials: true, AllowInsecureEndpoints: true}))).To(Succeed())

	suiteCtx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// isolateAWSEnv keeps tests on the loopback: a FastBucket with ambient
// credentials must not make the AWS SDK query an instance metadata
// service, and no shared AWS config of the machine may leak in.
func isolateAWSEnv(t interface{ Setenv(key, value string) }) {
	for k, v := range map[string]string{
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	} {
		t.Setenv(k, v)
	}
}

// newTestEnv is a kube-apiserver and etcd from KUBEBUILDER_ASSETS with
// the operator's CRDs, not started yet: the suite's, and that of a test
// which needs an operator of its own.
func newTestEnv() (*envtest.Environment, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make test` (or `make envtest`) to build kube-apiserver and etcd")
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("%s missing in KUBEBUILDER_ASSETS=%s: run `make test` (or `make envtest`): %w", bin, assets, err)
		}
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// `make test` runs every package at once; give a loaded machine time.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}, nil
}

// newTestManager is a client and a manager of the operator's scheme and
// cache on cfg, with neither metrics nor probes listening. Controller
// names need not be unique: a test may run an operator of its own in the
// suite's process.
func newTestManager(cfg *rest.Config) (client.Client, ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := strata.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  controllers.CacheOptions(),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	return c, mgr, err
}
