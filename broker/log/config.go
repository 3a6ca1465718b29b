package log

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
)

// Config is a partition log's configuration; it mirrors the Kafka topic
// configs of the same meaning.
type Config struct {
	// SegmentBytes rolls the active segment when an append would make it
	// larger (segment.bytes). Default 1 GiB.
	SegmentBytes int64
	// SegmentMs rolls the active segment once its first batch is this old
	// (segment.ms). Default 7 days.
	SegmentMs time.Duration
	// RetentionMs deletes segments whose newest timestamp is older
	// (retention.ms); negative means infinite. Default 7 days.
	RetentionMs time.Duration
	// RetentionBytes deletes the oldest segments while the log is larger
	// (retention.bytes); negative means infinite. Default -1.
	RetentionBytes int64
	// IndexIntervalBytes is the number of bytes between offset and time
	// index entries (index.interval.bytes). Default 4096.
	IndexIntervalBytes int
	// FlushInterval is the fsync policy: > 0 fsyncs dirty data at this
	// interval after the log turned dirty, from a timer (flush.ms); 0 fsyncs before
	// every append returns; < 0 never fsyncs on a timer (data is still
	// fsynced when a segment is rolled and on Close). Default 1s.
	FlushInterval time.Duration
	// FlushMessages additionally fsyncs once this many records are
	// unflushed (flush.messages); <= 0 disables it.
	FlushMessages int64
	// MessageTimestampType is "CreateTime" or "LogAppendTime"
	// (message.timestamp.type).
	MessageTimestampType string
	// MaxMessageBytes is the largest batch accepted (max.message.bytes).
	// The log itself only enforces SegmentBytes; callers pass this to
	// record.Validate.
	MaxMessageBytes int
	// ProducerIDExpiration forgets idempotent producers that appended
	// nothing for this long, checked by ApplyRetention (broker config
	// producer.id.expiration.ms); <= 0 keeps them. Default 24h.
	ProducerIDExpiration time.Duration

	// Compact is cleanup.policy compact (or compact,delete): the log
	// cleaner keeps only the latest record of each key (cleaner.go).
	Compact bool
	// Delete is cleanup.policy delete (or compact,delete): RetentionMs and
	// RetentionBytes delete old segments. A compact-only log ignores them.
	Delete bool
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the log is
	// cleaned once the uncleaned part is this share of the cleanable bytes.
	// Default 0.5.
	MinCleanableDirtyRatio float64
	// MinCompactionLag is min.compaction.lag.ms: a record stays
	// uncompacted at least this long. Default 0.
	MinCompactionLag time.Duration
	// MaxCompactionLag is max.compaction.lag.ms: a record older than this
	// makes its segment cleanable whatever the dirty ratio. Default
	// infinite (math.MaxInt64).
	MaxCompactionLag time.Duration
	// DeleteRetention is delete.retention.ms: a tombstone (null value)
	// stays this long after the cleaner first reached it, so that
	// consumers reading from the start see the delete. Default 24 h.
	DeleteRetention time.Duration

	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes: how much a tiered log keeps on disk
	// (ApplyLocalRetentionUpTo). LocalRetentionSameAsTotal (-2, the
	// default) means RetentionMs and RetentionBytes.
	LocalRetentionMs    time.Duration
	LocalRetentionBytes int64
	// RemoteStorage is remote.storage.enable: the log is tiered, its
	// retention is ApplyLocalRetentionUpTo's (the broker decides).
	RemoteStorage bool
}

// DefaultConfig returns Kafka's defaults, except FlushInterval which is 1s
// (Kafka never fsyncs by default and relies on replication).
func DefaultConfig() Config {
	return Config{
		SegmentBytes:         1 << 30,
		SegmentMs:            7 * 24 * time.Hour,
		RetentionMs:          7 * 24 * time.Hour,
		RetentionBytes:       -1,
		IndexIntervalBytes:   4096,
		FlushInterval:        time.Second,
		FlushMessages:        0,
		MessageTimestampType: "CreateTime",
		MaxMessageBytes:      1048588,
		ProducerIDExpiration: 24 * time.Hour,

		Delete:                 true,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLag:       time.Duration(math.MaxInt64),
		DeleteRetention:        24 * time.Hour,
		LocalRetentionMs:       LocalRetentionSameAsTotal,
		LocalRetentionBytes:    LocalRetentionSameAsTotal,
	}
}

func (c Config) validate() error {
	var errs []error
	if c.SegmentBytes < 14 {
		errs = append(errs, fmt.Errorf("SegmentBytes %d is below 14", c.SegmentBytes))
	}
	if c.SegmentMs <= 0 {
		errs = append(errs, fmt.Errorf("SegmentMs %v must be positive", c.SegmentMs))
	}
	if c.IndexIntervalBytes < 0 {
		errs = append(errs, fmt.Errorf("IndexIntervalBytes %d is negative", c.IndexIntervalBytes))
	}
	if c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 || math.IsNaN(c.MinCleanableDirtyRatio) {
		errs = append(errs, fmt.Errorf("MinCleanableDirtyRatio %v is outside [0, 1]", c.MinCleanableDirtyRatio))
	}
	if c.MinCompactionLag < 0 || c.MaxCompactionLag < 1 || c.DeleteRetention < 0 {
		errs = append(errs, fmt.Errorf("compaction lags (min %v, max %v) or delete retention %v out of range", c.MinCompactionLag, c.MaxCompactionLag, c.DeleteRetention))
	}
	if c.MaxCompactionLag < c.MinCompactionLag {
		errs = append(errs, fmt.Errorf("MaxCompactionLag %v is below MinCompactionLag %v", c.MaxCompactionLag, c.MinCompactionLag))
	}
	if err := c.validateLocalRetention(); err != nil {
		errs = append(errs, err)
	}
	switch c.MessageTimestampType {
	case "CreateTime", "LogAppendTime", "":
	default:
		errs = append(errs, fmt.Errorf("MessageTimestampType %q is neither CreateTime nor LogAppendTime", c.MessageTimestampType))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid log config: %w", err)
	}
	return nil
}

func (c Config) logAppendTime() bool { return c.MessageTimestampType == "LogAppendTime" }

// Option configures Open.
type Option func(*options)

type options struct {
	logger logr.Logger
	now    func() time.Time
	fs     FS
	// onFailure: see WithOnFailure.
	onFailure func(error)
}

// WithLogger sets the logger (default: discard).
func WithLogger(l logr.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock used for LogAppendTime, segment age and time
// retention (default time.Now). The flush timer always uses real time.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithFS sets the file system (default OSFS{}); tests inject faults with it.
func WithFS(fs FS) Option { return func(o *options) { o.fs = fs } }

// WithOnFailure sets a callback told, on its own goroutine, about every
// write, roll or fsync of the log that failed (disk full, I/O error): the
// broker stops on the first (fail-stop, see docs/storage.md).
func WithOnFailure(f func(error)) Option { return func(o *options) { o.onFailure = f } }
