package s3server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strata-dev/strata/internal/childproc"
	"github.com/strata-dev/strata/internal/freeport"
)

// EnvBinary names the environment variable holding the versitygw path.
const EnvBinary = "STRATA_VERSITYGW"

// Region is the region the gateway reports.
const Region = "us-east-1"

// startTimeout bounds how long Start waits for the gateway to answer.
const startTimeout = 30 * time.Second

// TB is the part of testing.TB the server needs; *testing.T, *testing.B
// and Ginkgo's GinkgoT() all satisfy it.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Server is a running (or stopped) Versity Gateway.
type Server struct {
	// Endpoint is the base URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	// Region the gateway answers for.
	Region string
	// AccessKey and SecretKey are the root credentials.
	AccessKey string
	SecretKey string

	t       TB
	bin     string
	dataDir string
	metaDir string
	logPath string
	addr    string
	args    []string
	xattr   bool

	mu   sync.Mutex
	cmd  *exec.Cmd
	done <-chan struct{}
}

// Binary returns the versitygw path from STRATA_VERSITYGW, or an error that
// tells the user how to get it.
func Binary() (string, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		return "", fmt.Errorf("%s is not set: run `make test` (or `make test-deps`) to build Versity Gateway", EnvBinary)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s=%s is not an executable: run `make test` (or `make test-deps`) to build Versity Gateway", EnvBinary, bin)
	}
	return bin, nil
}

// Start launches a gateway on a random loopback port with a fresh data
// directory, waits until it answers S3 requests, creates the given
// buckets, and registers Stop with t.Cleanup. It fails the test when the
// binary is missing or the gateway does not come up.
func Start(t TB, buckets ...string) *Server {
	t.Helper()
	return StartWith(t, Options{}, buckets...)
}

// Options tune a gateway started by StartWith.
type Options struct {
	// Args are extra options of the posix backend (e.g. "--nometa").
	Args []string
	// AccessKey and SecretKey, when set, are the root credentials instead
	// of random ones: a gateway restarted on a kept directory must answer
	// to the credentials its buckets were created with.
	AccessKey, SecretKey string
	// XAttrMeta keeps object metadata in extended attributes instead of
	// a sidecar directory: cheaper per request, but the file system must
	// support user xattrs.
	XAttrMeta bool
}

// StartWith is Start with options.
func StartWith(t TB, opts Options, buckets ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatalf("s3server: %v", err)
	}
	root := t.TempDir()
	s := &Server{
		Region:    Region,
		AccessKey: cmp.Or(opts.AccessKey, "strata"+randomHex(4)),
		SecretKey: cmp.Or(opts.SecretKey, randomHex(16)),
		t:         t,
		bin:       bin,
		dataDir:   filepath.Join(root, "buckets"),
		metaDir:   filepath.Join(root, "meta"),
		args:      opts.Args,
		xattr:     opts.XAttrMeta,
		logPath:   filepath.Join(root, "versitygw.log"),
	}
	if err := os.MkdirAll(s.dataDir, 0o755); err != nil {
		t.Fatalf("s3server: %v", err)
	}
	t.Cleanup(s.Stop)

	// A free port is found by binding :0 and releasing it; another process
	// may grab it in between, so a failed start is retried on a new port.
	var startErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("s3server: %v", err)
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.Endpoint = "http://" + s.addr
		if startErr = s.start(); startErr == nil {
			break
		}
	}
	if startErr != nil {
		t.Fatalf("s3server: %v", startErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, b := range buckets {
		if err := s.CreateBucket(ctx, b); err != nil {
			t.Fatalf("s3server: %v", err)
		}
	}
	return s
}

// Client returns an S3 client for the gateway (path-style addressing, root
// credentials, no retries so that faults surface at once).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		Retryer:      aws.NopRetryer{},
	})
}

// CreateBucket creates a bucket; one that already exists and answers to
// the gateway's credentials (a gateway restarted on its directory) is kept
// as it is, with its objects.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	client := s.Client()
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); err == nil {
		return nil
	}
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %q: %w", name, err)
	}
	return nil
}

// Stop terminates the gateway; data stays for a later Restart. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pid returns the gateway's process ID, 0 when it is stopped.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Restart stops the gateway if running and starts it again on the same
// port with the same data, so clients keep their endpoint.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("s3server: restart: %v", err)
	}
}

func (s *Server) start() error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	args := []string{
		"--port", s.addr,
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--quiet",
		// The gateway closes every connection after one request unless
		// told otherwise; a new TCP connection per PUT/GET cost the
		// brokers ~10 % of their CPU in WAL bench runs.
		"--keep-alive",
		"posix",
	}
	if !s.xattr {
		// Metadata in a sidecar directory works on every file system,
		// including those without user extended attributes.
		args = append(args, "--sidecar", s.metaDir)
	}
	args = append(append(args, s.args...), s.dataDir)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Keep the gateway from inheriting ambient configuration.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(s.dataDir)}
	if err := os.MkdirAll(s.metaDir, 0o755); err != nil {
		logFile.Close()
		return fmt.Errorf("sidecar dir: %w", err)
	}
	// The gateway dies with this process, even when it is SIGKILLed or a
	// test binary panics on its timeout and runs no Cleanup.
	done, err := childproc.Start(cmd, syscall.SIGKILL)
	// The child has its own descriptor of the log.
	logFile.Close()
	if err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	if err := s.waitReady(done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("versitygw on %s did not come up: %w\n--- versitygw log ---\n%s", s.addr, err, s.logTail())
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// waitReady polls ListBuckets until it succeeds, the process exits, or the
// start timeout passes.
func (s *Server) waitReady(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := s.Client()
	var lastErr error
	for {
		reqCtx, reqCancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.ListBuckets(reqCtx, &s3.ListBucketsInput{})
		reqCancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-exited:
			return errors.New("process exited")
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s: %w", startTimeout, lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.TrimSpace(b))
}

// freePort is a port for a process started next to bind (freeport: below
// the ephemeral range, where no client's connect takes it meanwhile).
func freePort() (int, error) { return freeport.Port() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CPUTime returns the CPU time (user + system) the running gateway process
// has used, from /proc (Linux); 0 when it is not running or /proc is not
// readable. Benchmarks report it per request.
func (s *Server) CPUTime() time.Duration {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in ")".
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}
