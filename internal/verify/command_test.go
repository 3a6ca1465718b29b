package verify_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-dev/strata/broker/brokertest"
	"github.com/strata-dev/strata/internal/verify"
)

// verifyProcess is a `strata verify` subprocess, as the e2e journey runs
// it in a pod.
type verifyProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *brokertest.SyncBuffer
	url            string
}

var httpLine = regexp.MustCompile(`verify: HTTP on (\S+) `)

func startVerify(t *testing.T, args ...string) *verifyProcess {
	t.Helper()
	p := &verifyProcess{stdout: &brokertest.SyncBuffer{}, stderr: &brokertest.SyncBuffer{}}
	p.cmd = exec.Command(brokertest.Binary(t), append([]string{"verify", "--listen", "127.0.0.1:0", "--json"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("strata verify stderr:\n%s", p.stderr.String())
		}
	})
	waitFor(t, "the HTTP address on stderr", func() bool {
		m := httpLine.FindStringSubmatch(p.stderr.String())
		if m != nil {
			p.url = "http://" + m[1]
		}
		return m != nil
	})
	waitFor(t, "/healthz ready", func() bool {
		resp, err := http.Get(p.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return p
}

func (p *verifyProcess) status(t *testing.T, method, path string) verify.Status {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, p.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s %s: HTTP %d %v: %s", method, path, resp.StatusCode, err, body)
	}
	var st verify.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, body)
	}
	return st
}

// wait waits for the process to exit and returns its exit code and the
// final status it printed.
func (p *verifyProcess) wait(t *testing.T) (int, verify.Status) {
	t.Helper()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var st verify.Status
	if err := json.Unmarshal(bytes.TrimSpace([]byte(p.stdout.String())), &st); err != nil {
		t.Fatalf("stdout is not the final status: %v\n%s", err, p.stdout.String())
	}
	return code, st
}

// TestCommand runs `strata verify` processes against a three-zone cluster:
// SIGTERM ends a clean run with exit code 0 and the final JSON on stdout;
// a record really written twice into the topic makes POST /stop answer
// duplicated 1 and the process exit 1.
func TestCommand(t *testing.T) {
	c := brokertest.StartCluster(t, []string{"a", "b", "c"})
	args := []string{"--bootstrap", strings.Join(c.Addrs(), ","), "--topic", "verify", "--rate", "500", "--client-rack", "a"}

	t.Run("SIGTERM ends a clean run: exit 0", func(t *testing.T) {
		p := startVerify(t, args...)
		waitFor(t, "200 records acknowledged", func() bool { return p.status(t, "GET", "/status").Acked >= 200 })
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code, st := p.wait(t)
		if code != 0 || !st.Done || !st.Drained || !st.OK() || st.Acked < 200 || st.Partitions != 6 || st.Consumed < st.Acked {
			t.Fatalf("exit code %d, final status %+v", code, st)
		}
	})

	t.Run("a record written twice: POST /stop reports it, exit 1", func(t *testing.T) {
		p := startVerify(t, args...)
		waitFor(t, "200 records acknowledged", func() bool { return p.status(t, "GET", "/status").Acked >= 200 })
		run := p.status(t, "GET", "/status").Run
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("verify"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Partition: 4, Value: fmt.Appendf(nil, "%s 9 copy", run)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		final := p.status(t, "POST", "/stop")
		code, st := p.wait(t)
		if code != 1 || !st.Done || st.Duplicated != 1 || st.Lost != 0 || st.OtherRecords == 0 || st.Acked != final.Acked || final.Duplicated != 1 {
			t.Fatalf("exit code %d, final status %+v, POST /stop answered %+v", code, st, final)
		}
	})
}
