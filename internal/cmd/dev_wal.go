package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/server"
	"github.com/strata-dev/strata/internal/testutil/s3server"
)

// devBucketPrefix + zone names the dev cluster's fast buckets.
const devBucketPrefix = "strata-wal-"

// devTierBucket is the dev cluster's regional slow-tier bucket.
const devTierBucket = "strata-tier"

// versitygwModule is what dev builds when no gateway binary is given.
const versitygwModule = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// devWAL is the WAL side of `strata dev`: a local Versity Gateway with one
// bucket per zone, and the bucket wrappers every broker gets.
type devWAL struct {
	srv        *s3server.Server
	bucketsDir string
	zones      []string
	putLatency time.Duration
	getLatency time.Duration
	out        io.Writer
	exe        string // how to call this binary in a printed command
	tier       bool   // the slow tier is on, in bucket devTierBucket

	mu       sync.Mutex
	kept     string // bucket + "/" + key of the object kept for inspection
	stopOnce sync.Once
	stop     func()
}

// startDevWAL starts a Versity Gateway with one bucket per zone and turns
// WAL replication on in base (each broker's bucket is set by runDev).
func startDevWAL(cmd *cobra.Command, base *server.Config, root, s3Dir string, zones []string, putLatency, getLatency time.Duration, log logr.Logger) (*devWAL, error) {
	bin, err := versitygwBinary(cmd, log)
	if err != nil {
		return nil, err
	}
	if err := os.Setenv(s3server.EnvBinary, bin); err != nil {
		return nil, err
	}
	if s3Dir == "" {
		s3Dir = filepath.Join(root, "s3")
	}
	tb := &devTB{dir: s3Dir, log: log.WithName("s3")}
	w := &devWAL{bucketsDir: filepath.Join(tb.dir, "buckets"), zones: zones, putLatency: putLatency, getLatency: getLatency,
		out: cmd.OutOrStdout(), exe: selfCommand()}
	w.stop = func() {
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}
	var buckets []string
	for _, z := range zones {
		buckets = append(buckets, devBucketPrefix+z)
	}
	buckets = append(buckets, devTierBucket)
	if w.srv, err = tb.start(buckets); err != nil {
		w.Stop()
		return nil, err
	}
	log.Info("WAL buckets ready", "endpoint", w.srv.Endpoint, "buckets", buckets, "dir", w.bucketsDir,
		"putLatency", putLatency, "getLatency", getLatency)
	wc := &base.Cluster.WAL
	wc.Enable = true
	wc.Bucket.Region, wc.Bucket.Endpoint, wc.Bucket.ForcePathStyle = w.srv.Region, w.srv.Endpoint, true
	wc.Bucket.Credentials = &objstore.StaticCredentials{AccessKeyID: w.srv.AccessKey, SecretAccessKey: w.srv.SecretKey}
	// The slow tier on the same server: every topic but compacted ones is
	// tiered (docs/tiered-storage.md); --set overrides.
	tc := &base.Tier
	if !tc.Enable && tc.Bucket.Bucket == "" {
		tc.Enable = true
		tc.Bucket = objstore.Config{Bucket: devTierBucket, Region: w.srv.Region, Endpoint: w.srv.Endpoint, ForcePathStyle: true,
			Credentials: wc.Bucket.Credentials}
		if tc.TaskInterval == 0 {
			tc.TaskInterval = 10 * time.Second
		}
		if base.Broker.LogDefaults == nil {
			base.Broker.LogDefaults = map[string]string{}
		}
		if _, ok := base.Broker.LogDefaults["log.remote.storage.enable"]; !ok {
			base.Broker.LogDefaults["log.remote.storage.enable"] = "true"
		}
		w.tier = true
	}
	return w, nil
}

// Stop stops the gateway.
func (w *devWAL) Stop() { w.stopOnce.Do(w.stop) }

// printWhere tells the user where the buckets live and how to read them.
func (w *devWAL) printWhere() {
	fmt.Fprintf(w.out, "strata dev: WAL replication through per-zone buckets on a local Versity Gateway (S3 API)\n")
	fmt.Fprintf(w.out, "  endpoint     %s (region %s, path-style)\n", w.srv.Endpoint, w.srv.Region)
	fmt.Fprintf(w.out, "  credentials  AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n", w.srv.AccessKey, w.srv.SecretKey)
	for _, z := range w.zones {
		b := devBucketPrefix + z
		fmt.Fprintf(w.out, "  zone %-7s s3://%s (files under %s)\n", z, b, filepath.Join(w.bucketsDir, b))
	}
	fmt.Fprintf(w.out, "  objects      wal/<cluster>/<zone>/<broker>/<incarnation>/<seq>, deleted once every follower has them;\n")
	fmt.Fprintf(w.out, "               the first one is kept until exit and a `wal inspect` command for it is printed\n")
	if w.tier {
		fmt.Fprintf(w.out, "  slow tier    s3://%s (files under %s): closed segments of every non-compacted topic;\n", devTierBucket, filepath.Join(w.bucketsDir, devTierBucket))
		fmt.Fprintf(w.out, "               list a partition's manifest with: AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s %s tier inspect --endpoint %s s3://%s <topic> <partition>\n",
			w.srv.AccessKey, w.srv.SecretKey, w.exe, w.srv.Endpoint, devTierBucket)
	}
}

// inspectCommand is a ready-to-paste command printing the object's table.
func (w *devWAL) inspectCommand(bucket, key string) string {
	return fmt.Sprintf("AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s %s wal inspect --endpoint %s --region %s s3://%s/%s",
		w.srv.AccessKey, w.srv.SecretKey, w.exe, w.srv.Endpoint, w.srv.Region, bucket, key)
}

// uploaded is called after every successful PUT: the first WAL object is
// kept for inspection and announced.
func (w *devWAL) uploaded(bucket, key string) {
	if !strings.HasPrefix(key, "wal/") {
		return
	}
	w.mu.Lock()
	first := w.kept == ""
	if first {
		w.kept = bucket + "/" + key
	}
	w.mu.Unlock()
	if first {
		fmt.Fprintf(w.out, "strata dev: first WAL object s3://%s/%s (kept until exit; file %s); inspect it with:\n  %s\n",
			bucket, key, filepath.Join(w.bucketsDir, bucket, filepath.FromSlash(key)), w.inspectCommand(bucket, key))
	}
}

func (w *devWAL) isKept(bucket, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kept == bucket+"/"+key
}

// wrapper returns the WrapStore of a broker in zone: the emulated S3
// latencies as a floor (each PUT / GET takes at least that long, the
// gateway's own time included: objstore.Faulty's latency floor), plus one
// zone round trip (2 × zoneLatency) added to every GET from another
// zone's bucket, and the keeping of the first object.
func (w *devWAL) wrapper(zone string, zoneLatency time.Duration, zs *zoneStats) func(objstore.Store) objstore.Store {
	return func(st objstore.Store) objstore.Store {
		inner := st
		if w.putLatency != 0 || w.getLatency != 0 {
			f := objstore.NewFaulty(st)
			f.SetLatencyFloor(true)
			f.SetPutLatency(w.putLatency)
			f.SetGetLatency(w.getLatency)
			inner = f
		}
		ds := &devStore{Store: inner, w: w}
		if st.Bucket() != devBucketPrefix+zone && zoneLatency > 0 {
			ds.crossZoneDelay = 2 * zoneLatency
			if zs != nil {
				ds.crossZoneGets = &zs.objectGets
			}
		}
		return ds
	}
}

// devStore reports uploads to devWAL and skips the deletion of the kept
// object.
type devStore struct {
	objstore.Store
	w *devWAL
	// crossZoneDelay is waited before each GET of another zone's bucket
	// (the network round trip, on top of the store's own latency).
	crossZoneDelay time.Duration
	crossZoneGets  interface{ Add(int64) int64 }
}

func (s *devStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.Store.Put(ctx, key, data); err != nil {
		return err
	}
	s.w.uploaded(s.Bucket(), key)
	return nil
}

func (s *devStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if s.crossZoneDelay > 0 {
		if s.crossZoneGets != nil {
			s.crossZoneGets.Add(1)
		}
		t := time.NewTimer(s.crossZoneDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key, offset, length)
}

func (s *devStore) Delete(ctx context.Context, key string) error {
	if s.w.isKept(s.Bucket(), key) {
		return nil
	}
	return s.Store.Delete(ctx, key)
}

// DeleteMany keeps the inner store's batched deletion.
func (s *devStore) DeleteMany(ctx context.Context, keys []string) error {
	rest := make([]string, 0, len(keys))
	for _, k := range keys {
		if !s.w.isKept(s.Bucket(), k) {
			rest = append(rest, k)
		}
	}
	return objstore.DeleteAll(ctx, s.Store, rest)
}

// selfCommand is how a printed command calls this binary: "strata" when
// that is what PATH finds, else the executable's path (under `go run` a
// temporary file that exists while dev runs).
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "strata"
	}
	if p, err := exec.LookPath("strata"); err == nil {
		if a, err1 := filepath.EvalSymlinks(p); err1 == nil {
			if b, err2 := filepath.EvalSymlinks(exe); err2 == nil && a == b {
				return "strata"
			}
		}
	}
	return exe
}

// versitygwBinary finds the gateway: $STRATA_VERSITYGW, else the cache
// directory, else it is built there with go install.
func versitygwBinary(cmd *cobra.Command, log logr.Logger) (string, error) {
	if bin := os.Getenv(s3server.EnvBinary); bin != "" {
		if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s is not an executable: run `make s3-server` (or unset %s to build it into the user cache), or use --replication classic",
				s3server.EnvBinary, bin, s3server.EnvBinary)
		}
		return bin, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no %s and no cache directory: %w", s3server.EnvBinary, err)
	}
	dir := filepath.Join(cache, "strata", "versitygw-v1.8.0")
	bin := filepath.Join(dir, "versitygw")
	if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
		return bin, nil
	}
	log.Info("building Versity Gateway (once)", "module", versitygwModule, "into", dir)
	gi := exec.CommandContext(cmd.Context(), "go", "install", versitygwModule)
	gi.Env = append(os.Environ(), "GOBIN="+dir)
	gi.Stdout, gi.Stderr = os.Stderr, os.Stderr
	if err := gi.Run(); err != nil {
		return "", fmt.Errorf("build Versity Gateway (set %s to a versitygw binary instead, or use --replication classic): %w", s3server.EnvBinary, err)
	}
	return bin, nil
}

// devTB runs internal/testutil/s3server outside a test: Fatalf becomes
// an error returned by start, cleanups run when dev exits.
type devTB struct {
	dir      string
	log      logr.Logger
	cleanups []func()
	n        int
}

type devFatal struct{ err error }

func (d *devTB) Helper()                           {}
func (d *devTB) Logf(format string, args ...any)   { d.log.V(1).Info(fmt.Sprintf(format, args...)) }
func (d *devTB) Fatalf(format string, args ...any) { panic(devFatal{fmt.Errorf(format, args...)}) }
func (d *devTB) Cleanup(f func())                  { d.cleanups = append(d.cleanups, f) }
func (d *devTB) TempDir() string {
	d.n++
	dir := d.dir
	if d.n > 1 {
		dir = filepath.Join(d.dir, strconv.Itoa(d.n))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.Fatalf("%v", err)
	}
	return dir
}

func (d *devTB) start(buckets []string) (srv *s3server.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(devFatal)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	// 64 KiB I/O buffers instead of Versity's 1 MiB per call: ~10% less
	// time per PUT+GET; metadata in extended attributes where the file
	// system has them instead of sidecar files: half the gateway's CPU
	// per request (broker/objstore BenchmarkS3PutGet). On a small machine
	// the gateway's CPU, not the brokers', bounds the WAL object rate.
	xattr := os.MkdirAll(d.dir, 0o755) == nil && s3server.XAttrSupported(d.dir)
	opts := s3server.Options{Args: []string{"--io-buffer-size", "65536"}, XAttrMeta: xattr}
	// A kept directory (--keep-dir) restarts with the credentials its
	// buckets were created with; a new directory gets random ones, saved
	// for the next start.
	credsFile := filepath.Join(d.dir, devCredentialsFile)
	if raw, err := os.ReadFile(credsFile); err == nil {
		f := strings.Fields(string(raw))
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: want an access key and a secret key, one per line", credsFile)
		}
		opts.AccessKey, opts.SecretKey = f[0], f[1]
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	srv = s3server.StartWith(d, opts, buckets...)
	if opts.AccessKey == "" {
		if err := os.WriteFile(credsFile, []byte(srv.AccessKey+"\n"+srv.SecretKey+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("save the gateway's credentials for --keep-dir: %w", err)
		}
	}
	return srv, nil
}

// devCredentialsFile, in the gateway's directory, holds its root
// credentials so that a kept directory starts again with its buckets.
const devCredentialsFile = "credentials"
