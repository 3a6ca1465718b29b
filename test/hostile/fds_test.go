package hostile

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/childproc"
)

// TestReadyzFDStarved runs a broker process under RLIMIT_NOFILE 512 and
// holds idle sockets to it until its free file descriptors fall under the
// reserve: /readyz must then answer 503 naming RLIMIT_NOFILE (issue 26
// item 6: past the limit the broker failed with "too many open files"
// while /readyz still answered ok), the broker keeps running, and it is
// ready again once the sockets close.
func TestReadyzFDStarved(t *testing.T) {
	const limit = 512
	metricsAddr, kafkaAddr := freeAddr(t), freeAddr(t)
	var logs brokertest.SyncBuffer
	// The shell lowers soft and hard limits; the broker's Go runtime raises
	// its soft limit only up to the hard one.
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, limit), brokertest.Binary(t), "broker",
		"--listen", kafkaAddr, "--data-dir", t.TempDir(), "--metrics-listen", metricsAddr, "--log-format", "console")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	exited, err := childproc.Start(cmd, syscall.SIGKILL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("broker output:\n%s", logs.String())
		}
	})
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	readyz := func() (int, string) {
		resp, err := hc.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitReadyz := func(code int, want string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			got, body := readyz()
			if got == code && strings.Contains(body, want) {
				return
			}
			select {
			case <-exited:
				t.Fatalf("broker exited waiting for /readyz %d %q (last %d %q)", code, want, got, body)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: want %d %q, last %d %q", code, want, got, body)
			}
			time.Sleep(50 * time.Millisecond) // polling pace
		}
	}
	waitReadyz(http.StatusOK, "ok")

	// Partitions are admitted against the same budget: 100 new replicas
	// (about 500 descriptors) do not fit under 512, a few do.
	admin := kadm.NewClient(client(t, kafkaAddr))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := admin.CreateTopic(ctx, 100, 1, nil, "too-many")
	if !errors.Is(resp.Err, kerr.PolicyViolation) || !strings.Contains(resp.ErrMessage, "RLIMIT_NOFILE") {
		t.Fatalf("100 partitions under RLIMIT_NOFILE %d: %v %v %q", limit, err, resp.Err, resp.ErrMessage)
	}
	if resp, err := admin.CreateTopic(ctx, 4, 1, nil, "fits"); err != nil || resp.Err != nil {
		t.Fatalf("4 partitions: %v %v %q", err, resp.Err, resp.ErrMessage)
	}

	// Idle clients (one ApiVersions each, so that
	// connections.authentication.timeout.ms does not close them), a few
	// at a time, until the broker reports itself starved; never up to the
	// limit itself.
	var socks []net.Conn
	closeAll := func() {
		for _, s := range socks {
			s.Close()
		}
		socks = nil
	}
	t.Cleanup(closeAll)
	starved := false
	for len(socks) < limit-16 && !starved {
		for range 8 {
			s, err := net.DialTimeout("tcp", kafkaAddr, 10*time.Second)
			if err != nil {
				t.Fatalf("dial with %d sockets open: %v", len(socks), err)
			}
			socks = append(socks, s)
			_ = s.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := s.Write(brokertest.RequestFrame(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
				t.Fatalf("ApiVersions with %d sockets open: %v", len(socks), err)
			}
			var size [4]byte
			if _, err := io.ReadFull(s, size[:]); err != nil {
				t.Fatalf("ApiVersions answer with %d sockets open: %v", len(socks), err)
			}
			if _, err := io.CopyN(io.Discard, s, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
				t.Fatal(err)
			}
		}
		// Each socket answered its ApiVersions: the broker holds all of
		// them open now.
		code, body := readyz()
		starved = code == http.StatusServiceUnavailable && strings.Contains(body, "RLIMIT_NOFILE")
	}
	if !starved {
		t.Fatalf("/readyz still ready with %d idle sockets open under RLIMIT_NOFILE %d", len(socks), limit)
	}
	t.Logf("unready after %d idle sockets", len(socks))
	waitReadyz(http.StatusServiceUnavailable, fmt.Sprintf("of RLIMIT_NOFILE %d", limit))

	closeAll()
	waitReadyz(http.StatusOK, "ok")
}
