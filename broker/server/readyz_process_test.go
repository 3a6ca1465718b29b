package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/internal/freeport"
)

// TestReadyzFollowsRegistration runs a `strata broker` process whose etcd
// is unreachable at start: /readyz must answer 503 with the reason (not
// refuse connections, not exit) until etcd comes up and the broker sees
// its registration, then 200; 503 again once etcd is cut off and the
// lease is lost; 200 again after etcd returns. strata_broker_ready
// follows.
func TestReadyzFollowsRegistration(t *testing.T) {
	t.Cleanup(brokertest.RemoveBinary) // the only test here using the binary
	etcdClient, etcdPeer := freeAddr(t), freeAddr(t)
	metricsAddr, kafkaAddr := freeAddr(t), freeAddr(t)

	var logs brokertest.SyncBuffer
	cmd := exec.Command(brokertest.Binary(t), "broker",
		"--listen", kafkaAddr, "--data-dir", t.TempDir(), "--metrics-listen", metricsAddr, "--log-format", "console",
		"--set", "node.id=1", "--set", "broker.rack=a", "--set", "cluster.name=readyz",
		"--set", "metadata.etcd.endpoints=http://"+etcdClient,
		"--set", "broker.session.timeout.ms=2000")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("broker output:\n%s", logs.String())
		}
	})

	base := "http://" + metricsAddr
	const unregistered = "not registered in the cluster metadata"
	waitReadyz(t, base, exited, http.StatusServiceUnavailable, unregistered)
	wantGauge(t, base, 0)

	etcdDir := t.TempDir()
	startEtcd := func() *meta.Embedded {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		e, err := meta.StartEmbedded(ctx, etcdDir, nil, meta.WithListenAddrs(etcdClient, etcdPeer))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := startEtcd()
	waitReadyz(t, base, exited, http.StatusOK, "ok")
	wantGauge(t, base, 1)

	// Cut etcd off: the lease cannot be renewed and is lost after the
	// session timeout.
	e.Close()
	waitReadyz(t, base, exited, http.StatusServiceUnavailable, unregistered)
	wantGauge(t, base, 0)

	e = startEtcd()
	t.Cleanup(e.Close)
	waitReadyz(t, base, exited, http.StatusOK, "ok")
	wantGauge(t, base, 1)
}

// waitReadyz polls /readyz until it answers code with body containing
// want.
func waitReadyz(t *testing.T, base string, exited <-chan struct{}, code int, want string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	last := "no answer"
	for {
		got, body, err := httpGet(base + "/readyz")
		if err == nil && got == code && strings.Contains(body, want) {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %q", got, body)
		}
		select {
		case <-exited:
			t.Fatalf("broker exited while waiting for /readyz %d %q (last: %s)", code, want, last)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: want %d %q, last answer: %s", code, want, last)
		}
		time.Sleep(50 * time.Millisecond) // polling pace
	}
}

func wantGauge(t *testing.T, base string, v int) {
	t.Helper()
	_, body, err := httpGet(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("\nstrata_broker_ready %d\n", v); !strings.Contains(body, want) {
		t.Fatalf("/metrics lacks %q", strings.TrimSpace(want))
	}
}

func httpGet(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// freeAddr is an address for a broker process to bind (freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
