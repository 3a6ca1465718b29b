//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/verify"
)

// The e2e cluster's fixed addresses (hack/e2e/lib.sh): the bridge address
// is the host as pods see it, and where CoreDNS and Versity listen.
const (
	hostIP      = "10.244.0.1"
	dnsAddr     = hostIP + ":53"
	s3Endpoint  = "http://" + hostIP + ":17070"
	s3AccessKey = "strata-e2e"
	s3SecretKey = "strata-e2e-secret"

	namespace   = "strata-journey"
	clusterName = "journey"
	topic       = "journey"
	operatorNS  = "strata-system"
	operatorDep = "strata-operator"
	bucketOf    = "strata-e2e-" // + zone
	metricsPort = 9644
	verifyPort  = 8080
)

// harness is what the journey drives the cluster with, all from the host.
type harness struct {
	root    string // repository
	dir     string // E2E_DIR (bin/e2e)
	kubecfg string
	kubectl string

	kube  client.Client
	kcl   *kgo.Client
	admin *kadm.Client
	s3    *s3.Client
	http  *http.Client
}

func newHarness() (*harness, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	h := &harness{root: root, dir: os.Getenv("E2E_DIR")}
	if h.dir == "" {
		h.dir = filepath.Join(root, "bin", "e2e")
	}
	h.kubecfg = filepath.Join(h.dir, "kubeconfig")
	if _, err := os.Stat(h.kubecfg); err != nil {
		return nil, fmt.Errorf("no e2e cluster (run `make e2e-up`): %w", err)
	}
	h.kubectl = os.Getenv("E2E_KUBECTL")
	if h.kubectl == "" {
		h.kubectl = "kubectl"
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", h.kubecfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := strata.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if h.kube, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	// Brokers advertise <pod>.<cluster>-brokers.<ns>.svc, names only the
	// cluster's DNS knows: resolve through CoreDNS on the bridge. The
	// cluster keeps the operator's secure defaults (SASL_SSL on 9092, ACLs
	// on): the journey logs in as the KafkaUser journey-admin, a super
	// user of hack/e2e/journey/cluster.yaml, with the cluster CA. Both are
	// read from their Secrets at each dial and login: they exist only once
	// the cluster step has applied the cluster.
	h.kcl, err = kgo.NewClient(
		kgo.SeedBrokers(fmt.Sprintf("%s.%s.svc:9092", controllers.BootstrapServiceName(clusterName), namespace)),
		kgo.Dialer(h.tlsClusterDial),
		kgo.SASL(scram.Sha512(h.adminLogin)),
		kgo.RequestTimeoutOverhead(5*time.Second),
		kgo.RetryTimeout(5*time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	h.admin = kadm.NewClient(h.kcl)
	h.s3 = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s3Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3AccessKey, s3SecretKey, ""),
	})
	h.http = &http.Client{Timeout: 10 * time.Second}
	return h, nil
}

func (h *harness) close() { h.kcl.Close() }

var clusterResolver = &net.Resolver{
	PreferGo: true,
	Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", dnsAddr)
	},
}

// clusterDial dials HOST:PORT resolving HOST with the cluster's DNS (a
// name ending in .svc gets the cluster domain: the host has no search
// list).
func clusterDial(ctx context.Context, network, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) == nil {
		if strings.HasSuffix(host, ".svc") {
			host += ".cluster.local"
		}
		addrs, err := clusterResolver.LookupHost(ctx, host)
		if err != nil {
			return nil, err
		}
		host = addrs[0]
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	return d.DialContext(ctx, network, net.JoinHostPort(host, port))
}

// journeyAdmin is the KafkaUser (a super user) the journey's own client
// logs in as.
const journeyAdmin = "journey-admin"

// secretKey reads one key of a Secret of the journey's namespace.
func (h *harness) secretKey(ctx context.Context, name, key string) ([]byte, error) {
	var sec corev1.Secret
	if err := h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sec); err != nil {
		return nil, fmt.Errorf("Secret %s: %w", name, err)
	}
	v, ok := sec.Data[key]
	if !ok {
		return nil, fmt.Errorf("Secret %s has no key %s", name, key)
	}
	return v, nil
}

// tlsClusterDial is clusterDial with TLS, trusting the cluster CA for the
// broker's name as a client does: ca.crt of the public Secret
// <cluster>-cluster-ca-cert, not the CA's own Secret (it holds the key).
func (h *harness) tlsClusterDial(ctx context.Context, network, hostport string) (net.Conn, error) {
	caPEM, err := h.secretKey(ctx, controllers.ClusterCACertSecretName(clusterName), controllers.CACertKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cluster CA: no PEM certificate")
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, err
	}
	conn, err := clusterDial(ctx, network, hostport)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: host})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// adminLogin is journey-admin's SCRAM login from its KafkaUser Secret.
func (h *harness) adminLogin(ctx context.Context) (scram.Auth, error) {
	pw, err := h.secretKey(ctx, journeyAdmin, controllers.UserSecretPassword)
	if err != nil {
		return scram.Auth{}, err
	}
	return scram.Auth{User: journeyAdmin, Pass: string(pw)}, nil
}

// run runs kubectl with the e2e kubeconfig and returns its stdout.
func (h *harness) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.kubectl, append([]string{"--kubeconfig", h.kubecfg}, args...)...)
	cmd.Dir = h.root
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// runCmd runs a program and returns its combined output.
func runCmd(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// poll calls cond every interval until it returns true, an error, or the
// timeout passes; the last "not yet" reason is in the timeout error.
func poll(ctx context.Context, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		ok, why, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		if why != "" {
			last = why
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not after %s: %s", what, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// brokerPods lists the KafkaCluster's broker pods by name.
func (h *harness) brokerPods(ctx context.Context) (map[string]*corev1.Pod, error) {
	var pods corev1.PodList
	if err := h.kube.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingLabels{controllers.LabelCluster: clusterName, controllers.LabelComponent: controllers.ComponentBroker}); err != nil {
		return nil, fmt.Errorf("list broker pods: %w", err)
	}
	out := make(map[string]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		out[pods.Items[i].Name] = &pods.Items[i]
	}
	return out, nil
}

// expectedBrokers are the broker pod names the StatefulSets want now.
func (h *harness) expectedBrokers(ctx context.Context) ([]string, error) {
	var sets appsv1.StatefulSetList
	if err := h.kube.List(ctx, &sets, client.InNamespace(namespace),
		client.MatchingLabels{controllers.LabelCluster: clusterName, controllers.LabelComponent: controllers.ComponentBroker}); err != nil {
		return nil, fmt.Errorf("list broker StatefulSets: %w", err)
	}
	var names []string
	for _, s := range sets.Items {
		if s.DeletionTimestamp != nil {
			continue
		}
		n := int32(1)
		if s.Spec.Replicas != nil {
			n = *s.Spec.Replicas
		}
		for i := int32(0); i < n; i++ {
			names = append(names, fmt.Sprintf("%s-%d", s.Name, i))
		}
	}
	return names, nil
}

// kafkaView is what the brokers' metadata says, from the host.
type kafkaView struct {
	byPod   map[string]int32 // registered brokers: pod name -> broker ID
	rack    map[int32]string
	topic   kadm.TopicDetail
	hasTopc bool
}

func (h *harness) metadata(ctx context.Context) (*kafkaView, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := h.admin.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	v := &kafkaView{byPod: map[string]int32{}, rack: map[int32]string{}}
	for _, b := range md.Brokers {
		pod, _, _ := strings.Cut(b.Host, ".")
		v.byPod[pod] = b.NodeID
		if b.Rack != nil {
			v.rack[b.NodeID] = *b.Rack
		}
	}
	if td, ok := md.Topics[topic]; ok && td.Err == nil {
		v.topic, v.hasTopc = td, true
	}
	return v, nil
}

// registered are the brokers (pod name -> broker ID) registered in the
// view of any broker: one broker's metadata may lag behind etcd by a moment
// (a broker that just registered is not in it yet), so every broker that
// answers is asked.
func (h *harness) registered(ctx context.Context) (map[string]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := h.admin.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := map[string]int32{}
	add := func(id int32, host string) {
		pod, _, _ := strings.Cut(host, ".")
		out[pod] = id
	}
	for _, b := range md.Brokers {
		add(b.NodeID, b.Host)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range md.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
			resp, err := req.RequestWith(ctx, h.kcl.Broker(int(b.NodeID)))
			if err != nil {
				return // a broker shutting down: the others answer
			}
			mu.Lock()
			defer mu.Unlock()
			for _, rb := range resp.Brokers {
				add(rb.NodeID, rb.Host)
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// fewestReplicasOn is the fewest of the topic's replicas on broker id in
// the view of any broker that answers: views lag etcd by a moment but do
// not go back, so the fewest is the current count.
func (h *harness) fewestReplicasOn(ctx context.Context, id int32) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := h.admin.BrokerMetadata(ctx)
	if err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	fewest, answered := 0, false
	for _, b := range md.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, h.kcl.Broker(int(b.NodeID)))
		if err != nil {
			continue
		}
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				for _, r := range p.Replicas {
					if r == id {
						n++
					}
				}
			}
		}
		if !answered || n < fewest {
			fewest, answered = n, true
		}
	}
	if !answered {
		return 0, errors.New("no broker answered a metadata request")
	}
	return fewest, nil
}

// replicasOnInEveryView counts the topic's replicas on each of ids in the
// view of every broker that answers (one count map per view): a view may
// lag etcd by a moment, so a condition on the counts holds for sure only
// when it holds in every view.
func (h *harness) replicasOnInEveryView(ctx context.Context, ids ...int32) ([]map[int32]int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := h.admin.BrokerMetadata(ctx)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	var views []map[int32]int
	for _, b := range md.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, h.kcl.Broker(int(b.NodeID)))
		if err != nil {
			return nil, fmt.Errorf("metadata from broker %d: %w", b.NodeID, err)
		}
		n := map[int32]int{}
		for _, id := range ids {
			n[id] = 0
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				for _, r := range p.Replicas {
					if _, ok := n[r]; ok {
						n[r]++
					}
				}
			}
		}
		views = append(views, n)
	}
	return views, nil
}

// replicasOn counts the topic's replicas on broker id.
func (v *kafkaView) replicasOn(id int32) int {
	n := 0
	for _, p := range v.topic.Partitions {
		for _, r := range p.Replicas {
			if r == id {
				n++
			}
		}
	}
	return n
}

// fullISR says whether every partition has rf replicas, all in the ISR,
// and a leader; why names the first that does not.
func (v *kafkaView) fullISR(rf int) (bool, string) {
	if !v.hasTopc || len(v.topic.Partitions) == 0 {
		return false, "topic not in metadata"
	}
	for _, p := range v.topic.Partitions.Sorted() {
		if len(p.Replicas) != rf || len(p.ISR) != len(p.Replicas) || p.Leader < 0 {
			return false, fmt.Sprintf("partition %d replicas %v isr %v leader %d", p.Partition, p.Replicas, p.ISR, p.Leader)
		}
	}
	return true, ""
}

// settled: the operator has acted on the latest spec and says Ready, with
// no roll or scaling under way.
func (h *harness) settled(ctx context.Context) (bool, string, error) {
	var kc strata.KafkaCluster
	if err := h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, &kc); err != nil {
		return false, "", fmt.Errorf("get KafkaCluster: %w", err)
	}
	if kc.Status.ObservedGeneration < kc.Generation {
		return false, fmt.Sprintf("observedGeneration %d < %d", kc.Status.ObservedGeneration, kc.Generation), nil
	}
	if kc.Status.Roll != nil {
		return false, "roll: " + kc.Status.Roll.Message, nil
	}
	if kc.Status.Scaling != nil {
		return false, "scaling: " + kc.Status.Scaling.Phase + " " + kc.Status.Scaling.Message, nil
	}
	for _, c := range kc.Status.Conditions {
		if c.Type == strata.ConditionReady {
			if c.Status != "True" {
				return false, "Ready " + string(c.Status) + ": " + c.Message, nil
			}
			return true, "", nil
		}
	}
	return false, "no Ready condition", nil
}

// healthy: settled, every expected broker pod Ready and registered, and
// every partition fully in sync.
func (h *harness) healthy(ctx context.Context) (bool, string, error) {
	if ok, why, err := h.settled(ctx); !ok || err != nil {
		return ok, why, err
	}
	want, err := h.expectedBrokers(ctx)
	if err != nil {
		return false, "", err
	}
	pods, err := h.brokerPods(ctx)
	if err != nil {
		return false, "", err
	}
	v, err := h.metadata(ctx)
	if err != nil {
		return false, err.Error(), nil
	}
	for _, n := range want {
		if p := pods[n]; p == nil || !podReady(p) {
			return false, n + " not Ready", nil
		}
		if _, ok := v.byPod[n]; !ok {
			return false, n + " not registered", nil
		}
	}
	if len(v.byPod) != len(want) {
		return false, fmt.Sprintf("%d brokers registered, %d expected", len(v.byPod), len(want)), nil
	}
	ok, why := v.fullISR(3)
	return ok, why, nil
}

// verifyStatus is `strata verify`'s /status, with the raw JSON for the
// report.
type verifyStatus struct {
	verify.Status
	raw json.RawMessage
}

func (h *harness) verifyURL(ctx context.Context, path string) (string, error) {
	var p corev1.Pod
	if err := h.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "verify"}, &p); err != nil {
		return "", fmt.Errorf("get verify pod: %w", err)
	}
	if p.Status.PodIP == "" {
		return "", errors.New("verify pod has no IP yet")
	}
	return "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(verifyPort)) + path, nil
}

func (h *harness) verify(ctx context.Context, method string, timeout time.Duration) (*verifyStatus, error) {
	path := "/status"
	if method == http.MethodPost {
		path = "/stop"
	}
	url, err := h.verifyURL(ctx, path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	c := *h.http
	c.Timeout = timeout
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("verify %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	var st verifyStatus
	if err := json.Unmarshal(body, &st.Status); err != nil {
		return nil, fmt.Errorf("verify %s: %w: %s", path, err, body)
	}
	st.raw = body
	return &st, nil
}

// metricsURLs are the /metrics of every broker pod, by pod IP.
func (h *harness) metricsURLs(ctx context.Context) ([]string, error) {
	want, err := h.expectedBrokers(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := h.brokerPods(ctx)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, n := range want {
		p := pods[n]
		if p == nil || p.Status.PodIP == "" {
			return nil, fmt.Errorf("broker pod %s has no IP", n)
		}
		urls = append(urls, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(metricsPort))+"/metrics")
	}
	return urls, nil
}

// walKeys lists the WAL objects of zone's bucket (wal/ prefix).
func (h *harness) walKeys(ctx context.Context, zone string) (map[string]bool, error) {
	keys := map[string]bool{}
	pages := s3.NewListObjectsV2Paginator(h.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucketOf + zone), Prefix: aws.String("wal/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list bucket %s%s: %w", bucketOf, zone, err)
		}
		for _, o := range page.Contents {
			keys[aws.ToString(o.Key)] = true
		}
	}
	return keys, nil
}

// downWatcher records, from outside the operator, how many brokers are
// down at every moment: a broker that has been up once (pod Ready and
// registered in the brokers' metadata) is down while the StatefulSets
// want its pod and the pod is missing, terminating, not Ready, or not
// registered. Brokers being added count from their first time up;
// brokers removed by a scale-down stop counting when their StatefulSet
// no longer wants them.
type downWatcher struct {
	h *harness

	mu     sync.Mutex
	seenUp map[string]bool
	down   map[string]*downSpell
	max    int
	maxAt  time.Time
	maxWho []string
	// stepMax is the most brokers down at once since stepStart: the
	// journey's figure per step.
	stepMax    int
	stepMaxWho []string
	episodes   []string
	polls      int
	errs       int
}

func newDownWatcher(h *harness) *downWatcher {
	return &downWatcher{h: h, seenUp: map[string]bool{}, down: map[string]*downSpell{}}
}

// downSpell is one broker's time down: since when, and why (each reason
// in the order seen: "terminating", "no pod", "not Ready", ...).
type downSpell struct {
	since time.Time
	why   []string
}

func (w *downWatcher) run(ctx context.Context) {
	for {
		w.observe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w *downWatcher) observe(ctx context.Context) {
	want, err := w.h.expectedBrokers(ctx)
	if err != nil {
		w.fail()
		return
	}
	pods, err := w.h.brokerPods(ctx)
	if err != nil {
		w.fail()
		return
	}
	// Registration is read from the brokers; when no broker answers at
	// all, every pod that is Ready still counts as up (the pods decide),
	// and the failure is counted.
	reg, mdErr := w.h.registered(ctx)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.polls++
	if mdErr != nil {
		w.errs++
	}
	var downNow []string
	wanted := map[string]bool{}
	for _, n := range want {
		wanted[n] = true
		p := pods[n]
		why := ""
		switch {
		case p == nil:
			why = "no pod"
		case p.DeletionTimestamp != nil:
			why = "terminating"
		case !podReady(p):
			why = "not Ready"
		case mdErr == nil && !has(reg, n):
			why = "not registered"
		}
		if why == "" {
			w.seenUp[n] = true
			if d, ok := w.down[n]; ok {
				w.episodes = append(w.episodes, fmt.Sprintf("%s down %s..%s (%.1f s): %s",
					n, d.since.Format("15:04:05.0"), now.Format("15:04:05.0"), now.Sub(d.since).Seconds(), strings.Join(d.why, ", ")))
				delete(w.down, n)
			}
			continue
		}
		if !w.seenUp[n] {
			continue
		}
		d, ok := w.down[n]
		if !ok {
			d = &downSpell{since: now}
			w.down[n] = d
		}
		if len(d.why) == 0 || d.why[len(d.why)-1] != why {
			d.why = append(d.why, why)
		}
		downNow = append(downNow, n+" ("+why+")")
	}
	for n := range w.down {
		if !wanted[n] {
			delete(w.down, n)
		}
	}
	if len(downNow) > w.max {
		w.max, w.maxAt, w.maxWho = len(downNow), now, downNow
	}
	if len(downNow) > w.stepMax {
		w.stepMax, w.stepMaxWho = len(downNow), downNow
	}
}

// stepStart starts a step's count with the brokers down now (a spell
// that began in the step before still counts in this one).
func (w *downWatcher) stepStart() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stepMax, w.stepMaxWho = len(w.down), nil
	for n := range w.down {
		w.stepMaxWho = append(w.stepMaxWho, n)
	}
}

// stepResult is the most brokers down at once since stepStart, and who.
func (w *downWatcher) stepResult() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stepMax, append([]string(nil), w.stepMaxWho...)
}

func has(m map[string]int32, k string) bool {
	_, ok := m[k]
	return ok
}

func (w *downWatcher) fail() {
	w.mu.Lock()
	w.errs++
	w.mu.Unlock()
}

func (w *downWatcher) result() (max int, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max, fmt.Sprintf("max %d at %s %v; %d polls (%d without metadata)", w.max, w.maxAt.Format("15:04:05.0"), w.maxWho, w.polls, w.errs)
}

func (w *downWatcher) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.episodes...)
}

// memSampler records the cluster's peak resident memory (hack/e2e/mem.sh).
type memSampler struct {
	mu   sync.Mutex
	peak float64 // MiB
}

func (m *memSampler) run(ctx context.Context, h *harness) {
	for {
		out, err := exec.CommandContext(ctx, filepath.Join(h.root, "hack/e2e/mem.sh")).Output()
		if err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) == 3 && f[2] == "total" {
					if v, err := strconv.ParseFloat(f[0], 64); err == nil {
						m.mu.Lock()
						m.peak = max(m.peak, v)
						m.mu.Unlock()
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(15 * time.Second):
		}
	}
}

func (m *memSampler) get() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// dump writes what explains a failure under dir: every pod's logs (all
// containers, the previous instance too), events, the operator's logs, and
// the custom resources as YAML. Best effort: a failing command writes its
// error into the file.
func (h *harness) dump(ctx context.Context, dir string) {
	_ = os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
	write := func(name string, args ...string) {
		out, err := h.run(ctx, args...)
		if err != nil {
			out += "\n# " + err.Error() + "\n"
		}
		_ = os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644)
	}
	write("pods.txt", "get", "pods", "-A", "-o", "wide")
	write("events.txt", "get", "events", "-A", "--sort-by=.lastTimestamp")
	write("resources.yaml", "get", "kafkaclusters,kafkatopics,kafkausers,fastbuckets,statefulsets,pvc", "-A", "-o", "yaml")
	write("operator.log", "-n", operatorNS, "logs", "deploy/"+operatorDep, "--all-containers", "--tail=-1")
	var pods corev1.PodList
	if err := h.kube.List(ctx, &pods); err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.Namespace != namespace && p.Namespace != operatorNS {
			continue
		}
		base := p.Namespace + "_" + p.Name
		for _, c := range p.Spec.Containers {
			write(filepath.Join("logs", base+"_"+c.Name+".log"), "-n", p.Namespace, "logs", p.Name, "-c", c.Name, "--timestamps")
			for _, s := range p.Status.ContainerStatuses {
				if s.Name == c.Name && s.RestartCount > 0 {
					write(filepath.Join("logs", base+"_"+c.Name+".previous.log"), "-n", p.Namespace, "logs", p.Name, "-c", c.Name, "--previous", "--timestamps")
				}
			}
		}
	}
}
