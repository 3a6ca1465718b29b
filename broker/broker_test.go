package broker

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
)

func openTest(t *testing.T, dir string, mutate ...func(*Config)) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = dir
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := Open(context.Background(), cfg, logr.Discard())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"a b", false},
		{"ünicode", false},
		{"a/b", false},
	}
	for _, tt := range tests {
		err := ValidateTopicName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateTopicName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, kerr.InvalidTopicException) {
			t.Errorf("ValidateTopicName(%q) = %v, want INVALID_TOPIC_EXCEPTION", tt.name, err)
		}
	}
}

func TestValidateTopicConfig(t *testing.T) {
	tests := []struct {
		name, value string
		ok          bool
	}{
		{"retention.ms", "-1", true},
		{"retention.ms", "-2", false},
		{"retention.ms", "1.5", false},
		{"retention.bytes", "1073741824", true},
		{"segment.bytes", "13", false},
		{"segment.bytes", "14", true},
		{"segment.bytes", "9999999999", false}, // not an int32
		{"segment.ms", "0", false},
		{"max.message.bytes", "1", true},
		{"max.message.bytes", "0", false}, // not "no limit" (issue 26: a 32 KB zstd batch of 1 GiB was accepted)
		{"max.message.bytes", "-1", false},
		{"min.insync.replicas", "0", false},
		{"local.retention.ms", "-2", true},
		{"message.timestamp.type", "LogAppendTime", true},
		{"message.timestamp.type", "logappendtime", false},
		{"cleanup.policy", "delete", true},
		{"cleanup.policy", "compact", true},
		{"cleanup.policy", "compact,delete", true},
		{"cleanup.policy", "delete,compact", true},
		{"cleanup.policy", "compact,compact", false},
		{"cleanup.policy", "", false},
		{"cleanup.policy", "Compact", false},
		{"min.cleanable.dirty.ratio", "0.5", true},
		{"min.cleanable.dirty.ratio", "1.5", false},
		{"min.cleanable.dirty.ratio", "NaN", false},
		{"min.compaction.lag.ms", "-1", false},
		{"max.compaction.lag.ms", "0", false},
		{"delete.retention.ms", "0", true},
		{"compression.type", "producer", true},
		{"compression.type", "zstd", false},
		{"flush.ms", "0", true},
		{"flush.messages", "0", false},
		{"leader.placement.zone", "us-east-1a", true},
		{"leader.placement.zone", "", true},
		{"leader.placement.zone", "a,b", false},
		{"leader.placement.zone", "zone b", false},
		{"no.such.thing", "1", false},
	}
	for _, tt := range tests {
		err := ValidateTopicConfig(tt.name, tt.value)
		if (err == nil) != tt.ok {
			t.Errorf("%s=%s: %v, want ok=%v", tt.name, tt.value, err, tt.ok)
		}
		if err != nil && !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("%s=%s: %v, want INVALID_CONFIG", tt.name, tt.value, err)
		}
	}
}

func TestLogConfigMapping(t *testing.T) {
	b := openTest(t, t.TempDir(), func(c *Config) {
		c.LogDefaults = map[string]string{"log.segment.bytes": "4096", "log.flush.interval.ms": "0"}
		c.ProducerIDExpiration = time.Hour
	})
	got := b.logConfig(map[string]string{"retention.ms": "-1", "message.timestamp.type": "LogAppendTime", "flush.messages": "10"})
	if got.SegmentBytes != 4096 || got.RetentionMs >= 0 || got.FlushInterval != 0 || got.FlushMessages != 10 ||
		got.MessageTimestampType != "LogAppendTime" || got.MaxMessageBytes != 1048588 || got.ProducerIDExpiration != time.Hour {
		t.Fatalf("logConfig = %+v", got)
	}
	def := openTest(t, t.TempDir()).logConfig(nil)
	if def.FlushInterval.Milliseconds() != 1000 || def.FlushMessages != 0 || def.RetentionMs.Hours() != 168 {
		t.Fatalf("default logConfig = %+v", def)
	}
	if def.Compact || !def.Delete || def.MinCleanableDirtyRatio != 0.5 || def.DeleteRetention != 24*time.Hour || def.MaxCompactionLag != time.Duration(math.MaxInt64) {
		t.Fatalf("default compaction configs = %+v", def)
	}
	cmp := openTest(t, t.TempDir(), func(c *Config) {
		c.LogDefaults = map[string]string{"log.cleaner.delete.retention.ms": "1000"}
	}).logConfig(map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1", "min.compaction.lag.ms": "5", "max.compaction.lag.ms": "60000"})
	if !cmp.Compact || cmp.Delete || cmp.MinCleanableDirtyRatio != 0.1 || cmp.MinCompactionLag != 5*time.Millisecond ||
		cmp.MaxCompactionLag != time.Minute || cmp.DeleteRetention != time.Second {
		t.Fatalf("compacted logConfig = %+v", cmp)
	}
	if both := openTest(t, t.TempDir()).logConfig(map[string]string{"cleanup.policy": "delete,compact"}); !both.Compact || !both.Delete {
		t.Fatalf("compact,delete logConfig = %+v", both)
	}
	never := openTest(t, t.TempDir()).logConfig(map[string]string{"flush.ms": maxLong})
	if never.FlushInterval >= 0 {
		t.Fatalf("flush.ms=Long.MAX maps to FlushInterval %v, want negative (no timer)", never.FlushInterval)
	}
	if err := log.ValidateConfig(got); err != nil {
		t.Fatalf("mapped config rejected by the log: %v", err)
	}
}

func TestOpenRejectsBadBrokerDefaults(t *testing.T) {
	for _, kv := range [][2]string{{"log.retention.ms", "soon"}, {"log.no.such", "1"}, {"log.cleaner.min.cleanable.ratio", "2"},
		{"log.cleaner.min.compaction.lag.ms", maxLong}} {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.LogDefaults = map[string]string{kv[0]: kv[1], "log.cleaner.max.compaction.lag.ms": "1000"}
		if b, err := Open(context.Background(), cfg, logr.Discard()); err == nil {
			b.Close()
			t.Errorf("Open accepted %s=%s", kv[0], kv[1])
		}
	}
}

// TestOpenChecksLeaderPlacement: policy Zone needs its zone, a zone needs
// policy Zone, and the policy is Balanced or Zone; each refusal says what to
// set.
func TestOpenChecksLeaderPlacement(t *testing.T) {
	tests := []struct {
		policy, zone string
		wantErr      string
	}{
		{"", "", ""},
		{"Balanced", "", ""},
		{"Zone", "b", ""},
		{"Zone", "", "leader.placement.policy=Zone needs leader.placement.zone"},
		{"", "b", "leader.placement.zone=b is set but leader.placement.policy is Balanced"},
		{"Balanced", "b", "leader.placement.zone=b is set but leader.placement.policy is Balanced"},
		{"zone", "b", `leader.placement.policy="zone": want Balanced or Zone`},
		{"Zone", "b c", "leader.placement.zone"},
	}
	for _, tt := range tests {
		t.Run(tt.policy+"/"+tt.zone, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.LeaderPlacementPolicy = tt.policy
			if tt.zone != "" {
				cfg.LogDefaults = map[string]string{"leader.placement.zone": tt.zone}
			}
			b, err := Open(context.Background(), cfg, logr.Discard())
			if err == nil {
				b.Close()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Open: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Open: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestPersistenceAndStrayPartitions(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	ctx := context.Background()
	info, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 2, ReplicationFactor: 1, Configs: map[string]*string{"retention.ms": ptr("5000")}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t.x", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t_x", Partitions: 1, ReplicationFactor: 1}, false); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("colliding name: %v", err)
	}
	p, err := b.Partition("t", 1)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := record.Build(record.DefaultSpec(), []record.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Append(batch); err != nil {
		t.Fatal(err)
	}
	pid1, err := b.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A partition directory of a topic that is not in the metadata (a
	// delete that crashed after writing the metadata) is removed on open.
	stray := filepath.Join(dir, "ghost-0")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}

	b2 := openTest(t, dir)
	got, ok := b2.Topic("t")
	if !ok || got.ID != info.ID || got.Partitions != 2 {
		t.Fatalf("after reopen: %+v %v, want %+v", got, ok, info)
	}
	entries, err := b2.DescribeTopicConfigs("t", []string{"retention.ms"})
	if err != nil || len(entries) != 1 || entries[0].Value != "5000" || entries[0].Source != SourceDynamicTopic {
		t.Fatalf("configs after reopen: %+v %v", entries, err)
	}
	p2, _ := b2.Partition("t", 1)
	if p2.Log.EndOffset() != 1 {
		t.Fatalf("end offset after reopen %d", p2.Log.EndOffset())
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray partition dir still there: %v", err)
	}
	pid2, err := b2.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if pid2 <= pid1 {
		t.Fatalf("producer ID %d after reopen, not above %d handed out before", pid2, pid1)
	}
	if _, err := Open(ctx, Config{DataDir: dir}, logr.Discard()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("opening a data dir that is open: %v, want an in-use error", err)
	}
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, Config{DataDir: dir, NodeID: 7}, logr.Discard()); err == nil {
		t.Fatalf("opening node 0's data dir as node 7 succeeded")
	}
}

func TestIncrementalListOps(t *testing.T) {
	if got := editList("a,b", "c", true); got != "a,b,c" {
		t.Fatalf("append: %q", got)
	}
	if got := editList("a,b,c", "b", false); got != "a,c" {
		t.Fatalf("subtract: %q", got)
	}
	if got := editList("a", "a", true); got != "a" {
		t.Fatalf("append existing: %q", got)
	}
}

func TestErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{kerr.TopicAlreadyExists, kerr.TopicAlreadyExists.Code},
		{record.ErrCorrupt, kerr.CorruptMessage.Code},
		{record.ErrInvalidRecord, kerr.InvalidRecord.Code},
		{record.ErrTooLarge, kerr.MessageTooLarge.Code},
		{record.ErrUnsupportedMagic, kerr.UnsupportedForMessageFormat.Code},
		{record.ErrUnsupportedCodec, kerr.UnsupportedCompressionType.Code},
		{log.ErrOffsetOutOfRange, kerr.OffsetOutOfRange.Code},
		{log.ErrLogFailed, kerr.KafkaStorageError.Code},
		{errors.New("boom"), kerr.UnknownServerError.Code},
	}
	for _, tt := range tests {
		if got := ErrorCode(wrap(tt.err)); got != tt.want {
			t.Errorf("ErrorCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(errors.New("context"), err)
}

func ptr(s string) *string { return &s }
