package protocol_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/brokertest"
)

func sp(s string) *string { return &s }

func TestCreateTopics(t *testing.T) {
	b := brokertest.Start(t)
	cl := newClient(t, b.Addr())
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "exists", 2, nil)

	tests := []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    []kmsg.CreateTopicsRequestTopicConfig
		validate   bool
		want       error
	}{
		{name: "ok", topic: "fresh", partitions: 3, rf: 1},
		{name: "defaults", topic: "defaults", partitions: -1, rf: -1},
		{name: "validate only", topic: "not-created", partitions: 1, rf: 1, validate: true},
		{name: "exists", topic: "exists", partitions: 1, rf: 1, want: kerr.TopicAlreadyExists},
		{name: "rf 3", topic: "rf3", partitions: 1, rf: 3, want: kerr.InvalidReplicationFactor},
		{name: "zero partitions", topic: "p0", partitions: 0, rf: 1, want: kerr.InvalidPartitions},
		{name: "bad char", topic: "a/b", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "dot", topic: ".", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "dotdot", topic: "..", partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "too long", topic: strings.Repeat("x", 250), partitions: 1, rf: 1, want: kerr.InvalidTopicException},
		{name: "max length", topic: strings.Repeat("y", 249), partitions: 1, rf: 1},
		{name: "unknown config", topic: "uc", partitions: 1, rf: 1, want: kerr.InvalidConfig,
			configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "no.such.config", Value: sp("1")}}},
		{name: "bad config value", topic: "bv", partitions: 1, rf: 1, want: kerr.InvalidConfig,
			configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: sp("soon")}}},
		{name: "compact", topic: "cp", partitions: 1, rf: 1,
			configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: sp("compact")}}},
		{name: "min compaction lag above max", topic: "lag", partitions: 1, rf: 1, want: kerr.InvalidConfig,
			configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "min.compaction.lag.ms", Value: sp("10")}, {Name: "max.compaction.lag.ms", Value: sp("5")}}},
		{name: "with configs", topic: "configured", partitions: 1, rf: 1,
			configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: sp("3600000")}, {Name: "message.timestamp.type", Value: sp("LogAppendTime")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.ValidateOnly = tt.validate
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor, rt.Configs = tt.topic, tt.partitions, tt.rf, tt.configs
			req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
			resp, err := req.RequestWith(testCtx(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			got := kerr.ErrorForCode(resp.Topics[0].ErrorCode)
			if !errors.Is(got, tt.want) && !(got == nil && tt.want == nil) {
				t.Fatalf("error %v, want %v (message %v)", got, tt.want, resp.Topics[0].ErrorMessage)
			}
			if got != nil {
				return
			}
			md, err := adm.ListTopics(testCtx(t), tt.topic)
			if err != nil {
				t.Fatal(err)
			}
			exists := md.Has(tt.topic) && md[tt.topic].Err == nil
			if exists == tt.validate {
				t.Fatalf("topic exists=%v after create with validateOnly=%v", exists, tt.validate)
			}
			if !tt.validate {
				wantParts := tt.partitions
				if wantParts == -1 {
					wantParts = 1
				}
				if n := len(md[tt.topic].Partitions); int32(n) != wantParts {
					t.Fatalf("%d partitions, want %d", n, wantParts)
				}
				if resp.Topics[0].TopicID == ([16]byte{}) || md[tt.topic].ID != resp.Topics[0].TopicID {
					t.Fatalf("topic ID %x, metadata says %x", resp.Topics[0].TopicID, md[tt.topic].ID)
				}
			}
		})
	}
}

func TestDeleteTopicAndCreatePartitions(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "doomed", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("doomed"))
	if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	cp, err := adm.CreatePartitions(testCtx(t), 2, "doomed")
	if err != nil || cp["doomed"].Err != nil {
		t.Fatalf("CreatePartitions: %v %v", err, cp["doomed"].Err)
	}
	md, err := adm.ListTopics(testCtx(t), "doomed")
	if err != nil || len(md["doomed"].Partitions) != 3 {
		t.Fatalf("after CreatePartitions: %v, %+v", err, md["doomed"])
	}
	cp, err = adm.UpdatePartitions(testCtx(t), 2, "doomed")
	if err != nil || !errors.Is(cp["doomed"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking partitions: %v %v, want INVALID_PARTITIONS", err, cp["doomed"].Err)
	}

	dr, err := adm.DeleteTopics(testCtx(t), "doomed")
	if err != nil || dr["doomed"].Err != nil {
		t.Fatalf("DeleteTopics: %v %v", err, dr["doomed"].Err)
	}
	dr, err = adm.DeleteTopics(testCtx(t), "doomed")
	if err != nil || !errors.Is(dr["doomed"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting twice: %v %v, want UNKNOWN_TOPIC_OR_PARTITION", err, dr["doomed"].Err)
	}
	md, err = adm.ListTopics(testCtx(t))
	if err != nil || md.Has("doomed") {
		t.Fatalf("topic still listed: %v %v", err, md.Names())
	}
	// The name is free again and the new topic starts empty.
	createTopic(t, adm, "doomed", 1, nil)
	ends, err := adm.ListEndOffsets(testCtx(t), "doomed")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("doomed", 0); o.Offset != 0 {
		t.Fatalf("recreated topic end offset %d, want 0", o.Offset)
	}
}

func TestConfigsRoundTrip(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("log.retention.ms", "86400000"))
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "cfg", 1, map[string]*string{"segment.bytes": sp("1048576")})

	describe := func() map[string]*kadm.Config {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(testCtx(t), "cfg")
		if err != nil {
			t.Fatal(err)
		}
		r, err := rc.On("cfg", nil)
		if err != nil || r.Err != nil {
			t.Fatalf("describe: %v %v", err, r.Err)
		}
		out := map[string]*kadm.Config{}
		for _, c := range r.Configs {
			out[c.Key] = &c
		}
		return out
	}
	cfg := describe()
	if c := cfg["segment.bytes"]; c.MaybeValue() != "1048576" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("segment.bytes = %+v", c)
	}
	if c := cfg["retention.ms"]; c.MaybeValue() != "86400000" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("retention.ms = %+v, want the broker default", c)
	}
	if c := cfg["max.message.bytes"]; c.MaybeValue() != "1048588" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("max.message.bytes = %+v", c)
	}

	// Incremental: set one, delete another.
	ar, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("1000")},
		{Op: kadm.DeleteConfig, Name: "segment.bytes"},
	}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, ar)
	}
	cfg = describe()
	if cfg["retention.ms"].MaybeValue() != "1000" || cfg["segment.bytes"].MaybeValue() != "1073741824" {
		t.Fatalf("after incremental alter: retention.ms=%s segment.bytes=%s", cfg["retention.ms"].MaybeValue(), cfg["segment.bytes"].MaybeValue())
	}
	// Bad values and unknown names are refused and change nothing.
	for _, bad := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("-5")},
		{Op: kadm.SetConfig, Name: "unknown.thing", Value: sp("1")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: sp("1")},
	} {
		ar, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{bad}, "cfg")
		if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
			t.Fatalf("altering %+v: %v %+v, want INVALID_CONFIG", bad, err, ar)
		}
	}
	if cfg = describe(); cfg["retention.ms"].MaybeValue() != "1000" {
		t.Fatalf("a refused alter changed retention.ms to %s", cfg["retention.ms"].MaybeValue())
	}
	// Legacy AlterConfigs replaces the whole set.
	lr, err := adm.AlterTopicConfigsState(testCtx(t), []kadm.AlterConfig{{Name: "max.message.bytes", Value: sp("2000")}}, "cfg")
	if err != nil || lr[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %+v", err, lr)
	}
	cfg = describe()
	if cfg["max.message.bytes"].MaybeValue() != "2000" || cfg["retention.ms"].MaybeValue() != "86400000" {
		t.Fatalf("after AlterConfigs: max.message.bytes=%s retention.ms=%s", cfg["max.message.bytes"].MaybeValue(), cfg["retention.ms"].MaybeValue())
	}
	// The new max.message.bytes applies to produce at once.
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("cfg"), kgo.ProducerBatchMaxBytes(1<<20))
	big := make([]byte, 4000)
	_, _ = rand.Read(big) // incompressible
	err = p.ProduceSync(testCtx(t), &kgo.Record{Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("producing 4000 bytes over max.message.bytes=2000: %v, want MESSAGE_TOO_LARGE", err)
	}

	// Broker configs.
	brc, err := adm.DescribeBrokerConfigs(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range brc {
		for _, c := range r.Configs {
			if c.Key == "log.retention.ms" {
				found = c.MaybeValue() == "86400000" && c.Source == kmsg.ConfigSourceStaticBrokerConfig
			}
		}
	}
	if !found {
		t.Fatalf("broker config log.retention.ms not reported as the static 86400000: %+v", brc)
	}
}

func TestListOffsetsByTime(t *testing.T) {
	b := brokertest.Start(t)
	adm := newAdmin(t, b.Addr())
	createTopic(t, adm, "times", 1, nil)
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("times"), kgo.ProducerLinger(0))
	base := time.UnixMilli(1_700_000_000_000)
	// Timestamps 0s, 10s, 20s, ...; the max timestamp is at offset 7 (out of order).
	stamps := []time.Duration{0, 10, 20, 30, 40, 50, 60, 500, 70, 80}
	for _, s := range stamps {
		if err := p.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("v"), Timestamp: base.Add(s * time.Second)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		ts         int64
		wantOffset int64
	}{
		{"before everything", base.UnixMilli() - 1, 0},
		{"exact", base.Add(20 * time.Second).UnixMilli(), 2},
		{"between", base.Add(25 * time.Second).UnixMilli(), 3},
		{"after everything", base.Add(time.Hour).UnixMilli(), -1},
		{"earliest", -2, 0},
		{"latest", -1, 10},
		{"max timestamp", -3, 7},
	}
	cl := newClient(t, b.Addr())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version = 7
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "times"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = tt.ts
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(testCtx(t), cl)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Topics[0].Partitions[0]
			if got.ErrorCode != 0 || got.Offset != tt.wantOffset {
				t.Fatalf("offset %d (error %d), want %d", got.Offset, got.ErrorCode, tt.wantOffset)
			}
		})
	}
	// kadm's by-time listing agrees.
	lo, err := adm.ListOffsetsAfterMilli(testCtx(t), base.Add(35*time.Second).UnixMilli(), "times")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("times", 0); o.Offset != 4 {
		t.Fatalf("kadm ListOffsetsAfterMilli = %d, want 4", o.Offset)
	}
}

func TestUnknownTopic(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithSetting("auto.create.topics.enable", "false"))
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("missing"), kgo.RecordRetries(0), kgo.UnknownTopicRetries(0))
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("producing to a missing topic without auto-create: %v", err)
	}
}
