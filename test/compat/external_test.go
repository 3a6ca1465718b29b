package compat

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procMember is a group member running as a subprocess that prints
// "partition offset key" per consumed record and commits, leaves the
// group and exits on SIGTERM.
type procMember struct {
	name   string
	cmd    *exec.Cmd
	stderr *lockedBuffer
	read   chan struct{}
	once   sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startProc(t *testing.T, name string, out chan<- consumed, path string, args ...string) *procMember {
	t.Helper()
	m := &procMember{name: name, cmd: exec.Command(path, args...), stderr: &lockedBuffer{}, read: make(chan struct{})}
	m.cmd.Stderr = m.stderr
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(m.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 {
				continue
			}
			p, err1 := strconv.ParseInt(f[0], 10, 32)
			o, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			out <- consumed{name, int32(p), o, f[2]}
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *procMember) stop(t *testing.T) {
	m.once.Do(func() {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() {
			<-m.read // stdout fully read before Wait closes the pipe
			exited <- m.cmd.Wait()
		}()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("%s exited: %v\nstderr:\n%s", m.name, err, m.stderr.String())
			}
		case <-time.After(time.Minute):
			_ = m.cmd.Process.Kill()
			<-exited
			t.Errorf("%s did not exit on SIGTERM\nstderr:\n%s", m.name, m.stderr.String())
		}
	})
}

func runTool(t *testing.T, stdin []byte, path string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", path, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String() + stderr.String()
}

func keyValueLines(recs []record) []byte {
	var b bytes.Buffer
	for _, r := range recs {
		fmt.Fprintf(&b, "%s:%s\n", r.key, r.value)
	}
	return b.Bytes()
}

// --- kcat (librdkafka) ---

// kcat drives librdkafka; extra adds consumer properties (-X k=v);
// static gives each member a group.instance.id (a restarted member reuses
// the one of the member it replaces).
type kcat struct {
	extra  []string
	static bool
	// keepGoing passes -E: kcat otherwise exits when all brokers are
	// down, e.g. while the broker restarts.
	keepGoing bool
}

func (kcat) version(t *testing.T) string {
	out := runTool(t, nil, kcatPath(t), "-V")
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Version") {
			return "kcat " + strings.TrimSpace(strings.TrimPrefix(l, "Version"))
		}
	}
	return "kcat (unknown version)"
}

func (kcat) produce(t *testing.T, addr string, recs []record) {
	runTool(t, keyValueLines(recs), kcatPath(t), "-b", addr, "-P", "-t", topic, "-K", ":", "-X", "acks=all")
}

func (k kcat) startMember(t *testing.T, addr, name string, out chan<- consumed) member {
	// -G: balanced consumer group (subscribe); librdkafka defaults except
	// auto.offset.reset=earliest. On SIGTERM kcat closes the consumer,
	// which commits the consumed offsets and leaves the group.
	args := []string{"-b", addr, "-G", group, "-X", "client.id=" + name, "-X", "auto.offset.reset=earliest"}
	for _, x := range k.extra {
		args = append(args, "-X", x)
	}
	if k.static {
		args = append(args, "-X", "group.instance.id="+strings.TrimSuffix(name, "2"))
	}
	if k.keepGoing {
		args = append(args, "-E")
	}
	args = append(args, "-u", "-q", "-f", "%p %o %k\n", topic)
	return startProc(t, name, out, kcatPath(t), args...)
}

func TestKcat(t *testing.T) { runScenario(t, kcat{}) }

// TestKcatCooperativeSticky uses librdkafka's incremental (KIP-429)
// rebalancing: consecutive rebalances with partial revocation.
func TestKcatCooperativeSticky(t *testing.T) {
	runScenario(t, kcat{extra: []string{"partition.assignment.strategy=cooperative-sticky"}})
}

// TestKcatStaticMembership gives the members group.instance.id (KIP-345):
// the restarted member takes over its predecessor's assignment.
func TestKcatStaticMembership(t *testing.T) { runScenario(t, kcat{static: true}) }

// --- Python clients (Debian packages) ---

type python struct{ lib string } // "confluent" or "kafkapython"

func (p python) version(t *testing.T) string {
	return strings.TrimSpace(runTool(t, nil, pythonPath(t), "clients.py", p.lib, "version"))
}

func (p python) produce(t *testing.T, addr string, recs []record) {
	runTool(t, keyValueLines(recs), pythonPath(t), "clients.py", p.lib, "produce", addr, topic)
}

func (p python) startMember(t *testing.T, addr, name string, out chan<- consumed) member {
	return startProc(t, name, out, pythonPath(t), "clients.py", p.lib, "consume", addr, group, topic, name)
}

func TestConfluentKafkaPython(t *testing.T) { runScenario(t, python{"confluent"}) }

func TestKafkaPython(t *testing.T) { runScenario(t, python{"kafkapython"}) }

// TestKcatBrokerRestart restarts the broker under a librdkafka group.
func TestKcatBrokerRestart(t *testing.T) { runScenarioWith(t, kcat{keepGoing: true}, true) }
