package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/log/faultfs"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/replica"
	"github.com/strata-dev/strata/broker/tier"
)

// Config is the static configuration of one broker.
type Config struct {
	// NodeID is broker.id.
	NodeID int32
	// Host and Port are advertised to clients in Metadata.
	Host string
	Port int32
	// Listeners are the advertised addresses per listener name
	// (advertised.listeners) of a standalone broker; a client is told the
	// address of the listener it connected on (BrokersOn). Empty: Host and
	// Port for every listener.
	Listeners []AdvertisedListener
	// Rack is broker.rack (the zone).
	Rack string
	// DataDir holds the metadata file and the partition logs.
	DataDir string
	// AutoCreateTopics is auto.create.topics.enable: Metadata requests that
	// allow it create missing topics with DefaultPartitions partitions.
	AutoCreateTopics bool
	// DefaultPartitions is num.partitions.
	DefaultPartitions int32
	// LogDefaults holds broker-level defaults of topic configs, keyed by the
	// broker config name (log.retention.ms, log.segment.bytes, ...).
	LogDefaults map[string]string
	// ProducerIDExpiration is producer.id.expiration.ms: idempotent
	// producers idle this long are forgotten by retention (0: the log's
	// default, 24 h).
	ProducerIDExpiration time.Duration
	// Clustered: topics and partition roles come from the cluster
	// metadata (EnableCluster), not from strata-meta.json.
	Clustered bool
	// DefaultReplicationFactor is default.replication.factor (1).
	DefaultReplicationFactor int16
	// LeaderPlacementPolicy is leader.placement.policy: PolicyBalanced
	// ("" too) spreads preferred leaders over zones; PolicyZone pins them to
	// LogDefaults["leader.placement.zone"], the default of the topic config
	// of that name (required with Zone, refused without).
	LeaderPlacementPolicy string
	// MaxPartitionsPerTopic is max.partitions.per.topic and MaxPartitions
	// max.partitions, the cluster-wide partition count (limits.go; 0 means
	// the default).
	MaxPartitionsPerTopic int32
	MaxPartitions         int32
	// FDHeadroom returns how many more file descriptors the process may
	// open while keeping its readiness reserve free (RLIMIT_NOFILE minus
	// open minus reserve); ok false: unknown, not checked. New partitions
	// are admitted against it (limits.go checkFDBudget).
	FDHeadroom func() (free int64, ok bool)
	// RemoteStorageSystem is remote.log.storage.system.enable: topics may
	// set remote.storage.enable (the slow tier is given with SetTier).
	RemoteStorageSystem bool
}

// Values of leader.placement.policy.
const (
	PolicyBalanced = "Balanced"
	PolicyZone     = "Zone"
)

// LeaderZone is the cluster default of the leader.placement.zone topic
// config: the zone of policy Zone, "" for Balanced.
func (c Config) LeaderZone() string { return c.LogDefaults["leader.placement.zone"] }

// checkLeaderPlacement refuses a policy without its zone and a zone
// without its policy: either would silently place leaders other than the
// operator or user meant.
func (c Config) checkLeaderPlacement() error {
	zone := c.LeaderZone()
	switch c.LeaderPlacementPolicy {
	case "", PolicyBalanced:
		if zone != "" {
			return fmt.Errorf("broker: leader.placement.zone=%s is set but leader.placement.policy is Balanced: set leader.placement.policy=Zone to pin leaders to %s, or remove leader.placement.zone", zone, zone)
		}
	case PolicyZone:
		if zone == "" {
			return errors.New("broker: leader.placement.policy=Zone needs leader.placement.zone (the zone that holds the preferred leaders)")
		}
	default:
		return fmt.Errorf("broker: leader.placement.policy=%q: want %s or %s", c.LeaderPlacementPolicy, PolicyBalanced, PolicyZone)
	}
	return nil
}

// DefaultConfig returns a config with Kafka's defaults for a single broker.
func DefaultConfig() Config {
	return Config{NodeID: 0, Host: "127.0.0.1", Port: 9092, AutoCreateTopics: true, DefaultPartitions: 1, DefaultReplicationFactor: 1}
}

// BrokerConfigKeys are the broker-level topic defaults accepted in
// Config.LogDefaults.
func BrokerConfigKeys() []string {
	keys := make([]string, 0, len(topicConfigs))
	for _, tc := range topicConfigs {
		if tc.brokerKey != "" {
			keys = append(keys, tc.brokerKey)
		}
	}
	sort.Strings(keys)
	return keys
}

// Broker is the state of one broker. See the package comment for locking.
type Broker struct {
	cfg Config
	log logr.Logger

	// dynTopicDefaults: the dynamic values of topic configs' broker
	// defaults on this broker (dynconfig.go), by broker key, most
	// specific first; nil or empty when none is set.
	dynTopicDefaults atomic.Pointer[map[string][]ConfigSynonym]

	// txnMarkers counts WriteTxnMarkers outcomes (txn.go).
	txnMarkers TxnMarkerStats

	mu     sync.RWMutex
	meta   metaFile
	topics map[string]*Topic
	closed bool
	// nextPID is the next producer ID to hand out; IDs below
	// meta.NextProducerID are reserved.
	nextPID int64
	// lock holds an exclusive flock on <DataDir>/.lock while open.
	lock *os.File
	// cluster is set in cluster mode (EnableCluster), nil standalone.
	cluster *cluster
	// tier is the slow tier (SetTier), nil when off.
	tier *tier.Tier
	// fs is the file system the logs use: the operating system's, or the
	// test-only fault layer faultFS when STRATA_FAULTFS=1 (chaos runs).
	fs      log.FS
	faultFS *faultfs.FS
	// storageErr receives the first failed write or fsync of any log
	// (StorageFailure).
	storageErr  chan error
	storageOnce sync.Once
}

// lockDir takes an exclusive, non-blocking lock on the data directory so
// that two brokers never write the same logs (the lock goes away with the
// process, also on SIGKILL).
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: open data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: data dir %s is in use by another process: %w", dir, err)
	}
	return f, nil
}

// Topic is one topic. Its fields other than name and ID are guarded by
// Broker.mu. In cluster mode partitions this broker does not host are nil.
type Topic struct {
	Name       string
	ID         [16]byte
	partitions []*Partition
	configs    map[string]string
}

// Partition is one partition of a topic hosted by this broker: led by it
// when standalone, led or followed (Replica) in cluster mode.
type Partition struct {
	Topic string
	Index int32
	Log   *log.Log
	// Replica is the replication state in cluster mode, nil standalone.
	Replica *replica.Partition
	// maxMessageBytes caches max.message.bytes for Validate.
	maxMessageBytes atomic.Int64
	// minInsyncReplicas caches min.insync.replicas for acks=all.
	minInsyncReplicas atomic.Int32
	// tier is the partition's slow-tier handle while the broker's tier is
	// on (used when the topic is tiered: Tiered).
	tier atomic.Pointer[tier.Partition]
}

// metaFile is the persisted form of the broker's metadata.
type metaFile struct {
	Version        int         `json:"version"`
	ClusterID      string      `json:"clusterID"`
	NodeID         int32       `json:"nodeID"`
	NextProducerID int64       `json:"nextProducerID"`
	Topics         []metaTopic `json:"topics"`
}

type metaTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

const metaFileName = "strata-meta.json"

// producerIDBlock is how many producer IDs are reserved per metadata write.
const producerIDBlock = 1000

// Open opens (or initialises) the data directory and every partition log.
func Open(ctx context.Context, cfg Config, logger logr.Logger) (*Broker, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("broker: data directory not set")
	}
	for k, v := range cfg.LogDefaults {
		name, ok := topicNameForBrokerKey(k)
		if !ok {
			return nil, fmt.Errorf("broker: unknown broker config %q", k)
		}
		if err := ValidateTopicConfig(name, v); err != nil {
			return nil, fmt.Errorf("broker: %s: %w", k, err)
		}
	}
	if err := cfg.checkLeaderPlacement(); err != nil {
		return nil, err
	}
	// The defaults together, as a topic without overrides gets them
	// (log.cleaner.min.compaction.lag.ms above the max one, for one).
	if err := (&Broker{cfg: cfg}).checkTopicConfigs(nil); err != nil {
		return nil, fmt.Errorf("broker: topic config defaults: %w", err)
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = 1
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: create data dir: %w", err)
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, log: logger, topics: map[string]*Topic{}, lock: lock, fs: log.OSFS{}, storageErr: make(chan error, 1)}
	if faultfs.Enabled() {
		if b.faultFS, err = faultfs.New(cfg.DataDir); err != nil {
			lock.Close()
			return nil, fmt.Errorf("broker: %w", err)
		}
		b.fs = b.faultFS
		logger.Info("fault-injecting file system layer enabled (test only)", "env", faultfs.EnvVar)
	}
	if err := b.loadMeta(); err != nil {
		b.closeLogs()
		return nil, err
	}
	if b.meta.NodeID != cfg.NodeID {
		b.closeLogs()
		return nil, fmt.Errorf("broker: data dir %s belongs to node %d, not %d", cfg.DataDir, b.meta.NodeID, cfg.NodeID)
	}
	if cfg.Clustered {
		if len(b.meta.Topics) > 0 {
			b.closeLogs()
			return nil, fmt.Errorf("broker: data dir %s holds %d topics of a standalone broker; a cluster broker needs its own data dir", cfg.DataDir, len(b.meta.Topics))
		}
		// Partitions are opened as the cluster metadata assigns them.
		b.log.Info("broker state opened (cluster mode)", "dataDir", cfg.DataDir)
		return b, nil
	}
	for _, mt := range b.meta.Topics {
		if err := ctx.Err(); err != nil {
			b.closeLogs()
			return nil, err
		}
		t := &Topic{Name: mt.Name, configs: mt.Configs}
		if t.configs == nil {
			t.configs = map[string]string{}
		}
		id, err := base64.RawURLEncoding.DecodeString(mt.ID)
		if err != nil || len(id) != 16 {
			b.closeLogs()
			return nil, fmt.Errorf("broker: %s: topic %q has a bad ID %q", metaFileName, mt.Name, mt.ID)
		}
		copy(t.ID[:], id)
		for i := range mt.Partitions {
			p, err := b.openPartition(t, i)
			if err != nil {
				b.closeLogs()
				return nil, err
			}
			t.partitions = append(t.partitions, p)
		}
		b.topics[t.Name] = t
	}
	if err := b.removeStrayPartitions(); err != nil {
		b.closeLogs()
		return nil, err
	}
	b.log.Info("broker state opened", "dataDir", cfg.DataDir, "clusterID", b.meta.ClusterID, "topics", len(b.topics))
	return b, nil
}

func topicNameForBrokerKey(key string) (string, bool) {
	for _, tc := range topicConfigs {
		if tc.brokerKey != "" && tc.brokerKey == key {
			return tc.name, true
		}
	}
	return "", false
}

func (b *Broker) partitionDir(topic string, p int32) string {
	return filepath.Join(b.cfg.DataDir, topic+"-"+strconv.Itoa(int(p)))
}

// StorageFailure returns a channel that receives the first write or fsync
// of a log that failed (disk full, I/O error). The server stops the broker
// then (fail-stop): Kafka takes a failed log directory offline (KIP-112)
// and stops a broker that has none left; a broker has one data directory.
// Until it stopped, the failed log refuses what it could not write and
// nothing is acknowledged that is not durable (log.FlushTo).
func (b *Broker) StorageFailure() <-chan error { return b.storageErr }

func (b *Broker) storageFailure(err error) {
	b.storageOnce.Do(func() {
		b.log.Error(err, "storage failure on the data directory: the broker stops")
		b.storageErr <- err
	})
}

func (b *Broker) openPartition(t *Topic, index int32) (*Partition, error) {
	cfg := b.logConfig(t.configs)
	l, err := log.Open(b.partitionDir(t.Name, index), cfg,
		log.WithLogger(b.log.WithName("log").WithValues("topic", t.Name, "partition", index)), log.WithFS(b.fs), log.WithOnFailure(b.storageFailure))
	if err != nil {
		return nil, fmt.Errorf("broker: open partition %s-%d: %w", t.Name, index, err)
	}
	p := &Partition{Topic: t.Name, Index: index, Log: l}
	b.attachTierLocked(t, p)
	p.setMaxMessageBytes(cfg.MaxMessageBytes)
	p.minInsyncReplicas.Store(b.minInsyncReplicas(t.configs))
	return p, nil
}

var partitionDirRe = regexp.MustCompile(`^(.+)-(\d+)$`)

// removeStrayPartitions deletes partition directories of topics that are
// not in the metadata, or of partitions past a topic's count: they are left
// by a topic deletion that crashed after the metadata was written.
func (b *Broker) removeStrayPartitions() error {
	return b.removePartitionDirs("removing partition directory of a deleted topic", func(topic string, partition int32) bool {
		t, ok := b.topics[topic]
		return ok && int(partition) < len(t.partitions)
	})
}

// removePartitionDirs deletes every partition directory of the data dir
// that keep refuses, logging why.
func (b *Broker) removePartitionDirs(why string, keep func(topic string, partition int32) bool) error {
	entries, err := os.ReadDir(b.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("broker: read data dir: %w", err)
	}
	for _, e := range entries {
		m := partitionDirRe.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		idx, err := strconv.ParseInt(m[2], 10, 32)
		if err != nil || keep(m[1], int32(idx)) {
			continue
		}
		b.log.Info(why, "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(b.cfg.DataDir, e.Name())); err != nil {
			return fmt.Errorf("broker: remove stray partition %s: %w", e.Name(), err)
		}
	}
	return nil
}

func (b *Broker) loadMeta() error {
	path := filepath.Join(b.cfg.DataDir, metaFileName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b.meta = metaFile{Version: 1, ClusterID: newClusterID(), NodeID: b.cfg.NodeID, NextProducerID: 1}
		return b.writeMetaLocked()
	}
	if err != nil {
		return fmt.Errorf("broker: read %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, &b.meta); err != nil {
		return fmt.Errorf("broker: parse %s: %w", path, err)
	}
	if b.meta.Version != 1 {
		return fmt.Errorf("broker: %s: unsupported version %d", path, b.meta.Version)
	}
	return nil
}

func newClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func newTopicID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		_, _ = rand.Read(id[:])
	}
	return id
}

// writeMetaLocked persists b.meta atomically. Callers hold b.mu (or own b).
func (b *Broker) writeMetaLocked() error {
	raw, err := json.MarshalIndent(b.meta, "", "  ")
	if err != nil {
		return fmt.Errorf("broker: encode metadata: %w", err)
	}
	path := filepath.Join(b.cfg.DataDir, metaFileName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("broker: write metadata: %w", err)
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return fmt.Errorf("broker: write metadata: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("broker: sync metadata: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("broker: close metadata: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("broker: rename metadata: %w", err)
	}
	return syncDir(b.cfg.DataDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("broker: open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("broker: sync dir %s: %w", dir, err)
	}
	return nil
}

// snapshotMetaLocked rebuilds b.meta.Topics from b.topics.
func (b *Broker) snapshotMetaLocked() {
	b.meta.Topics = b.meta.Topics[:0]
	for _, t := range b.topics {
		cfg := make(map[string]string, len(t.configs))
		for k, v := range t.configs {
			cfg[k] = v
		}
		b.meta.Topics = append(b.meta.Topics, metaTopic{
			Name: t.Name, ID: base64.RawURLEncoding.EncodeToString(t.ID[:]),
			Partitions: int32(len(t.partitions)), Configs: cfg,
		})
	}
	sort.Slice(b.meta.Topics, func(i, j int) bool { return b.meta.Topics[i].Name < b.meta.Topics[j].Name })
}

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// DiskUsage returns the size and the free bytes usable by the broker of
// the data directory's volume (statfs(2)): what the metrics, the slow
// tier's headroom and DescribeLogDirs report.
func (b *Broker) DiskUsage() (total, usable int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.cfg.DataDir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// NodeID returns broker.id.
func (b *Broker) NodeID() int32 { return b.cfg.NodeID }

// ClusterID returns the cluster ID persisted in the data dir.
func (b *Broker) ClusterID() string {
	if st := b.ClusterState(); st != nil {
		return st.ClusterID
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.meta.ClusterID
}

// AllocateProducerID returns a producer ID never handed out before by this
// data directory. IDs are reserved in blocks: the block's end is persisted
// before its first ID is used, and a restart starts after the last block.
func (b *Broker) AllocateProducerID() (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nextPID == 0 || b.nextPID >= b.meta.NextProducerID {
		start := b.meta.NextProducerID
		b.meta.NextProducerID = start + producerIDBlock
		if err := b.writeMetaLocked(); err != nil {
			b.meta.NextProducerID = start
			return 0, err
		}
		b.nextPID = start
	}
	id := b.nextPID
	b.nextPID++
	if b.cfg.Clustered {
		// Brokers allocate from disjoint ranges: 2^40 IDs per broker ID.
		id += (int64(b.cfg.NodeID) + 1) << 40
	}
	return id, nil
}

// Close flushes and closes every partition log. The broker is unusable
// afterwards.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.closeLogsLocked()
	b.closeFaultFS()
	b.lock.Close() // releases the flock
	return err
}

func (b *Broker) closeFaultFS() {
	if b.faultFS != nil {
		_ = b.faultFS.Close()
	}
}

// closeLogs undoes a partial Open.
func (b *Broker) closeLogs() {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.closeLogsLocked()
	b.closeFaultFS()
	b.lock.Close()
}

func (b *Broker) closeLogsLocked() error {
	var errs []error
	for _, t := range b.topics {
		for _, p := range t.partitions {
			if p == nil {
				continue
			}
			if err := p.Log.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s-%d: %w", t.Name, p.Index, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateTopicName applies Kafka's topic name rules.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", kerr.InvalidTopicException)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name cannot be %q", kerr.InvalidTopicException, name)
	case len(name) > 249:
		return fmt.Errorf("%w: topic name is longer than 249 characters", kerr.InvalidTopicException)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q contains %q; legal characters are [a-zA-Z0-9._-]", kerr.InvalidTopicException, name, c)
		}
	}
	return nil
}

// IsInternalTopic reports Kafka's internal topic names. Metadata flags
// them internal; only the brokers write them (broker/internaltopic:
// broker/offsetstopic writes __consumer_offsets, broker/txntopic
// __transaction_state).
func IsInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

// CheckNotInternalTopic refuses Kafka's internal topic names
// (__consumer_offsets, __transaction_state) with INVALID_TOPIC_EXCEPTION,
// Kafka's answer to a client creating, writing, growing or deleting an
// internal topic. Strata keeps what those topics hold in Kafka (group
// offsets, transaction state) in the metadata store (etcd), and
// WriteTxnMarkers entries naming __consumer_offsets complete group
// offsets at the group coordinator, so a user topic of that name would
// never see its transactions' markers (a read_committed consumer would
// wait on it forever); the two topics exist only as the brokers'
// read-only projections of those stores (CreateInternalTopic).
func CheckNotInternalTopic(name string) error {
	if IsInternalTopic(name) {
		return fmt.Errorf("%w: %s is one of Kafka's internal topics; only the brokers write it (Strata keeps group offsets and transaction state in its metadata store and projects them into __consumer_offsets and __transaction_state for tools to read)", kerr.InvalidTopicException, name)
	}
	return nil
}

// errTopicCollides reports Kafka's '.'/'_' collision rule.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

func (p *Partition) maxBytes() int {
	return int(p.maxMessageBytes.Load())
}

func (p *Partition) setMaxMessageBytes(n int) { p.maxMessageBytes.Store(int64(n)) }

func (b *Broker) minInsyncReplicas(overrides map[string]string) int32 {
	n, _ := strconv.ParseInt(b.effectiveTopicConfig(topicConfigByName["min.insync.replicas"], overrides).Value, 10, 32)
	return int32(n)
}

// CheckAcksAll returns NOT_ENOUGH_REPLICAS when the in-sync replicas (this
// broker alone) are fewer than the topic's min.insync.replicas, as Kafka
// answers an acks=all produce in that case.
func (p *Partition) CheckAcksAll() error {
	if p.Replica != nil {
		return p.Replica.CheckMinISR(p.minInsyncReplicas.Load())
	}
	const isr = 1
	if m := p.minInsyncReplicas.Load(); m > isr {
		return fmt.Errorf("%w: min.insync.replicas is %d, the ISR has %d replica", kerr.NotEnoughReplicas, m, isr)
	}
	return nil
}

// MinInsyncReplicas is the topic's min.insync.replicas.
func (p *Partition) MinInsyncReplicas() int32 { return p.minInsyncReplicas.Load() }

var _ = record.Validate
