package log

import (
	"errors"
	"fmt"
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
	// interval from a background goroutine (flush.ms); 0 fsyncs before
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
}

// WithLogger sets the logger (default: discard).
func WithLogger(l logr.Logger) Option { return func(o *options) { o.logger = l } }

// WithClock sets the clock used for LogAppendTime, segment age and time
// retention (default time.Now). The flush timer always uses real time.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithFS sets the file system (default OSFS{}); tests inject faults with it.
func WithFS(fs FS) Option { return func(o *options) { o.fs = fs } }
