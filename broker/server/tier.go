package server

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/tier"
)

// TierConfig is the slow tier (docs/tiered-storage.md): Kafka's
// remote.log.* keys where Kafka has one, Strata's tier.bucket.* for the
// regional bucket (the operator renders them from spec.tieredStorage).
type TierConfig struct {
	// Enable is remote.log.storage.system.enable.
	Enable bool
	// Bucket is tier.bucket.name, .region, .endpoint, .force.path.style;
	// credentials from STRATA_TIER_* (else the SDK's chain).
	Bucket objstore.Config
	// TaskInterval is remote.log.manager.task.interval.ms (default 30 s):
	// how often leaders upload and apply tier retention.
	TaskInterval time.Duration
	// CacheBytes is tier.read.cache.bytes (default 64 MiB) and ChunkBytes
	// tier.read.chunk.bytes (default 1 MiB): the remote read-ahead cache.
	CacheBytes, ChunkBytes int64
	// OrphanGrace is tier.orphan.grace.ms (default 1 h; 0 turns the sweep
	// off): objects no manifest names are deleted once this old.
	OrphanGrace time.Duration
	// OrphanGraceSet: tier.orphan.grace.ms was given (0 is a value).
	OrphanGraceSet bool
	// DisableHydration is tier.hydration.enable=false (default true):
	// followers of tiered partitions that are behind the tier's end copy
	// its history from the leader instead of from the bucket (Kafka's
	// behaviour without hydration; kept for comparisons and as an escape
	// hatch).
	DisableHydration bool
	// Store replaces the S3 client (tests inject faults).
	Store objstore.Store
}

// TierEnvPrefix names the variables of the tier bucket's credentials, as
// the operator sets them from spec.tieredStorage's Secret.
const TierEnvPrefix = "STRATA_TIER"

var tierKeys = []string{
	"remote.log.storage.system.enable", "remote.log.manager.task.interval.ms",
	"tier.bucket.name", "tier.bucket.region", "tier.bucket.endpoint", "tier.bucket.force.path.style",
	"tier.bucket.credentials.source", "tier.bucket.credentials.secret",
	"tier.read.cache.bytes", "tier.read.chunk.bytes", "tier.orphan.grace.ms", "tier.hydration.enable",
}

func init() {
	for _, k := range tierKeys {
		processKeys[k] = true
	}
}

// applyTierSetting applies one slow-tier key.
func applyTierSetting(tc *TierConfig, k, v string) (known bool, err error) {
	switch k {
	case "remote.log.storage.system.enable", "tier.bucket.force.path.style", "tier.hydration.enable":
		on, err := strconv.ParseBool(v)
		if err != nil {
			return true, err
		}
		switch k {
		case "tier.bucket.force.path.style":
			tc.Bucket.ForcePathStyle = on
		case "tier.hydration.enable":
			tc.DisableHydration = !on
		default:
			tc.Enable = on
		}
	case "remote.log.manager.task.interval.ms":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return true, fmt.Errorf("want a positive number of milliseconds")
		}
		tc.TaskInterval = time.Duration(n) * time.Millisecond
	case "tier.read.cache.bytes", "tier.read.chunk.bytes":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 {
			return true, fmt.Errorf("want at least 1024 bytes")
		}
		if k == "tier.read.cache.bytes" {
			tc.CacheBytes = n
		} else {
			tc.ChunkBytes = n
		}
	case "tier.orphan.grace.ms":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return true, fmt.Errorf("want milliseconds, 0 (no sweep) or more")
		}
		tc.OrphanGrace, tc.OrphanGraceSet = time.Duration(n)*time.Millisecond, true
	case "tier.bucket.name":
		tc.Bucket.Bucket = v
	case "tier.bucket.region":
		tc.Bucket.Region = v
	case "tier.bucket.endpoint":
		tc.Bucket.Endpoint = v
	case "tier.bucket.credentials.source":
		return true, checkCredentialsSource(v)
	case "tier.bucket.credentials.secret":
		// Informational: the Secret the operator used.
	default:
		return false, nil
	}
	return true, nil
}

// startTier opens the tier bucket and gives it to the broker; nil without
// remote.log.storage.system.enable.
func (s *Server) startTier(ctx context.Context, b *broker.Broker) (*broker.TierManager, error) {
	tc := s.cfg.Tier
	if !tc.Enable {
		return nil, nil
	}
	st := tc.Store
	if st == nil {
		bc := tc.Bucket
		if bc.Bucket == "" {
			return nil, fmt.Errorf("remote.log.storage.system.enable=true needs tier.bucket.name")
		}
		if bc.EnvPrefix == "" && bc.Credentials == nil && bc.CredentialsDir == "" {
			bc.EnvPrefix = TierEnvPrefix
		}
		// No strata_objstore_* observer: the operator's status.cost sums
		// those series as WAL (replication) requests; the tier has its own
		// strata_tier_* metrics.
		s3, err := objstore.NewS3(ctx, bc)
		if err != nil {
			return nil, fmt.Errorf("tier bucket: %w", err)
		}
		st = s3
	}
	cluster := s.cfg.Cluster.Name
	if cluster == "" {
		cluster = b.ClusterID()
	}
	t := tier.New(st, tier.Config{Cluster: cluster, CacheBytes: tc.CacheBytes, ChunkBytes: tc.ChunkBytes}, s.log.WithName("tier"))
	b.SetTier(t)
	m := broker.NewTierManager(b, tc.TaskInterval)
	if tc.OrphanGraceSet {
		m.SetOrphanGrace(tc.OrphanGrace)
	}
	s.metrics.Registry.MustRegister(newTierCollector(m, b.DiskUsage))
	s.log.Info("slow tier on", "bucket", st.Bucket(), "cluster", cluster, "taskInterval", tc.TaskInterval)
	return m, nil
}

// tierCollector exposes the slow tier's counters (docs/metrics.md).
type tierCollector struct {
	m *broker.TierManager
	// disk is Broker.DiskUsage of the data volume.
	disk func() (total, usable int64, err error)

	upBytes, upSegs, upErrs, lag, readBytes, readErrs, deleted, headroom, parts, failing, swept *prometheus.Desc
	hydBytes, hydSegs, hydErrs                                                                  *prometheus.Desc
}

func newTierCollector(m *broker.TierManager, disk func() (total, usable int64, err error)) *tierCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &tierCollector{m: m, disk: disk,
		upBytes:   d("strata_tier_uploaded_bytes_total", "Segment bytes uploaded to the slow tier."),
		upSegs:    d("strata_tier_uploaded_segments_total", "Segments uploaded to the slow tier."),
		upErrs:    d("strata_tier_upload_errors_total", "Upload rounds of a partition that failed (retried with backoff; the local segments stay)."),
		lag:       d("strata_tier_upload_lag_bytes", "Bytes of the tiered partitions this broker leads that are not in the slow tier yet (the active segments included)."),
		readBytes: d("strata_tier_remote_read_bytes_total", "Record bytes served from the slow tier (fetches below the local log start)."),
		readErrs:  d("strata_tier_remote_read_errors_total", "Remote reads that failed (answered KAFKA_STORAGE_ERROR)."),
		deleted:   d("strata_tier_deleted_segments_total", "Segments removed from the slow tier by retention and DeleteRecords."),
		headroom:  d("strata_tier_disk_headroom_bytes", "Free bytes of the data directory minus the upload lag: what the disk can still take if the slow tier stopped accepting uploads now (local segments are kept until uploaded)."),
		parts:     d("strata_tier_leader_partitions", "Tiered partitions this broker leads (uploads)."),
		failing:   d("strata_tier_upload_failing_partitions", "Tiered partitions this broker leads whose last upload failed (the bucket is unreachable or refuses; retried with backoff, the local segments stay)."),
		swept:     d("strata_tier_swept_objects_total", "Orphaned objects (named by no manifest, older than tier.orphan.grace.ms) deleted from the slow tier."),
		hydBytes:  d("strata_tier_hydrated_bytes_total", "Segment bytes follower replicas of this broker downloaded from the slow tier to hydrate (instead of fetching them from the leader)."),
		hydSegs:   d("strata_tier_hydrated_segments_total", "Segments follower replicas of this broker downloaded from the slow tier to hydrate."),
		hydErrs:   d("strata_tier_hydration_errors_total", "Segment downloads for hydration that failed or did not match the manifest (never installed; retried, then the leader serves the rest)."),
	}
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.upBytes, c.upSegs, c.upErrs, c.lag, c.readBytes, c.readErrs, c.deleted, c.headroom, c.parts, c.failing, c.swept, c.hydBytes, c.hydSegs, c.hydErrs} {
		ch <- d
	}
}

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(c.upBytes, s.UploadedBytes)
	counter(c.upSegs, s.UploadedSegments)
	counter(c.upErrs, s.UploadErrors)
	counter(c.readBytes, s.RemoteReadBytes)
	counter(c.readErrs, s.RemoteReadErrors)
	counter(c.deleted, s.DeletedSegments)
	counter(c.swept, s.SweptObjects)
	gauge(c.failing, int64(s.FailingPartitions))
	counter(c.hydBytes, s.HydratedBytes)
	counter(c.hydSegs, s.HydratedSegments)
	counter(c.hydErrs, s.HydrationErrors)
	gauge(c.lag, s.LagBytes)
	gauge(c.parts, int64(s.Partitions))
	if _, usable, err := c.disk(); err == nil {
		gauge(c.headroom, usable-s.LagBytes)
	}
}
