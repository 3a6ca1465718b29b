package monitoring

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta/metatest"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	// The operator's metrics register on controller-runtime's registry
	// when its packages are loaded, as in the `strata operator` binary.
	_ "github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

const (
	rulesPath    = "../../config/prometheus/rules.yaml"
	ruleTestsDir = "../../config/prometheus/tests"
	grafanaDir   = "../../config/grafana"
	pendingPath  = "pending-metrics.txt"
)

// prometheusMade are series Prometheus makes itself for every target.
var prometheusMade = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added"}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up == 0`, []string{"up"}},
		{`sum by (namespace, kafkacluster) (strata_offline_partitions) > 0`, []string{"strata_offline_partitions"}},
		{`histogram_quantile(0.99, sum by (le) (rate(a_bucket{api="Produce", x=~"a|b}"}[$__rate_interval])))`, []string{"a_bucket"}},
		{`a / on (pod) group_left (zone) b offset 5m unless ignoring(x) c`, []string{"a", "b", "c"}},
		{`sum(rate(x{k="v"}[5m:1m])) without (instance) * 2592000 + 1e3`, []string{"x"}},
		{`label_replace(rate(t{a="1"}[${__rate_interval}]), "local_zone", "$1", "peer_zone", "(.*)")`, []string{"t"}},
		{`max(a) by (pod) and bool b`, []string{"a", "b"}},
		{`topk without (x) (3, sum by(pod)(y))`, []string{"y"}},
		{`count_values("v", z)`, []string{"z"}},
		{`sum + by`, []string{"sum"}},
		{`1 - sum(m{s='it\'s'}) / sum(m)`, []string{"m"}},
		{`vector(1)`, nil},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil {
			t.Errorf("MetricNames(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`a{x="1"`, `rate(a[5m)`, `a{x="1}`, `a}`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q) = %q, want an error", bad, got)
		}
	}
}

func promtool(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("STRATA_PROMTOOL")
	if bin == "" {
		t.Fatal("STRATA_PROMTOOL is not set: run `make test` (or `make promtool`) to build promtool")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("STRATA_PROMTOOL=%s: %v: run `make promtool` to build it", bin, err)
	}
	return bin
}

func run(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// writeRuleFile writes the PrometheusRule's spec as a plain rule file
// (what promtool reads) to dir/rules.yaml.
func writeRuleFile(t *testing.T, dir string, f RuleFile) {
	t.Helper()
	data, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRulesPromtool(t *testing.T) {
	bin := promtool(t)
	pr, err := LoadRules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeRuleFile(t, dir, pr.Spec)
	if out, err := run(t, dir, bin, "check", "rules", "rules.yaml"); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesPath, err, out)
	}

	files, err := filepath.Glob(filepath.Join(ruleTestsDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := pr.Spec.Alerts()
	tested := map[string]bool{}
	var args []string
	for _, f := range files {
		alert := strings.TrimSuffix(filepath.Base(f), ".yaml")
		tested[alert] = true
		if !slices.Contains(alerts, alert) {
			t.Errorf("%s tests alert %s, which %s does not define", f, alert, rulesPath)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string           `json:"alertname"`
					ExpAlerts []map[string]any `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(data, &tf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(tf.RuleFiles, []string{"rules.yaml"}) {
			t.Errorf("%s: rule_files = %q, want [rules.yaml] (the spec of %s, written beside it)", f, tf.RuleFiles, rulesPath)
		}
		// The file must show its alert firing, not only quiet.
		fires := false
		for _, tc := range tf.Tests {
			for _, at := range tc.AlertRuleTest {
				fires = fires || at.Alertname == alert && len(at.ExpAlerts) > 0
			}
		}
		if !fires {
			t.Errorf("%s never expects %s to fire", f, alert)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Base(f))
	}
	for _, a := range alerts {
		if !tested[a] {
			t.Errorf("alert %s has no promtool test: add %s/%s.yaml", a, ruleTestsDir, a)
		}
	}
	if len(args) == 0 {
		t.Fatalf("no rule tests in %s", ruleTestsDir)
	}
	if out, err := run(t, dir, bin, append([]string{"test", "rules"}, args...)...); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestDashboardQueriesParse parses every dashboard query with Prometheus'
// parser: each becomes a recording rule in a group named after its panel,
// so promtool's error names the panel.
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtool(t)
	qs, err := DashboardQueries(grafanaDir)
	if err != nil {
		t.Fatal(err)
	}
	var f RuleFile
	for i, q := range qs {
		f.Groups = append(f.Groups, RuleGroup{
			Name:  fmt.Sprintf("%03d %s", i, q.Where),
			Rules: []map[string]any{{"record": "dashboard:query", "expr": FillVariables(q.Expr)}},
		})
	}
	dir := t.TempDir()
	writeRuleFile(t, dir, f)
	if out, err := run(t, dir, bin, "check", "rules", "rules.yaml"); err != nil {
		t.Fatalf("a dashboard query does not parse: %v\n%s", err, out)
	}
}

// usedMetrics maps each metric name the dashboards and rules use to where.
func usedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	pr, err := LoadRules(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := DashboardQueries(grafanaDir)
	if err != nil {
		t.Fatal(err)
	}
	qs = append(qs, pr.Spec.Queries(filepath.Base(rulesPath))...)
	used := map[string][]string{}
	for _, q := range qs {
		names, err := MetricNames(q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Where, err)
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q.Where, q.Expr)
		}
		for _, n := range names {
			used[n] = append(used[n], q.Where)
		}
	}
	return used
}

// pendingMetrics reads pending-metrics.txt: "<metric> <why>" per line.
func pendingMetrics(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(pendingPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, _ := strings.Cut(line, " ")
		if strings.TrimSpace(why) == "" {
			t.Fatalf("%s: %q gives no reason", pendingPath, line)
		}
		out[name] = strings.TrimSpace(why)
	}
	return out
}

// exposure is what the brokers and the operator expose.
type exposure struct {
	scraped    map[string]bool // series names seen on the brokers' /metrics
	registries []prometheus.Registerer
}

func (e *exposure) has(t *testing.T, name string) bool {
	if e.scraped[name] {
		return true
	}
	// A labelled metric that has no series yet (a failure counter that
	// never failed) is not on /metrics, but it is registered under its
	// name: registering another descriptor of that name fails.
	base := name
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base = strings.TrimSuffix(base, suffix)
	}
	for _, reg := range e.registries {
		for _, n := range []string{name, base} {
			if registered(t, reg, n) {
				return true
			}
		}
	}
	return false
}

type probe struct{ desc *prometheus.Desc }

func (p probe) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }
func (p probe) Collect(chan<- prometheus.Metric)    {}

func registered(t *testing.T, reg prometheus.Registerer, name string) bool {
	t.Helper()
	p := probe{prometheus.NewDesc(name, "metric existence probe of test/monitoring", []string{"strata_probe"}, nil)}
	err := reg.Register(p)
	switch {
	case err == nil:
		reg.Unregister(p)
		return false
	case strings.Contains(err.Error(), "same fully-qualified name"):
		return true
	default:
		t.Fatalf("probe registration of %s: %v", name, err)
		return false
	}
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics of %s: %v", addr, err)
	}
	return fams
}

// seriesNames adds the names a family's series have in PromQL.
func seriesNames(into map[string]bool, fams map[string]*dto.MetricFamily) {
	for name, f := range fams {
		into[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			into[name+"_bucket"], into[name+"_sum"], into[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			into[name+"_sum"], into[name+"_count"] = true, true
		}
	}
}

// gauge sums a family's values (0 when absent).
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			total += m.GetGauge().GetValue() + m.GetCounter().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return total
}

var zones = []string{"a", "b", "c"}

// startWALCluster starts three brokers in zones a, b, c replicating
// through one bucket per zone on a real S3 server, with the slow tier on
// (bucket strata-tier on the same server), each serving /metrics.
func startWALCluster(t *testing.T) *brokertest.Cluster {
	t.Helper()
	s3s := s3server.Start(t, "wal-a", "wal-b", "wal-c", "strata-tier")
	c := &brokertest.Cluster{Etcd: metatest.Start(t).Endpoints()}
	for i, z := range zones {
		c.Brokers = append(c.Brokers, brokertest.Start(t, brokertest.ClusterOptions(c.Etcd, i+1, z,
			brokertest.WithSetting("metrics.listen", "127.0.0.1:0"),
			brokertest.WithSetting("wal.enable", "true"),
			brokertest.WithSetting("wal.bucket.name", "wal-"+z),
			brokertest.WithSetting("wal.bucket.region", s3s.Region),
			brokertest.WithSetting("wal.bucket.endpoint", s3s.Endpoint),
			brokertest.WithSetting("wal.bucket.force.path.style", "true"),
			brokertest.WithSetting("remote.log.storage.system.enable", "true"),
			brokertest.WithSetting("tier.bucket.name", "strata-tier"),
			brokertest.WithSetting("tier.bucket.region", s3s.Region),
			brokertest.WithSetting("tier.bucket.endpoint", s3s.Endpoint),
			brokertest.WithSetting("tier.bucket.force.path.style", "true"),
			brokertest.WithConfig(func(c *server.Config) {
				c.Cluster.WAL.Bucket.Credentials = &objstore.StaticCredentials{AccessKeyID: s3s.AccessKey, SecretAccessKey: s3s.SecretKey}
				c.Tier.Bucket.Credentials = &objstore.StaticCredentials{AccessKeyID: s3s.AccessKey, SecretAccessKey: s3s.SecretKey}
			}),
		)...))
	}
	return c
}

// TestMetricsExist fails naming every metric a dashboard panel, a
// dashboard variable or an alert uses that neither a running broker (WAL
// and slow tier on, after produce and consume traffic) nor the operator
// exposes.
func TestMetricsExist(t *testing.T) {
	used := usedMetrics(t)
	pending := pendingMetrics(t)

	c := startWALCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumeTopics("monitoring"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 3, 3, nil, "monitoring"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	const records = 200
	for i := range records {
		cl.Produce(ctx, &kgo.Record{Topic: "monitoring", Value: fmt.Appendf(nil, "record %d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < records; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", got, err)
		}
		got += fs.NumRecords()
	}

	// Poll until the WAL path has shown itself (an object uploaded) and
	// the controller's figures are in, then take the scrapes.
	var scrapes []map[string]*dto.MetricFamily
	deadline := time.Now().Add(time.Minute)
	for {
		scrapes = scrapes[:0]
		uploaded, controllers := 0.0, 0.0
		for _, b := range c.Brokers {
			fams := scrape(t, b.Server().MetricsAddr())
			scrapes = append(scrapes, fams)
			uploaded += gauge(fams, "strata_wal_objects_uploaded_total")
			controllers += gauge(fams, "strata_active_controller")
		}
		if uploaded > 0 && controllers == 1 {
			break
		}
		if time.Now().After(deadline) {
			// Go on: the names check below says more than this.
			t.Errorf("after a minute: %v WAL objects uploaded, %v active controllers (want > 0 and 1)", uploaded, controllers)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	e := &exposure{scraped: map[string]bool{}, registries: []prometheus.Registerer{ctrlmetrics.Registry}}
	for i, fams := range scrapes {
		seriesNames(e.scraped, fams)
		e.registries = append(e.registries, c.Brokers[i].Server().Metrics().Registry)
		if v := gauge(fams, "strata_log_dir_capacity_bytes"); v <= 0 {
			t.Errorf("broker %d: strata_log_dir_capacity_bytes = %v", i+1, v)
		}
		if v := gauge(fams, "strata_offline_partitions"); v != 0 {
			t.Errorf("broker %d: strata_offline_partitions = %v with every broker up", i+1, v)
		}
	}

	var missing []string
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		where := strings.Join(slices.Compact(used[n]), "; ")
		exposed := slices.Contains(prometheusMade, n) || e.has(t, n)
		why, isPending := pending[n]
		switch {
		case exposed && isPending:
			t.Errorf("%s is exposed now: remove it from %s (%s)", n, pendingPath, why)
		case !exposed && isPending:
			t.Logf("%s: not exposed yet, pending: %s", n, why)
		case !exposed:
			missing = append(missing, fmt.Sprintf("%s (used by %s)", n, where))
		}
	}
	for n := range pending {
		if _, ok := used[n]; !ok {
			t.Errorf("%s lists %s, which no dashboard or alert uses", pendingPath, n)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d metrics used by dashboards or alerts are exposed by no broker and not registered by the operator:\n  %s",
			len(missing), strings.Join(missing, "\n  "))
	}
}

// TestOfflinePartitions shows strata_offline_partitions counting: a
// partition whose only replica's broker stopped has no live leader.
func TestOfflinePartitions(t *testing.T) {
	c := brokertest.StartCluster(t, zones, brokertest.WithSetting("metrics.listen", "127.0.0.1:0"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// One partition per broker, replication factor 1.
	if resp, err := adm.CreateTopic(ctx, 3, 1, nil, "single"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	// Wait until the metadata shows every partition led and a controller
	// elected (CreateTopics answers before every broker has applied the
	// topic), then pick a broker that leads a partition and is not the
	// controller, so that the controller's count is the one that moves.
	stopped, want := -1, 0.0
	deadline := time.Now().Add(time.Minute)
	for stopped < 0 {
		leaders := map[int32]int{}
		if td, err := adm.ListTopics(ctx, "single"); err == nil {
			for _, p := range td["single"].Partitions {
				if p.Err == nil && p.Leader >= 0 {
					leaders[p.Leader]++
				}
			}
		}
		controller := -1
		for i, b := range c.Brokers {
			if gauge(scrape(t, b.Server().MetricsAddr()), "strata_active_controller") == 1 {
				controller = i
			}
		}
		if len(leaders) > 0 && controller >= 0 && leaders[1]+leaders[2]+leaders[3] == 3 {
			for i := range c.Brokers {
				if i != controller && leaders[int32(i+1)] > 0 {
					stopped, want = i, float64(leaders[int32(i+1)])
					break
				}
			}
			if stopped < 0 {
				t.Fatalf("only the controller (broker %d) leads partitions: %v", controller+1, leaders)
			}
		}
		if stopped < 0 && time.Now().After(deadline) {
			t.Fatalf("a minute after CreateTopics: leaders %v, controller broker index %d", leaders, controller)
		}
		if stopped < 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.Brokers[stopped].Stop()
	deadline = time.Now().Add(time.Minute)
	for {
		offline := 0.0
		for i, b := range c.Brokers {
			if i != stopped {
				offline += gauge(scrape(t, b.Server().MetricsAddr()), "strata_offline_partitions")
			}
		}
		if offline == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("strata_offline_partitions summed over the running brokers = %v a minute after broker %d stopped, want %v", offline, stopped+1, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
