package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/strata-dev/strata/broker/cost"
)

// Mode names.
const (
	// ModeExternal is the single mode of a run against --bootstrap.
	ModeExternal = "external"
	// ModeClassic is an embedded cluster replicating broker to broker.
	ModeClassic = "classic"
	// ModeWAL is an embedded cluster replicating through per-zone buckets.
	ModeWAL = "wal"
	// SecuritySuffix after a mode (classic+sasl_ssl, wal+sasl_ssl) runs
	// the cluster with `strata dev --security`: every client and broker
	// connection is TLS with SCRAM-SHA-512.
	SecuritySuffix = "+sasl_ssl"
	// ZoneLocalSuffix after a wal mode (wal+zonelocal, wal+auto+zonelocal)
	// turns on zone-local produce (wal.zonelocal.produce.enable): with
	// --client-zones the producers' batches go to their own zone's broker
	// and reach other zones' leaders through that zone's bucket.
	ZoneLocalSuffix = "+zonelocal"
)

// ZoneLocal says whether a mode asks for zone-local produce.
func ZoneLocal(mode string) bool {
	return strings.HasSuffix(strings.TrimSuffix(mode, SecuritySuffix), ZoneLocalSuffix)
}

// S3LatencyFloor is how strata dev applies the S3 latencies: each call
// takes at least that long, the local server's own time included
// (objstore.Faulty's latency floor).
const S3LatencyFloor = "floor"

// ClusterOptions are passed to a ClusterStarter for every mode.
type ClusterOptions struct {
	// S3PutLatency and S3GetLatency are injected in front of the object
	// store (WAL mode), emulating S3 Express One Zone.
	S3PutLatency, S3GetLatency time.Duration
	// ZoneLatency is the one-way delay injected on each direction of
	// inter-zone replica connections (and, in WAL mode, one round trip on
	// each GET from another zone's bucket); clients get it on their
	// connections to brokers of other zones.
	ZoneLatency time.Duration
	// BrokerConfig are broker config key=value pairs every embedded
	// cluster gets (strata dev --set), in every mode: e.g. a WAL tuning
	// compared with the default in two runs. A mode's own wal.policy comes
	// after them and wins.
	BrokerConfig []string
	// StoreDir (wal modes): the local object store keeps its data in a
	// new directory under this one, removed with the cluster (strata dev
	// --s3-dir); empty: in the cluster's data directory. The bench puts
	// it on a tmpfs (DefaultStoreDir): an S3 service's storage does not
	// run on the brokers' machine, but a local gateway's file system
	// work (inode creation, journal commits, writeback) does, in kernel
	// threads that no pinning keeps off the brokers' CPUs.
	StoreDir string
	// GoMaxProcs, when set, is the GOMAXPROCS of the embedded cluster's
	// process (Run sets it: one scheduler P per broker and CPU, see
	// brokerProcs).
	GoMaxProcs string
}

// DefaultStoreDir is where wal modes keep the object store's data when
// it is a tmpfs (StoreTmpfs).
const DefaultStoreDir = "/dev/shm"

// StoreTmpfs returns DefaultStoreDir if it is a tmpfs, else "" and why not.
func StoreTmpfs() (dir, reason string) {
	if isTmpfs(DefaultStoreDir) {
		return DefaultStoreDir, ""
	}
	return "", DefaultStoreDir + " is not a tmpfs here: the object store's data stays on disk"
}

// Cluster is a running cluster a mode is measured on.
type Cluster struct {
	// Bootstrap addresses (host:port).
	Bootstrap []string
	// MetricsURLs are the brokers' /metrics URLs, one per broker; empty
	// when unknown (traffic figures are then n/a).
	MetricsURLs []string
	// Notes tell the reader what the cluster could not do (e.g. latency
	// injection not supported yet); they are printed with the report.
	Notes []string
	// ZoneLatency is the inter-zone latency the cluster applies (0: none,
	// or the starter could not apply the requested one); the load's
	// clients get the same on their cross-zone connections.
	ZoneLatency time.Duration
	// Stop stops the cluster; nil for external clusters.
	Stop func(ctx context.Context) error
	// Security is how clients authenticate (nil: PLAINTEXT).
	Security *ClientSecurity
	// PIDs are the broker processes (strata dev: one process with every
	// broker and the embedded etcd); their children (the object store)
	// are not brokers. Empty for external clusters: no CPU figures, no
	// pinning.
	PIDs []int
}

// ClientSecurity is a SASL_SSL cluster's client settings, as `strata dev
// --security` prints them.
type ClientSecurity struct {
	CAFile, Mechanism, User, Password string
}

// BaseMode returns the replication mode of a mode name and whether it
// asks for SASL_SSL (the SecuritySuffix).
func BaseMode(mode string) (base string, secure bool) {
	base, secure = strings.CutSuffix(mode, SecuritySuffix)
	base, _ = WALPolicy(base)
	return base, secure
}

// DefaultWALPolicy is the broker's default wal.policy, which plain "wal"
// runs (strata dev's own default is latency).
const DefaultWALPolicy = string(cost.DefaultPolicy)

// WALPolicy splits a WAL policy suffix off a mode: "wal+latency",
// "wal+cost" and "wal+auto" run the wal mode with that wal.policy (plain
// "wal" runs the broker's default, auto), so one run compares them.
func WALPolicy(mode string) (base, policy string) {
	mode = strings.TrimSuffix(mode, ZoneLocalSuffix)
	for _, p := range []string{"latency", "cost", "auto"} {
		if b, ok := strings.CutSuffix(mode, "+"+p); ok {
			return b, p
		}
	}
	return mode, ""
}

// ClusterStarter starts an embedded cluster for a mode.
type ClusterStarter interface {
	Start(ctx context.Context, mode string, opts ClusterOptions) (*Cluster, error)
}

// ModeChecker is implemented by starters that can tell, before any
// cluster starts, whether they can run a mode; Run checks every mode
// first so that an unsupported second mode does not fail after the first
// was measured.
type ModeChecker interface {
	CheckMode(ctx context.Context, mode string, opts ClusterOptions) error
}

// ValidateModes checks a --modes list: known names, no duplicates.
func ValidateModes(modes []string) error {
	if len(modes) == 0 {
		return fmt.Errorf("no mode given: want --modes classic,wal (or a subset) or --bootstrap")
	}
	seen := map[string]bool{}
	for _, m := range modes {
		switch base, _ := BaseMode(m); base {
		case ModeClassic, ModeWAL:
		default:
			return fmt.Errorf("mode %q: want classic or wal (wal+latency, wal+cost, wal+auto for a wal.policy; then %s for zone-local produce), optionally with %s", m, ZoneLocalSuffix, SecuritySuffix)
		}
		if base, _ := BaseMode(m); ZoneLocal(m) && base != ModeWAL {
			return fmt.Errorf("mode %q: zone-local produce (%s) needs the wal mode", m, ZoneLocalSuffix)
		}
		if b, p := WALPolicy(strings.TrimSuffix(m, SecuritySuffix)); p != "" && b != ModeWAL {
			return fmt.Errorf("mode %q: a wal.policy suffix (+%s) needs the wal mode", m, p)
		}
		if seen[m] {
			return fmt.Errorf("mode %q given twice", m)
		}
		seen[m] = true
	}
	return nil
}
