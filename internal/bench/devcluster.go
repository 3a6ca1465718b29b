package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-dev/strata/internal/childproc"
	"github.com/strata-dev/strata/internal/freeport"
)

// ReadyPrefix starts the line `strata dev` prints once it serves.
const ReadyPrefix = "strata dev ready:"

// DevStarter starts each mode's cluster by running `<Binary> dev` as a
// subprocess and waiting for its ready line
//
//	strata dev ready: bootstrap=<addr>[,<addr>...] [metrics=<url>[,<url>...]] [key=value ...]
//
// DevStarter passes --metrics-listen 127.0.0.1:0, so every broker serves
// /metrics on its own free port and dev lists the URLs in the metrics
// field (without it the traffic figures are n/a).
type DevStarter struct {
	// Binary is the strata executable (os.Executable() in the CLI).
	Binary string
	// ReadyTimeout bounds the wait for the ready line (default 2 min).
	ReadyTimeout time.Duration
	// ExtraArgs are appended to every dev command line.
	ExtraArgs []string
}

// DevFeatures are the `strata dev` flags that matter to the bench, read
// from `strata dev --help`.
type DevFeatures struct {
	Flags map[string]bool
}

// Supports reports whether dev has the flag (name without dashes).
func (f DevFeatures) Supports(flag string) bool { return f.Flags[flag] }

// ParseDevHelp extracts the long flag names from `strata dev --help`.
func ParseDevHelp(help string) DevFeatures {
	f := DevFeatures{Flags: map[string]bool{}}
	for _, line := range strings.Split(help, "\n") {
		for _, word := range strings.Fields(line) {
			if strings.HasPrefix(word, "--") && len(word) > 2 {
				name := strings.TrimPrefix(word, "--")
				name, _, _ = strings.Cut(name, "=")
				f.Flags[strings.TrimRight(name, ",")] = true
			}
		}
	}
	return f
}

// Flag names of `strata dev` the bench uses when present. A dev binary
// without them (an older build) cannot run the WAL mode
// (ErrModeUnsupported) and injected latencies are reported as not applied.
const (
	devFlagReplication  = "replication"    // --replication classic|wal
	devFlagS3PutLatency = "s3-put-latency" // --s3-put-latency 5ms
	devFlagS3GetLatency = "s3-get-latency"
	devFlagZoneLatency  = "zone-latency"
	devFlagSecurity     = "security" // --security: SASL_SSL + SCRAM
	devFlagSet          = "set"      // --set key=value (wal.policy of wal+<policy> modes)
	devFlagS3Dir        = "s3-dir"   // --s3-dir DIR: the gateway's directory
)

// SecurityPrefix starts the line `strata dev --security` prints before the
// ready line: "strata dev security: ca=<file> mechanism=<m> user=<u> password=<p>".
const SecurityPrefix = "strata dev security:"

// ErrModeUnsupported is returned when `strata dev` cannot run a mode.
var ErrModeUnsupported = errors.New("mode not supported by strata dev")

// DevArgs returns the `strata dev` arguments for a mode, given the
// features of this dev binary, and the notes to print (options that
// could not be passed). This is the one place that maps bench modes and
// options to dev flags:
//
//   - always: --listen 127.0.0.1:0 (random ports) and --log-format console;
//   - classic: --replication classic when dev has the flag (dev's default
//     is wal), else nothing (an older dev: classic was its only mode);
//   - wal: --replication wal; without the flag: ErrModeUnsupported;
//     wal+latency, wal+cost, wal+auto add --set wal.policy=<policy>, plain
//     wal --set wal.policy=auto (the broker default; dev's own is latency)
//     when dev has --set;
//   - --broker-config key=value (every mode): --set key=value each, before
//     the mode's own wal.policy;
//   - opts.StoreDir (wal only): --s3-dir, the directory itself (Start
//     makes a new one under ClusterOptions.StoreDir);
//   - --s3-put-latency, --s3-get-latency (wal only), --zone-latency (both):
//     passed when dev has the flag and the value is not 0, else a note.
func DevArgs(mode string, opts ClusterOptions, feat DevFeatures) (args, notes []string, err error) {
	args = []string{"dev", "--listen", "127.0.0.1:0", "--log-format", "console"}
	full := mode
	mode, secure := BaseMode(mode)
	if secure {
		if !feat.Supports(devFlagSecurity) {
			return nil, nil, fmt.Errorf("%w: %s needs `strata dev --%s`, not available in this binary", ErrModeUnsupported, SecuritySuffix, devFlagSecurity)
		}
		if opts.ZoneLatency > 0 {
			return nil, nil, fmt.Errorf("%w: %s with --zone-latency (the bench clients' delayed dialer does not do TLS)", ErrModeUnsupported, SecuritySuffix)
		}
		args = append(args, "--"+devFlagSecurity)
	}
	if len(opts.BrokerConfig) > 0 {
		if !feat.Supports(devFlagSet) {
			return nil, nil, fmt.Errorf("%w: --broker-config needs `strata dev --%s`", ErrModeUnsupported, devFlagSet)
		}
		for _, kv := range opts.BrokerConfig {
			args = append(args, "--"+devFlagSet, kv)
		}
	}
	switch mode {
	case ModeClassic:
		if feat.Supports(devFlagReplication) {
			args = append(args, "--"+devFlagReplication, ModeClassic)
		}
	case ModeWAL:
		if !feat.Supports(devFlagReplication) {
			return nil, nil, fmt.Errorf("%w: wal mode needs `strata dev --%s wal` (the 3-zone cluster with WAL replication), not available yet in this binary",
				ErrModeUnsupported, devFlagReplication)
		}
		args = append(args, "--"+devFlagReplication, ModeWAL)
		switch _, policy := WALPolicy(strings.TrimSuffix(full, SecuritySuffix)); {
		case policy != "":
			if !feat.Supports(devFlagSet) {
				return nil, nil, fmt.Errorf("%w: wal.policy %s needs `strata dev --%s`", ErrModeUnsupported, policy, devFlagSet)
			}
			args = append(args, "--"+devFlagSet, "wal.policy="+policy)
		case feat.Supports(devFlagSet):
			// Plain wal measures the broker default (auto); dev itself
			// defaults to latency, so that its demo shows objects.
			args = append(args, "--"+devFlagSet, "wal.policy="+DefaultWALPolicy)
		}
		if ZoneLocal(full) {
			if !feat.Supports(devFlagSet) {
				return nil, nil, fmt.Errorf("%w: %s needs `strata dev --%s`", ErrModeUnsupported, ZoneLocalSuffix, devFlagSet)
			}
			args = append(args, "--"+devFlagSet, "wal.zonelocal.produce.enable=true")
		}
	default:
		return nil, nil, fmt.Errorf("%w: unknown mode %q", ErrModeUnsupported, mode)
	}
	add := func(flag string, d time.Duration, applies bool) {
		if d == 0 || !applies {
			return
		}
		if !feat.Supports(flag) {
			notes = append(notes, fmt.Sprintf("--%s %v not applied: strata dev has no --%s yet", flag, d, flag))
			return
		}
		args = append(args, "--"+flag, d.String())
	}
	if mode == ModeWAL && opts.StoreDir != "" {
		if feat.Supports(devFlagS3Dir) {
			args = append(args, "--"+devFlagS3Dir, opts.StoreDir)
		} else {
			notes = append(notes, fmt.Sprintf("object store directory %s not applied: strata dev has no --%s yet", opts.StoreDir, devFlagS3Dir))
		}
	}
	add(devFlagS3PutLatency, opts.S3PutLatency, mode == ModeWAL)
	add(devFlagS3GetLatency, opts.S3GetLatency, mode == ModeWAL)
	add(devFlagZoneLatency, opts.ZoneLatency, true)
	return args, notes, nil
}

// ReadyLine is the parsed ready line of `strata dev`.
type ReadyLine struct {
	Bootstrap []string
	Metrics   []string
	Fields    map[string]string
}

// ParseReadyLine parses `strata dev ready: key=value key=value ...`; ok is
// false when line is not a ready line.
func ParseReadyLine(line string) (ReadyLine, bool, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), ReadyPrefix)
	if !ok {
		return ReadyLine{}, false, nil
	}
	rl := ReadyLine{Fields: map[string]string{}}
	for _, f := range strings.Fields(rest) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		rl.Fields[k] = v
	}
	split := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	rl.Bootstrap = split(rl.Fields["bootstrap"])
	rl.Metrics = split(rl.Fields["metrics"])
	if len(rl.Bootstrap) == 0 {
		return rl, true, fmt.Errorf("ready line without bootstrap addresses: %q", line)
	}
	for i, m := range rl.Metrics {
		if !strings.Contains(m, "://") {
			rl.Metrics[i] = "http://" + m + "/metrics"
		}
	}
	return rl, true, nil
}

// Features runs `<Binary> dev --help`.
func (s *DevStarter) Features(ctx context.Context) (DevFeatures, error) {
	out, err := exec.CommandContext(ctx, s.Binary, "dev", "--help").CombinedOutput()
	if err != nil {
		return DevFeatures{}, fmt.Errorf("%s dev --help: %w\n%s", s.Binary, err, out)
	}
	return ParseDevHelp(string(out)), nil
}

// CheckMode implements ModeChecker.
func (s *DevStarter) CheckMode(ctx context.Context, mode string, opts ClusterOptions) error {
	feat, err := s.Features(ctx)
	if err != nil {
		return err
	}
	_, _, err = DevArgs(mode, opts, feat)
	return err
}

// Start implements ClusterStarter.
func (s *DevStarter) Start(ctx context.Context, mode string, opts ClusterOptions) (*Cluster, error) {
	feat, err := s.Features(ctx)
	if err != nil {
		return nil, err
	}
	removeStore := func() {}
	if base, _ := BaseMode(mode); base == ModeWAL && opts.StoreDir != "" && feat.Supports(devFlagS3Dir) {
		dir, err := os.MkdirTemp(opts.StoreDir, "strata-bench-s3-")
		if err != nil {
			return nil, fmt.Errorf("object store directory: %w", err)
		}
		opts.StoreDir = dir
		removeStore = func() { _ = os.RemoveAll(dir) }
	}
	c, err := s.start(ctx, mode, opts, feat)
	if err != nil {
		removeStore()
		return nil, err
	}
	stop := c.Stop
	c.Stop = func(ctx context.Context) error {
		defer removeStore()
		return stop(ctx)
	}
	return c, nil
}

func (s *DevStarter) start(ctx context.Context, mode string, opts ClusterOptions, feat DevFeatures) (*Cluster, error) {
	args, notes, err := DevArgs(mode, opts, feat)
	if err != nil {
		return nil, err
	}
	// Every broker serves /metrics on a free port; dev lists the URLs in
	// the ready line.
	if feat.Supports("metrics-listen") {
		args = append(args, "--metrics-listen", "127.0.0.1:0")
	}
	args = append(args, s.ExtraArgs...)

	cmd := exec.Command(s.Binary, args...)
	cmd.SysProcAttr = devSysProcAttr()
	if opts.GoMaxProcs != "" {
		cmd.Env = append(os.Environ(), "GOMAXPROCS="+opts.GoMaxProcs)
	}
	logs := &lockedBuffer{}
	ready := make(chan ReadyLine, 1)
	readyErr := make(chan error, 1)
	sent := false // only touched by the writer goroutine of exec
	var security *ClientSecurity
	cmd.Stderr = logs
	cmd.Stdout = &lineWriter{each: func(line string) {
		if rest, ok := strings.CutPrefix(line, SecurityPrefix); ok {
			f := map[string]string{}
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					f[k] = v
				}
			}
			security = &ClientSecurity{CAFile: f["ca"], Mechanism: f["mechanism"], User: f["user"], Password: f["password"]}
			line = SecurityPrefix + " ca=" + f["ca"] + " mechanism=" + f["mechanism"] + " user=" + f["user"] + " password=<redacted>"
		}
		logs.WriteString(line + "\n")
		if sent {
			return
		}
		rl, ok, err := ParseReadyLine(line)
		if !ok {
			return
		}
		sent = true
		if err != nil {
			readyErr <- err
		} else {
			ready <- rl
		}
	}}
	// SIGTERM if the bench dies: dev shuts its brokers down, and its
	// gateway dies with it.
	done, err := childproc.Start(cmd, syscall.SIGTERM)
	if err != nil {
		return nil, fmt.Errorf("start %s %s: %w", s.Binary, strings.Join(args, " "), err)
	}
	stop := func(ctx context.Context) error {
		select {
		case <-done:
			return fmt.Errorf("strata dev (%s) exited during the run:\n%s", mode, tail(logs.String(), 40))
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			return nil
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the process group we created
		<-done
		return fmt.Errorf("strata dev (%s) did not stop within 30s of SIGTERM; killed", mode)
	}
	timeout := s.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	var rl ReadyLine
	select {
	case rl = <-ready:
	case err := <-readyErr:
		_ = stop(context.Background())
		return nil, fmt.Errorf("strata dev (%s): %w\n%s", mode, err, logs.String())
	case <-done:
		return nil, fmt.Errorf("strata dev (%s) exited before it was ready: %s %s\n%s", mode, s.Binary, strings.Join(args, " "), logs.String())
	case <-tm.C:
		_ = stop(context.Background())
		return nil, fmt.Errorf("strata dev (%s) not ready after %v\n%s", mode, timeout, logs.String())
	case <-ctx.Done():
		_ = stop(context.Background())
		return nil, ctx.Err()
	}
	c := &Cluster{Bootstrap: rl.Bootstrap, MetricsURLs: rl.Metrics, Notes: notes, Stop: stop, Security: security, PIDs: []int{cmd.Process.Pid}}
	if _, secure := BaseMode(mode); secure && security == nil {
		_ = stop(context.Background())
		return nil, fmt.Errorf("strata dev (%s) printed no %q line", mode, SecurityPrefix)
	}
	if opts.ZoneLatency > 0 && feat.Supports(devFlagZoneLatency) {
		c.ZoneLatency = opts.ZoneLatency
	}
	if len(c.MetricsURLs) == 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("strata dev did not print metrics URLs for its %d brokers: traffic figures n/a (pass --metrics)", len(rl.Bootstrap)))
	}
	return c, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lineWriter calls each for every complete line written to it.
type lineWriter struct {
	buf  []byte
	each func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.each(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// freePort is a port for a process started next to bind (freeport: below
// the ephemeral range, where no client's connect takes it meanwhile).
func freePort() (int, error) { return freeport.Port() }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
