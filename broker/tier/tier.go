package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/record"
)

// ErrFenced is returned when a leader with a newer epoch has written the
// manifest: this replica must not upload (it is no longer the leader).
var ErrFenced = errors.New("tier: a newer leader epoch owns the manifest")

// ErrOffsetOutOfRange is returned by reads outside [StartOffset, EndOffset).
var ErrOffsetOutOfRange = errors.New("tier: offset out of range")

// Defaults of Config.
const (
	DefaultChunkBytes    = 1 << 20
	DefaultCacheBytes    = 64 << 20
	DefaultKeepManifests = 3
	DefaultRetryBackoff  = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
)

// Config configures a Tier.
type Config struct {
	// Cluster names the cluster in object keys (tier/<cluster>/...).
	Cluster string
	// ChunkBytes is the read-ahead unit of remote reads (one ranged GET)
	// and CacheBytes the bound of the chunk cache (tier.read.cache.bytes).
	ChunkBytes, CacheBytes int64
	// KeepManifests is how many manifest versions stay in the bucket
	// (older ones are deleted after a newer one is written).
	KeepManifests int
	// RetryBackoff is the first pause after a failed upload, doubled per
	// failure up to MaxBackoff (bucket unreachable).
	RetryBackoff, MaxBackoff time.Duration
	// Clock is the wall clock of time retention (default time.Now).
	Clock func() time.Time
}

func (c *Config) setDefaults() {
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = DefaultChunkBytes
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.KeepManifests <= 0 {
		c.KeepManifests = DefaultKeepManifests
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
}

// Stats are the tier's counters since start.
type Stats struct {
	UploadedBytes, UploadedSegments, UploadErrors int64
	RemoteReadBytes, RemoteReadErrors             int64
	DeletedSegments                               int64
	// SweptObjects counts orphaned objects removed (sweep.go).
	SweptObjects int64
	// HydratedBytes and HydratedSegments count the segments replicas
	// downloaded to hydrate (DownloadSegment), HydrationErrors the
	// downloads that failed or did not match their manifest entry.
	HydratedBytes, HydratedSegments, HydrationErrors int64
}

// Tier is the slow tier of one broker: a regional bucket holding the
// partitions' uploaded segments and manifests. Safe for concurrent use.
type Tier struct {
	store objstore.Store
	cfg   Config
	log   logr.Logger
	cache *chunkCache

	uploadedBytes, uploadedSegments, uploadErrors atomic.Int64
	readBytes, readErrors, deletedSegments        atomic.Int64
	sweptObjects                                  atomic.Int64
	// owner: this cluster's ID is recorded as the owner of its prefix
	// (checked once, sweep.go).
	owner                           atomic.Bool
	hydratedBytes, hydratedSegments atomic.Int64
	hydrationErrors                 atomic.Int64
}

// New returns the tier stored in st.
func New(st objstore.Store, cfg Config, logger logr.Logger) *Tier {
	cfg.setDefaults()
	return &Tier{store: st, cfg: cfg, log: logger, cache: newChunkCache(cfg.ChunkBytes, cfg.CacheBytes)}
}

// Store is the bucket.
func (t *Tier) Store() objstore.Store { return t.store }

// Stats returns the counters.
func (t *Tier) Stats() Stats {
	return Stats{
		UploadedBytes: t.uploadedBytes.Load(), UploadedSegments: t.uploadedSegments.Load(), UploadErrors: t.uploadErrors.Load(),
		RemoteReadBytes: t.readBytes.Load(), RemoteReadErrors: t.readErrors.Load(), DeletedSegments: t.deletedSegments.Load(),
		SweptObjects:  t.sweptObjects.Load(),
		HydratedBytes: t.hydratedBytes.Load(), HydratedSegments: t.hydratedSegments.Load(), HydrationErrors: t.hydrationErrors.Load(),
	}
}

// Partition returns the handle of one partition (no I/O until used).
func (t *Tier) Partition(topic, topicID string, partition int32) *Partition {
	return &Partition{t: t, prefix: PartitionPrefix(t.cfg.Cluster, topic, topicID, partition), topic: topic, topicID: topicID, partition: partition}
}

// Partition is one partition's part of the tier. The leader uploads and
// applies retention through it; every replica reads through it. Its
// manifest cache is guarded by mu; uploads are serialised by writeMu.
type Partition struct {
	t              *Tier
	prefix         string
	topic, topicID string
	partition      int32
	writeMu        sync.Mutex
	// loadMu makes concurrent View calls of a partition whose manifest is
	// not known yet share one load.
	loadMu       sync.Mutex
	mu           sync.Mutex
	man          *Manifest // newest known; nil until loaded
	writerEpoch  int32     // the epoch man was (re)loaded for by a writer; -1: never
	writerLoaded bool
	failures     int
	failing      bool // the last upload failed, not fenced
	retryAt      time.Time
	// deleted is set by DeleteAll: the topic is gone, nothing is written
	// any more (guarded by writeMu).
	deleted bool
	// pruneChecked: the manifests were listed for pruning since this
	// process opened the partition, and commits counts manifests written
	// since (both guarded by writeMu). An upload round prunes only when
	// either says old versions may be there: listing every partition's
	// manifests on every round, with nothing to upload, was most of an
	// idle broker's CPU with 1,200 tiered partitions (a LIST each per
	// round, priced like a PUT on S3).
	pruneChecked bool
	commits      int
}

// Prefix is the partition's key prefix in the bucket.
func (p *Partition) Prefix() string { return p.prefix }

// Source is what the uploader reads from: a partition's local log.
type Source interface {
	Segments() []log.SegmentInfo
	Read(offset int64, maxBytes int, maxOffset int64) (log.ReadResult, error)
	StartOffset() int64
	// AbortedTxnsMarkedIn returns the aborted-transaction entries whose
	// marker is in [from, next): uploaded with the batches of that range.
	AbortedTxnsMarkedIn(from, next int64) []log.AbortedTxn
}

var _ Source = (*log.Log)(nil)

// ProducerSnapshotSource is a Source that also has idempotent-producer
// snapshots (package log): the one as of each uploaded segment's end goes
// with it.
type ProducerSnapshotSource interface {
	ProducerSnapshot(offset int64) ([]byte, bool)
}

var _ ProducerSnapshotSource = (*log.Log)(nil)

// producerSnapshotSuffix names a segment's producer snapshot object.
const producerSnapshotSuffix = ".producers"

// Manifest returns the newest manifest known without I/O; ok is false
// before the first successful Load.
func (p *Partition) Manifest() (Manifest, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.man == nil {
		return Manifest{}, false
	}
	return *p.man.clone(), true
}

// View returns the newest manifest known, reading it from the bucket
// first when this process has not (after a restart, before the tier
// manager's first round reached the partition). Callers that answer
// clients about the tier's offsets use it instead of Range: an unknown
// manifest is an error (the bucket is unreachable), never an empty tier.
func (p *Partition) View(ctx context.Context) (Manifest, error) {
	if m, ok := p.Manifest(); ok {
		return m, nil
	}
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	if m, ok := p.Manifest(); ok {
		return m, nil // another caller loaded it meanwhile
	}
	return p.Load(ctx)
}

// Range returns the offsets readable from m, [start, end); ok is false
// when it holds nothing.
func (m *Manifest) Range() (start, end int64, ok bool) {
	if len(m.Segments) == 0 {
		return 0, 0, false
	}
	return max(m.StartOffset, m.Segments[0].BaseOffset), m.EndOffset, true
}

// Range returns the offsets readable from the tier, [start, end); ok is
// false when the tier holds nothing for the partition (or was not loaded).
func (p *Partition) Range() (start, end int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.man == nil {
		return 0, 0, false
	}
	return p.man.Range()
}

// EndOffset is the offset after the last uploaded batch (0 before the
// first upload or load): local segments below it may go.
func (p *Partition) EndOffset() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.man == nil {
		return 0
	}
	return p.man.EndOffset
}

// Load reads the newest manifest from the bucket (one LIST and one GET)
// and caches it. A partition with no manifest gets an empty one.
func (p *Partition) Load(ctx context.Context) (Manifest, error) {
	m, _, err := p.load(ctx)
	if err != nil {
		return Manifest{}, err
	}
	p.mu.Lock()
	// Never go back to an older version than one this process wrote or
	// read (a LIST may lag a PUT on some stores).
	if p.man == nil || m.LeaderEpoch > p.man.LeaderEpoch || m.LeaderEpoch == p.man.LeaderEpoch && m.Seq >= p.man.Seq {
		p.man = m
	}
	out := *p.man.clone()
	p.mu.Unlock()
	return out, nil
}

// load returns the newest manifest in the bucket and the keys of all
// manifest versions, oldest first.
func (p *Partition) load(ctx context.Context) (*Manifest, []string, error) {
	objs, err := p.t.store.List(ctx, p.prefix+"manifest/")
	if err != nil {
		return nil, nil, fmt.Errorf("tier: list manifests of %s: %w", p.prefix, err)
	}
	var keys []string
	for _, o := range objs {
		if _, _, ok := parseManifestKey(o.Key[len(p.prefix):]); ok {
			keys = append(keys, o.Key)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return &Manifest{Version: ManifestVersion, Topic: p.topic, TopicID: p.topicID, Partition: p.partition, LeaderEpoch: -1, Seq: -1}, nil, nil
	}
	newest := keys[len(keys)-1]
	raw, err := p.t.store.Get(ctx, newest, 0, -1)
	if err != nil {
		return nil, nil, fmt.Errorf("tier: read manifest %s: %w", newest, err)
	}
	m, err := decodeManifest(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("tier: manifest %s: %w", newest, err)
	}
	return m, keys, nil
}

// backoff reports whether a failed bucket call should be retried yet.
func (p *Partition) backoff(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return now.Before(p.retryAt)
}

// UploadFailing reports whether the partition's last upload failed with
// a bucket error (not fencing): it backs off until a later round succeeds,
// and the local segments stay.
func (p *Partition) UploadFailing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failing
}

func (p *Partition) noteResult(err error, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failing = err != nil && !errors.Is(err, ErrFenced)
	if err == nil {
		p.failures, p.retryAt = 0, time.Time{}
		return
	}
	p.failures++
	d := p.t.cfg.RetryBackoff << min(p.failures-1, 16)
	p.retryAt = now.Add(min(d, p.t.cfg.MaxBackoff))
}

// beginWrite makes sure the cached manifest is the bucket's newest before
// a leader at epoch writes after a leadership change (or after a failed
// write), and refuses when a newer epoch owns it. Called with writeMu.
func (p *Partition) beginWrite(ctx context.Context, epoch int32) (*Manifest, error) {
	if p.deleted {
		return nil, fmt.Errorf("%w: %s was deleted with its topic", ErrFenced, p.prefix)
	}
	p.mu.Lock()
	fresh := p.writerLoaded && p.writerEpoch == epoch && p.man != nil
	p.mu.Unlock()
	if !fresh {
		if _, err := p.Load(ctx); err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.writerEpoch, p.writerLoaded = epoch, true
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.man.LeaderEpoch > epoch {
		return nil, fmt.Errorf("%w: manifest of %s written at epoch %d, this leader has %d", ErrFenced, p.prefix, p.man.LeaderEpoch, epoch)
	}
	return p.man.clone(), nil
}

// commit writes m as the next manifest version of a leader at epoch. The
// key is taken with a conditional PUT: if it exists (another writer at the
// same epoch, a restarted process), nothing is overwritten and the next
// round reloads.
func (p *Partition) commit(ctx context.Context, m *Manifest, epoch int32) error {
	prev := m.Seq
	m.Version, m.Topic, m.TopicID, m.Partition = ManifestVersion, p.topic, p.topicID, p.partition
	m.LeaderEpoch, m.Seq = epoch, prev+1
	if err := m.check(); err != nil {
		return fmt.Errorf("tier: refusing to write a bad manifest of %s: %w", p.prefix, err)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// A newer leader's manifest fences this writer: its versions sort
	// above ours, so ours would be ignored anyway, but the deposed leader
	// must stop uploading and deleting. (A newer leader writing between
	// this check and the PUT still wins: its key sorts above.)
	if newest, err := p.newestKey(ctx); err != nil {
		return err
	} else if e, _, ok := parseManifestKey(newest); ok && e > epoch {
		p.mu.Lock()
		p.writerLoaded = false
		p.mu.Unlock()
		// The view follows the new leader's manifest at once: this
		// replica's local retention is bounded by the view's end, and
		// the manifest it wrote last may name more than the new leader's
		// (which was based on an older one).
		if _, err := p.Load(ctx); err != nil {
			p.t.log.V(1).Info("reloading a superseded manifest", "prefix", p.prefix, "error", err.Error())
		}
		return fmt.Errorf("%w: %s has a manifest of epoch %d, this leader has %d", ErrFenced, p.prefix, e, epoch)
	}
	key := p.prefix + manifestKey(epoch, m.Seq)
	if err := objstore.PutIfAbsent(ctx, p.t.store, key, raw); err != nil {
		p.mu.Lock()
		p.writerLoaded = false // reload before the next write
		p.mu.Unlock()
		return fmt.Errorf("tier: write manifest %s: %w", key, err)
	}
	p.mu.Lock()
	p.man = m.clone()
	p.mu.Unlock()
	p.commits++
	return nil
}

// newestKey returns the newest manifest key below the partition prefix
// ("" when none).
func (p *Partition) newestKey(ctx context.Context) (string, error) {
	objs, err := p.t.store.List(ctx, p.prefix+"manifest/")
	if err != nil {
		return "", fmt.Errorf("tier: list manifests of %s: %w", p.prefix, err)
	}
	newest := ""
	for _, o := range objs {
		if k := o.Key[len(p.prefix):]; k > newest {
			newest = k
		}
	}
	return newest, nil
}

// UploadResult says what Upload did.
type UploadResult struct {
	Segments int
	Bytes    int64
	// Lag is the bytes of the local log at or above the tier's end after
	// the upload: not in the tier yet (the active segment included).
	Lag int64
	// Deferred is true when the round was skipped: the partition is
	// backing off after a failure.
	Deferred bool
}

// Upload copies the sealed segments of src wholly below upTo that the
// tier does not hold yet, oldest first, each with its aborted-transaction
// entries and followed by a manifest version. The caller passes the
// partition's last stable offset (at most the high watermark): every
// in-sync replica has the data, and no upload holds a transaction that is
// still undecided (Kafka copies segments below the LSO only), so the
// entries uploaded with a segment are final.
// The first upload after a leadership change starts where the manifest
// ends (possibly inside a local segment: only the batches from there go),
// so a new leader never uploads a range that conflicts with what is
// there. A failed call stops the round; the local segments stay until a
// later round succeeds (Backoff tells when to try again).
func (p *Partition) Upload(ctx context.Context, src Source, upTo int64, epoch int32) (UploadResult, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	var res UploadResult
	now := p.t.cfg.Clock()
	if p.backoff(now) {
		res.Lag, res.Deferred = lag(src.Segments(), p.EndOffset()), true
		return res, nil
	}
	res, err := p.upload(ctx, src, upTo, epoch)
	if err != nil && !errors.Is(err, ErrFenced) {
		p.t.uploadErrors.Add(1)
	}
	p.noteResult(err, now)
	return res, err
}

func (p *Partition) upload(ctx context.Context, src Source, upTo int64, epoch int32) (res UploadResult, err error) {
	segs := src.Segments()
	defer func() { res.Lag = lag(segs, p.EndOffset()) }()
	m, err := p.beginWrite(ctx, epoch)
	if err != nil {
		return res, err
	}
	if es, ok := src.(EpochSource); ok {
		if end := consistentEnd(m, es); end < m.EndOffset {
			// An unclean election: the tier holds another history from
			// end on. Cut it out first (lineage.go); this leader's own
			// batches go from there.
			p.t.log.Info("the slow tier diverges from the new leader's log; cutting the manifest back", "prefix", p.prefix, "from", m.EndOffset, "to", end, "epoch", epoch)
			m.truncate(end)
			if err := p.commit(ctx, m, epoch); err != nil {
				return res, err
			}
		}
	}
	if m.empty() || len(m.Segments) == 0 && m.EndOffset < src.StartOffset() {
		// Nothing uploaded yet: the tier starts at the local log start.
		m.StartOffset = max(m.StartOffset, src.StartOffset())
		m.EndOffset = max(m.EndOffset, src.StartOffset())
	}
	for _, s := range segs {
		if !s.Sealed || s.Next > upTo || s.Next <= m.EndOffset {
			continue
		}
		from := max(s.Base, m.EndOffset, src.StartOffset())
		data, err := readRange(src, from, s.Next, s.Size)
		if err != nil {
			return res, fmt.Errorf("tier: read local segment %d of %s: %w", s.Base, p.prefix, err)
		}
		if len(data) == 0 {
			m.EndOffset = s.Next
			continue
		}
		b, err := buildSegment(data, epoch, src.AbortedTxnsMarkedIn(from, s.Next))
		if err != nil {
			return res, fmt.Errorf("tier: local segment %d of %s: %w", s.Base, p.prefix, err)
		}
		if b.seg.BaseOffset < m.EndOffset {
			return res, fmt.Errorf("tier: %s: segment from %d overlaps the manifest's end %d", p.prefix, b.seg.BaseOffset, m.EndOffset)
		}
		// Data and indexes first, the manifest last: a crash in between
		// leaves objects no manifest names (rewritten identically by the
		// next attempt), never a manifest naming missing objects.
		objs := []struct {
			key  string
			data []byte
		}{{b.seg.Key, b.data}, {b.seg.Key + ".index", b.index}, {b.seg.Key + ".timeindex", b.timeIndex}}
		if len(b.txnIndex) > 0 {
			objs = append(objs, struct {
				key  string
				data []byte
			}{b.seg.Key + txnIndexSuffix, b.txnIndex})
		}
		if ps, ok := src.(ProducerSnapshotSource); ok && b.seg.LastOffset+1 == s.Next {
			if snap, ok := ps.ProducerSnapshot(s.Next); ok {
				b.seg.ProducerSnapshotSize = int64(len(snap))
				objs = append(objs, struct {
					key  string
					data []byte
				}{b.seg.Key + producerSnapshotSuffix, snap})
			}
		}
		for _, o := range objs {
			if err := p.t.store.Put(ctx, p.prefix+o.key, o.data); err != nil {
				return res, fmt.Errorf("tier: upload %s: %w", o.key, err)
			}
		}
		m.Segments = append(m.Segments, b.seg)
		m.EndOffset = s.Next
		if err := p.commit(ctx, m, epoch); err != nil {
			return res, err
		}
		res.Segments++
		res.Bytes += b.seg.Size
		p.t.uploadedSegments.Add(1)
		p.t.uploadedBytes.Add(b.seg.Size)
		p.t.log.V(1).Info("uploaded segment", "prefix", p.prefix, "base", b.seg.BaseOffset, "last", b.seg.LastOffset, "bytes", b.seg.Size, "epoch", epoch)
	}
	p.pruneManifests(ctx)
	return res, nil
}

// lag is the bytes of local segments from end on (the partly uploaded
// segment counted whole).
func lag(segs []log.SegmentInfo, end int64) int64 {
	var n int64
	for _, s := range segs {
		if s.Next > end {
			n += s.Size
		}
	}
	return n
}

// readRange reads the whole batches of one local segment in [from, next).
func readRange(src Source, from, next, size int64) ([]byte, error) {
	var out []byte
	for from < next {
		r, err := src.Read(from, int(max(size, 1)), next)
		if err != nil {
			return nil, err
		}
		if len(r.Records) == 0 || r.HighestOffset < from {
			break
		}
		out = append(out, r.Records...)
		from = r.HighestOffset + 1
	}
	return out, nil
}

// pruneManifests deletes all but the newest KeepManifests versions, once
// after the partition is opened and then after manifests were written
// (writeMu held). Failures only leave old versions behind, for the next
// round.
func (p *Partition) pruneManifests(ctx context.Context) {
	if p.pruneChecked && p.commits == 0 {
		return
	}
	objs, err := p.t.store.List(ctx, p.prefix+"manifest/")
	if err != nil {
		return
	}
	p.pruneChecked, p.commits = true, 0
	if len(objs) <= p.t.cfg.KeepManifests {
		return
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	if err := objstore.DeleteAll(ctx, p.t.store, keys[:len(keys)-p.t.cfg.KeepManifests]); err != nil {
		p.t.log.V(1).Info("pruning old manifests", "prefix", p.prefix, "error", err.Error())
	}
}

// RetentionPolicy is a partition's tier retention (retention.ms and
// retention.bytes; negative: unlimited).
type RetentionPolicy struct {
	RetentionMs    time.Duration
	RetentionBytes int64
	// LocalBytes is the size of the local log above the tier's end, which
	// retention.bytes counts too (the partition's whole size).
	LocalBytes int64
}

// ApplyRetention removes segments past retention.ms or while the
// partition is larger than retention.bytes, oldest first: the manifest is
// written first, then the objects deleted (a crash in between leaves
// unnamed objects, never a manifest naming missing ones). Leader only.
func (p *Partition) ApplyRetention(ctx context.Context, epoch int32, pol RetentionPolicy) (int, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.backoff(p.t.cfg.Clock()) {
		return 0, nil
	}
	m, err := p.beginWrite(ctx, epoch)
	if err != nil {
		return 0, err
	}
	now := p.t.cfg.Clock().UnixMilli()
	n := 0
	for n < len(m.Segments) && m.Segments[n].LastOffset < m.StartOffset {
		n++ // below the start (DeleteRecords)
	}
	if pol.RetentionMs >= 0 {
		ms := pol.RetentionMs.Milliseconds()
		for n < len(m.Segments) && m.Segments[n].MaxTimestamp >= 0 && now-m.Segments[n].MaxTimestamp > ms {
			n++
		}
	}
	if pol.RetentionBytes >= 0 {
		size := pol.LocalBytes
		for _, s := range m.Segments[n:] {
			size += s.Size
		}
		for n < len(m.Segments) && size-m.Segments[n].Size >= pol.RetentionBytes {
			size -= m.Segments[n].Size
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, p.dropOldest(ctx, m, n, epoch)
}

// dropOldest removes the first n segments of m: manifest, then objects.
func (p *Partition) dropOldest(ctx context.Context, m *Manifest, n int, epoch int32) error {
	doomed := append([]Segment(nil), m.Segments[:n]...)
	m.Segments = append([]Segment(nil), m.Segments[n:]...)
	if len(m.Segments) > 0 {
		m.StartOffset = max(m.StartOffset, m.Segments[0].BaseOffset)
	} else {
		m.StartOffset = max(m.StartOffset, m.EndOffset)
	}
	if err := p.commit(ctx, m, epoch); err != nil {
		return err
	}
	var keys []string
	for _, s := range doomed {
		for _, k := range s.objectKeys() {
			p.t.cache.forget(p.prefix + k)
			keys = append(keys, p.prefix+k)
		}
	}
	p.t.deletedSegments.Add(int64(len(doomed)))
	if err := objstore.DeleteAll(ctx, p.t.store, keys); err != nil {
		// The manifest no longer names them: they are garbage, not data.
		p.t.log.Info("deleting expired tier segments failed; they stay as unreferenced objects", "prefix", p.prefix, "error", err.Error())
	}
	return nil
}

// DeleteRecordsBefore moves the tier's start to offset (DeleteRecords):
// segments wholly below it are removed. Leader only; the new start is in
// the bucket when it returns.
func (p *Partition) DeleteRecordsBefore(ctx context.Context, epoch int32, offset int64) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	m, err := p.beginWrite(ctx, epoch)
	if err != nil {
		return err
	}
	if m.empty() || offset <= m.StartOffset {
		return nil
	}
	m.StartOffset = min(offset, m.EndOffset)
	n := 0
	for n < len(m.Segments) && m.Segments[n].LastOffset < m.StartOffset {
		n++
	}
	if n == 0 {
		return p.commit(ctx, m, epoch)
	}
	return p.dropOldest(ctx, m, n, epoch)
}

// Read returns whole batches from the tier starting with the one holding
// offset: up to maxBytes but at least one batch, none at or above
// maxOffset, all from one segment (as local reads). Every batch's CRC is
// checked. Bucket failures are returned as they are (the caller answers a
// retriable error).
func (p *Partition) Read(ctx context.Context, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	data, err := p.read(ctx, offset, maxBytes, maxOffset)
	if err != nil && !errors.Is(err, ErrOffsetOutOfRange) {
		p.t.readErrors.Add(1)
	}
	p.t.readBytes.Add(int64(len(data)))
	return data, err
}

func (p *Partition) read(ctx context.Context, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	m, ok := p.Manifest()
	if !ok {
		var err error
		if m, err = p.Load(ctx); err != nil {
			return nil, err
		}
	}
	if offset < m.StartOffset || offset >= m.EndOffset || len(m.Segments) == 0 {
		return nil, fmt.Errorf("%w: %d not in the tier's [%d, %d) of %s", ErrOffsetOutOfRange, offset, m.StartOffset, m.EndOffset, p.prefix)
	}
	i := m.segmentFor(offset)
	if i < 0 {
		return nil, fmt.Errorf("%w: %d past the tier's last segment of %s", ErrOffsetOutOfRange, offset, p.prefix)
	}
	s := m.Segments[i]
	index, err := p.object(ctx, s.Key+".index", s.IndexSize)
	if err != nil {
		return nil, err
	}
	pos := lookupOffset(index, s.BaseOffset, offset)
	var out []byte
	for pos < s.Size {
		hdr, err := p.bytes(ctx, s, pos, record.BatchHeaderSize)
		if err != nil {
			return nil, err
		}
		h, err := record.ParseHeader(hdr)
		if err != nil || pos+int64(h.Size()) > s.Size || h.BatchLength < record.BatchHeaderSize-12 {
			return nil, fmt.Errorf("tier: %s%s at byte %d: bad batch header: %w", p.prefix, s.Key, pos, record.ErrCorrupt)
		}
		if h.LastOffset() < offset {
			pos += int64(h.Size())
			continue
		}
		if h.BaseOffset >= maxOffset || len(out) > 0 && len(out)+h.Size() > maxBytes {
			break
		}
		b, err := p.bytes(ctx, s, pos, int64(h.Size()))
		if err != nil {
			return nil, err
		}
		if _, err := record.CheckFrame(b); err != nil {
			return nil, fmt.Errorf("tier: %s%s at byte %d: %w", p.prefix, s.Key, pos, err)
		}
		out = append(out, b...)
		pos += int64(h.Size())
		if len(out) >= maxBytes {
			break
		}
	}
	return out, nil
}

// txnIndexSuffix names a segment's aborted-transaction index object.
const txnIndexSuffix = ".txnindex"

// AbortedTxns returns the aborted transactions recorded in the tier that
// overlap [from, upTo) (marker at or after from, first offset below
// upTo), ordered by marker offset, for a read_committed fetch served from
// the tier. An entry lives with the segment holding its marker, which may
// be later than the data's, so the segments from the one holding from on
// are searched; the search stops at an entry whose LastStableOffset
// reaches upTo (every later transaction started after upTo), and then
// done is true. Otherwise the entries whose marker is at or after end
// (the tier's end offset) are in the local log's index: the caller
// continues there. Segments uploaded without an index contribute none.
func (p *Partition) AbortedTxns(ctx context.Context, from, upTo int64) (out []log.AbortedTxn, end int64, done bool, err error) {
	m, ok := p.Manifest()
	if !ok {
		if m, err = p.Load(ctx); err != nil {
			p.t.readErrors.Add(1)
			return nil, 0, false, err
		}
	}
	i := m.segmentFor(from)
	if i < 0 {
		return nil, m.EndOffset, false, nil
	}
	for _, s := range m.Segments[i:] {
		if s.TxnIndexSize == 0 {
			continue
		}
		raw, err := p.object(ctx, s.Key+txnIndexSuffix, s.TxnIndexSize)
		if err != nil {
			p.t.readErrors.Add(1)
			return nil, 0, false, err
		}
		entries, err := log.DecodeTxnIndex(raw, s.BaseOffset, s.LastOffset+1)
		if err != nil {
			p.t.readErrors.Add(1)
			return nil, 0, false, fmt.Errorf("tier: %s%s%s: %w", p.prefix, s.Key, txnIndexSuffix, err)
		}
		for _, e := range entries {
			if e.LastOffset < from {
				continue
			}
			if e.FirstOffset < upTo {
				out = append(out, e)
			}
			if e.LastStableOffset >= upTo {
				return out, m.EndOffset, true, nil
			}
		}
	}
	return out, m.EndOffset, false, nil
}

// ProducerSnapshot returns the producer snapshot uploaded with s (as of
// s.LastOffset+1), nil when it has none.
func (p *Partition) ProducerSnapshot(ctx context.Context, s Segment) ([]byte, error) {
	return p.object(ctx, s.Key+producerSnapshotSuffix, s.ProducerSnapshotSize)
}

// object returns a whole (small) object through the cache.
func (p *Partition) object(ctx context.Context, key string, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	full := p.prefix + key
	return p.t.cache.get(ctx, chunkID{key: full, n: -1}, func(ctx context.Context) ([]byte, error) {
		b, err := p.t.store.Get(ctx, full, 0, -1)
		if err != nil {
			return nil, fmt.Errorf("tier: read %s: %w", full, err)
		}
		if int64(len(b)) != size {
			return nil, fmt.Errorf("tier: %s has %d bytes, the manifest says %d: %w", full, len(b), size, record.ErrCorrupt)
		}
		return b, nil
	})
}

// bytes returns n bytes of segment s's data from pos, through the chunk
// cache (one ranged GET per chunk not cached).
func (p *Partition) bytes(ctx context.Context, s Segment, pos, n int64) ([]byte, error) {
	full := p.prefix + s.Key
	cb := p.t.cfg.ChunkBytes
	out := make([]byte, 0, n)
	for n > 0 {
		c := pos / cb
		chunkStart := c * cb
		want := min(cb, s.Size-chunkStart)
		data, err := p.t.cache.get(ctx, chunkID{key: full, n: c}, func(ctx context.Context) ([]byte, error) {
			b, err := p.t.store.Get(ctx, full, chunkStart, want)
			if err != nil {
				return nil, fmt.Errorf("tier: read %s at %d: %w", full, chunkStart, err)
			}
			if int64(len(b)) != want {
				return nil, fmt.Errorf("tier: read %s at %d: %d bytes, want %d: %w", full, chunkStart, len(b), want, record.ErrCorrupt)
			}
			return b, nil
		})
		if err != nil {
			return nil, err
		}
		off := pos - chunkStart
		take := min(n, int64(len(data))-off)
		if take <= 0 {
			return nil, fmt.Errorf("tier: read %s at %d past its end: %w", full, pos, record.ErrCorrupt)
		}
		out = append(out, data[off:off+take]...)
		pos += take
		n -= take
	}
	return out, nil
}

// errFound stops a record.Walk at the record looked for.
var errFound = errors.New("found")

// OffsetForTimestamp returns the first offset in the tier whose record
// timestamp is at or after ts, and that timestamp; ok is false when no
// record in the tier is that recent.
func (p *Partition) OffsetForTimestamp(ctx context.Context, ts int64) (offset, timestamp int64, ok bool, err error) {
	m, loaded := p.Manifest()
	if !loaded {
		if m, err = p.Load(ctx); err != nil {
			return 0, 0, false, err
		}
	}
	for _, s := range m.Segments {
		if s.MaxTimestamp < ts || s.LastOffset < m.StartOffset {
			continue
		}
		ti, err := p.object(ctx, s.Key+".timeindex", s.TimeIndexSize)
		if err != nil {
			return 0, 0, false, err
		}
		from := max(lookupTime(ti, s.BaseOffset, ts), m.StartOffset)
		for from <= s.LastOffset {
			data, err := p.read(ctx, from, 1, s.LastOffset+1)
			if err != nil {
				return 0, 0, false, err
			}
			if len(data) == 0 {
				break
			}
			h, _ := record.ParseHeader(data)
			if h.MaxTimestamp >= ts {
				if h.TimestampType() == record.TimestampLogAppendTime {
					return max(h.BaseOffset, m.StartOffset), h.MaxTimestamp, true, nil
				}
				var off, t int64
				err := record.BudgetFrom(ctx).Walk(record.Batch(data[:h.Size()]), record.MaxDecompressedBytes, func(r *record.Record) error {
					off, t = h.BaseOffset+int64(r.OffsetDelta), h.BaseTimestamp+r.TimestampDelta
					if t >= ts && off >= m.StartOffset {
						return errFound
					}
					return nil
				})
				if err == errFound {
					return off, t, true, nil
				}
				if err != nil {
					return 0, 0, false, err
				}
			}
			from = h.LastOffset() + 1
		}
	}
	return 0, 0, false, nil
}

// DeleteAll removes every object of the partition, manifests first (its
// topic was deleted, as Kafka deletes remote data with the topic).
func (p *Partition) DeleteAll(ctx context.Context) error {
	// Under writeMu, and never writing again: an upload round in flight
	// finishes before, none starts after.
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	p.deleted = true
	objs, err := p.t.store.List(ctx, p.prefix)
	if err != nil {
		return fmt.Errorf("tier: list %s: %w", p.prefix, err)
	}
	var manifests, rest []string
	for _, o := range objs {
		if _, _, ok := parseManifestKey(o.Key[len(p.prefix):]); ok {
			manifests = append(manifests, o.Key)
		} else {
			rest = append(rest, o.Key)
		}
		p.t.cache.forget(o.Key)
	}
	if err := objstore.DeleteAll(ctx, p.t.store, manifests); err != nil {
		return fmt.Errorf("tier: delete manifests of %s: %w", p.prefix, err)
	}
	if err := objstore.DeleteAll(ctx, p.t.store, rest); err != nil {
		return fmt.Errorf("tier: delete segments of %s: %w", p.prefix, err)
	}
	p.mu.Lock()
	p.man, p.writerLoaded = nil, false
	p.mu.Unlock()
	return nil
}

// VerifySegment reads a segment's data object whole and checks its size
// and CRC-32C against the manifest (strata tier inspect --verify, tests).
func (p *Partition) VerifySegment(ctx context.Context, s Segment) error {
	b, err := p.t.store.Get(ctx, p.prefix+s.Key, 0, -1)
	if err != nil {
		return err
	}
	if int64(len(b)) != s.Size || crc32.Checksum(b, castagnoli) != s.CRC {
		return fmt.Errorf("tier: %s%s: %d bytes with CRC %08x, manifest says %d bytes, CRC %08x: %w", p.prefix, s.Key, len(b), crc32.Checksum(b, castagnoli), s.Size, s.CRC, record.ErrCorrupt)
	}
	return nil
}
