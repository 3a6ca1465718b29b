package controllers

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/meta"
)

func metricsTestCluster() *strata.KafkaCluster {
	return &strata.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kafka", Name: "scraped"},
		Spec: strata.KafkaClusterSpec{
			Zones:     []strata.ZoneSpec{{Name: "zone-a", Brokers: 1}},
			Listeners: []strata.ListenerSpec{{Name: "CLIENT", Port: 9093, Protocol: "PLAINTEXT"}},
			Metadata:  strata.MetadataSpec{ExternalEndpoints: []string{"http://etcd.example:2379"}},
			WAL:       strata.WALSpec{Enabled: ptr.To(false)},
		},
	}
}

// testMetricsToken is the metrics token of brokers started from a
// rendered config in these tests (mountMetricsToken).
const testMetricsToken = "test-metrics-token"

// mountMetricsToken writes token where the rendered config's
// metrics.auth.token.file points, as the pod's Secret volume would.
func mountMetricsToken(t *testing.T, kv map[string]string, token string) {
	t.Helper()
	path, ok := kv["metrics.auth.token.file"]
	if !ok || !strings.HasPrefix(path, MetricsTokenDir+"/") {
		t.Fatalf("metrics.auth.token.file = %q, want a file under %s", path, MetricsTokenDir)
	}
	dir := t.TempDir()
	local := filepath.Join(dir, strings.TrimPrefix(path, MetricsTokenDir+"/"))
	if err := os.WriteFile(local, []byte(token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	kv["metrics.auth.token.file"] = local
}

// TestRenderedBrokerMetricsNeedTheToken starts a broker from the config
// the operator renders, with the token Secret "mounted": /metrics answers
// 401 without the token or with another, 200 with it; the probes' paths
// stay open.
func TestRenderedBrokerMetricsNeedTheToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	etcd, err := meta.StartEmbedded(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(etcd.Close)
	kc := metricsTestCluster()
	kc.Spec.Metadata.ExternalEndpoints = etcd.Endpoints
	tlsDir := brokerTLSDir(t)
	srv := startRenderedBroker(ctx, t, kc, ZoneInput{Zone: kc.Spec.Zones[0]}, 0, tlsDir)
	base := "http://" + srv.MetricsAddr()
	get := func(path, token string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "another-token", http.StatusUnauthorized},
		{"/metrics", testMetricsToken, http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		if got := get(c.path, c.token); got != c.want {
			t.Errorf("GET %s with token %q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
	// /readyz is open too (its answer depends on the broker's state).
	if got := get("/readyz", ""); got == http.StatusUnauthorized {
		t.Errorf("GET /readyz without token: %d", got)
	}
}

// TestMetricsTokenSecretVolume: the broker pods mount the operator's
// token Secret, or the user's when spec.security.metricsToken names one,
// at the path of metrics.auth.token.file.
func TestMetricsTokenSecretVolume(t *testing.T) {
	for _, ref := range []*strata.SecretReference{nil, {Name: "shared-scrape-token"}} {
		kc := metricsTestCluster()
		kc.Spec.Security.MetricsToken = ref
		want := kc.Name + "-metrics-token"
		if ref != nil {
			want = ref.Name
		}
		sts := BuildZoneStatefulSet(kc, ZoneInput{Zone: kc.Spec.Zones[0]}, "")
		pod := sts.Spec.Template.Spec
		var found bool
		for _, v := range pod.Volumes {
			if v.Name == "metrics-token" && v.Secret != nil && v.Secret.SecretName == want {
				found = true
			}
		}
		if !found {
			t.Errorf("metricsToken %v: no volume metrics-token of Secret %s in %+v", ref, want, pod.Volumes)
		}
		var mounted bool
		for _, m := range pod.Containers[0].VolumeMounts {
			mounted = mounted || (m.Name == "metrics-token" && m.MountPath == MetricsTokenDir)
		}
		if !mounted {
			t.Errorf("metricsToken %v: metrics-token not mounted at %s", ref, MetricsTokenDir)
		}
	}
}
