package server

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/cost"
)

func TestReadConfigFile(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "broker.properties")
	yml := filepath.Join(dir, "broker.yaml")
	if err := os.WriteFile(props, []byte(`# comment
! also a comment
broker.id=3
log.dirs = /data/a,/data/b
broker.rack: zone-a
wal.object.max.bytes=262144
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(yml, []byte(`
broker.id: 3
zone: zone-b
log:
  retention.ms: 3600000
wal:
  upload.interval.ms: 10
  buckets: [a, b]
auto.create.topics.enable: false
`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfigFile(props)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"broker.id": "3", "log.dirs": "/data/a,/data/b", "broker.rack": "zone-a", "wal.object.max.bytes": "262144"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("properties = %v, want %v", got, want)
	}
	got, err = ReadConfigFile(yml)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"broker.id": "3", "zone": "zone-b", "log.retention.ms": "3600000",
		"wal.upload.interval.ms": "10", "wal.buckets": "a,b", "auto.create.topics.enable": "false"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("yaml = %v, want %v", got, want)
	}
	if err := os.WriteFile(props, []byte("no separator here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfigFile(props); err == nil {
		t.Fatal("a line without = was accepted")
	}
}

func TestApplySettings(t *testing.T) {
	cfg := DefaultConfig()
	unknown, err := ApplySettings(&cfg, map[string]string{
		"broker.id":                            "3",
		"listeners":                            "PLAINTEXT://0.0.0.0:9093",
		"advertised.listeners":                 "PLAINTEXT://broker-3.example:9093",
		"log.dirs":                             "/data/a,/data/b",
		"zone":                                 "zone-b",
		"log.retention.hours":                  "2",
		"log.segment.bytes":                    "1048576",
		"log.retention.check.interval.ms":      "1000",
		"num.partitions":                       "4",
		"group.initial.rebalance.delay.ms":     "0",
		"group.share.record.lock.duration.ms":  "15000",
		"share.auto.offset.reset":              "earliest",
		"offsets.topic.num.partitions":         "50",
		"offsets.topic.replication.factor":     "2",
		"transaction.state.log.enable":         "false",
		"transaction.state.log.num.partitions": "7",
		"wal.bucket":                           "fast-a",
		"fast.bucket.endpoint":                 "http://s3",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(unknown, []string{"fast.bucket.endpoint", "wal.bucket"}) {
		t.Fatalf("unknown = %v", unknown)
	}
	b := cfg.Broker
	if b.NodeID != 3 || cfg.Listen != "0.0.0.0:9093" || b.Host != "broker-3.example" || b.Port != 9093 ||
		b.DataDir != "/data/a" || b.Rack != "zone-b" || b.DefaultPartitions != 4 ||
		cfg.RetentionCheckInterval != time.Second || cfg.Group.InitialRebalanceDelay != 0 {
		t.Fatalf("cfg = %+v", cfg)
	}
	if cfg.Share.RecordLockDuration != 15*time.Second || cfg.Share.AutoOffsetReset != "earliest" {
		t.Fatalf("share config = %+v", cfg.Share)
	}
	if cfg.OffsetsTopic != (InternalTopicConfig{Partitions: 50, ReplicationFactor: 2}) {
		t.Fatalf("offsets topic config = %+v", cfg.OffsetsTopic)
	}
	if cfg.TxnStateTopic != (InternalTopicConfig{Disabled: true, Partitions: 7}) {
		t.Fatalf("transaction state topic config = %+v", cfg.TxnStateTopic)
	}
	if b.LogDefaults["log.retention.ms"] != "7200000" || b.LogDefaults["log.segment.bytes"] != "1048576" {
		t.Fatalf("log defaults = %v", b.LogDefaults)
	}
	for _, bad := range []map[string]string{
		{"broker.id": "-1"},
		{"num.partitions": "0"},
		{"auto.create.topics.enable": "maybe"},
		{"socket.request.max.bytes": "10"},
		{"default.replication.factor": "0"},
		{"metadata.etcd.prefix": "cluster-without-prefix"},
		{"replica.lag.time.max.ms": "0"},
		{"replica.fetch.max.bytes": "12"},
		{"auto.leader.rebalance.enable": "sometimes"},
		{"controlled.shutdown.enable": "perhaps"},
		{"controlled.shutdown.timeout.ms": "0"},
		{"group.min.session.timeout.ms": "x"},
		{"log.cleaner.enable": "yes please"},
		{"log.cleaner.threads": "0"},
		{"log.cleaner.io.max.bytes.per.second": "-1"},
		{"log.cleaner.dedupe.buffer.size": "1000"},
		{"log.cleaner.backoff.ms": "0"},
		{"share.auto.offset.reset": "middle"},
		{"group.share.delivery.count.limit": "0"},
		{"offsets.topic.num.partitions": "0"},
		{"offsets.topic.replication.factor": "-1"},
		{"offsets.topic.enable": "sometimes"},
		{"transaction.state.log.replication.factor": "0"},
	} {
		c := DefaultConfig()
		if _, err := ApplySettings(&c, bad); err == nil {
			t.Errorf("ApplySettings(%v) accepted", bad)
		}
	}
}

func TestApplySettingsLogCleaner(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.LogCleaner != broker.DefaultCleanerConfig() {
		t.Fatalf("default cleaner config %+v", cfg.LogCleaner)
	}
	unknown, err := ApplySettings(&cfg, map[string]string{
		"log.cleaner.enable": "false", "log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": "1048576",
		"log.cleaner.dedupe.buffer.size": "2097152", "log.cleaner.backoff.ms": "100",
		"log.cleaner.delete.retention.ms": "1000", "log.cleanup.policy": "compact,delete",
	})
	if err != nil || len(unknown) != 0 {
		t.Fatalf("ApplySettings: %v, unknown %v", err, unknown)
	}
	want := broker.CleanerConfig{Disabled: true, Threads: 2, IOMaxBytesPerSecond: 1 << 20, DedupeBufferSize: 2 << 20, Backoff: 100 * time.Millisecond}
	if cfg.LogCleaner != want {
		t.Fatalf("cleaner config %+v, want %+v", cfg.LogCleaner, want)
	}
	if cfg.Broker.LogDefaults["log.cleaner.delete.retention.ms"] != "1000" || cfg.Broker.LogDefaults["log.cleanup.policy"] != "compact,delete" {
		t.Fatalf("log defaults %v", cfg.Broker.LogDefaults)
	}
}

func TestApplySettingsCluster(t *testing.T) {
	t.Setenv("POD_NAME", "prod-zone-b-3")
	tests := []struct {
		name string
		kv   map[string]string
		want func(Config) bool
	}{
		{"operator ConfigMap", map[string]string{
			"broker.id.base": "100", "metadata.etcd.endpoints": "http://e-0:2379, http://e-1:2379",
			"metadata.etcd.prefix": "/strata/ns/prod/", "cluster.name": "prod",
		}, func(c Config) bool {
			return c.Broker.NodeID == 103 && len(c.Cluster.EtcdEndpoints) == 2 && c.Cluster.EtcdEndpoints[1] == "http://e-1:2379" &&
				c.Cluster.Name == "ns/prod"
		}},
		{"explicit broker.id wins over the base", map[string]string{"broker.id.base": "100", "broker.id": "7"}, func(c Config) bool {
			return c.Broker.NodeID == 7
		}},
		{"cluster.name alone", map[string]string{"cluster.name": "dev"}, func(c Config) bool { return c.Cluster.Name == "dev" }},
		{"replication settings", map[string]string{
			"replica.lag.time.max.ms": "1500", "replica.fetch.wait.max.ms": "100", "broker.session.timeout.ms": "4000",
			"default.replication.factor": "3", "auto.leader.rebalance.enable": "true",
		}, func(c Config) bool {
			return c.Cluster.Replica.LagTimeMax == 1500*time.Millisecond && c.Cluster.Replica.FetchMaxWait == 100*time.Millisecond &&
				c.Cluster.SessionTimeout == 4*time.Second && c.Broker.DefaultReplicationFactor == 3 && c.Cluster.Controller.AutoLeaderRebalance
		}},
		{"controlled shutdown: on by default in cluster mode", map[string]string{"metadata.etcd.endpoints": "http://e-0:2379"}, func(c Config) bool {
			return c.ControlledShutdownTimeout() == DefaultControlledShutdownTimeout
		}},
		{"controlled shutdown: timeout", map[string]string{"metadata.etcd.endpoints": "http://e-0:2379", "controlled.shutdown.timeout.ms": "5000"}, func(c Config) bool {
			return c.ControlledShutdownTimeout() == 5*time.Second
		}},
		{"controlled shutdown: off", map[string]string{"metadata.etcd.endpoints": "http://e-0:2379", "controlled.shutdown.enable": "false"}, func(c Config) bool {
			return c.ControlledShutdownTimeout() == 0
		}},
		{"controlled shutdown: nothing to hand over standalone", map[string]string{"controlled.shutdown.timeout.ms": "5000"}, func(c Config) bool {
			return c.ControlledShutdownTimeout() == 0
		}},
		{"WAL timings", map[string]string{"wal.retention.ms": "60000", "wal.download.timeout.ms": "250"}, func(c Config) bool {
			return c.Cluster.WAL.Retention == time.Minute && c.Cluster.WAL.DownloadTimeout == 250*time.Millisecond
		}},
		{"zone-local produce: off by default", map[string]string{"wal.enable": "true"}, func(c Config) bool {
			return !c.Cluster.WAL.ZoneLocalProduce
		}},
		{"zone-local produce", map[string]string{"wal.enable": "true", "wal.zonelocal.produce.enable": "true"}, func(c Config) bool {
			return c.Cluster.WAL.ZoneLocalProduce
		}},
		{"zone-local produce: inline fallback default", map[string]string{"wal.enable": "true"}, func(c Config) bool {
			return c.Cluster.WAL.ZoneLocalInline == 0 // newZoneLocal's 10 s
		}},
		{"zone-local produce: inline fallback period", map[string]string{"wal.enable": "true", "wal.zonelocal.produce.inline.ms": "2500"}, func(c Config) bool {
			return c.Cluster.WAL.ZoneLocalInline == 2500*time.Millisecond
		}},
		{"zone-local produce: inline fallback off", map[string]string{"wal.enable": "true", "wal.zonelocal.produce.inline.ms": "0"}, func(c Config) bool {
			return c.Cluster.WAL.ZoneLocalInline < 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			unknown, err := ApplySettings(&c, tt.kv)
			if err != nil || len(unknown) > 0 {
				t.Fatalf("ApplySettings: %v (unknown %v)", err, unknown)
			}
			if !tt.want(c) {
				t.Fatalf("config = %+v", c)
			}
		})
	}
	for _, bad := range []string{"0", "-1", "soon"} {
		c := DefaultConfig()
		if _, err := ApplySettings(&c, map[string]string{"wal.download.timeout.ms": bad}); err == nil {
			t.Fatalf("wal.download.timeout.ms=%s accepted", bad)
		}
	}
	for _, bad := range []string{"-1", "3600001", "soon"} {
		c := DefaultConfig()
		if _, err := ApplySettings(&c, map[string]string{"wal.zonelocal.produce.inline.ms": bad}); err == nil {
			t.Fatalf("wal.zonelocal.produce.inline.ms=%s accepted", bad)
		}
	}
	zl := DefaultConfig()
	if _, err := ApplySettings(&zl, map[string]string{"wal.zonelocal.produce.enable": "sometimes"}); err == nil {
		t.Fatal("wal.zonelocal.produce.enable=sometimes accepted")
	}
	t.Setenv("POD_NAME", "no-ordinal")
	c := DefaultConfig()
	if _, err := ApplySettings(&c, map[string]string{"broker.id.base": "100"}); err == nil {
		t.Fatal("broker.id.base without an ordinal in POD_NAME accepted")
	}
}

// TestApplySettingsCost: wal.policy, its max interval and the price table
// keys; bad values fail with the key named, other prices keep defaults.
func TestApplySettingsCost(t *testing.T) {
	cfg := DefaultConfig()
	unknown, err := ApplySettings(&cfg, map[string]string{
		"wal.policy": "cost", "wal.upload.max.interval.ms": "250", "wal.policy.object.max.bytes": "2097152", "wal.download.hedge.ms": "-1",
		"wal.auto.max.latency.ms": "80", "wal.auto.max.cost.ratio": "0.5",
		"cost.price.put.per.1000": "0.005", "cost.price.cross.zone.in.per.gb": "0",
	})
	if err != nil || len(unknown) > 0 {
		t.Fatalf("ApplySettings: %v (unknown %v)", err, unknown)
	}
	want := cost.Default()
	want.PutPer1000, want.CrossZoneInPerGB = 0.005, 0
	if cfg.Cluster.WAL.Policy != cost.PolicyCost || cfg.Cluster.WAL.MaxUploadInterval != 250*time.Millisecond || cfg.Prices != want {
		t.Fatalf("policy %q, max interval %v, prices %+v; want cost, 250ms, %+v", cfg.Cluster.WAL.Policy, cfg.Cluster.WAL.MaxUploadInterval, cfg.Prices, want)
	}
	if cfg.Cluster.WAL.DownloadHedge != -time.Millisecond {
		t.Fatalf("wal.download.hedge.ms: %v", cfg.Cluster.WAL.DownloadHedge)
	}
	if cfg.Cluster.WAL.PolicyMaxObjectBytes != 2<<20 {
		t.Fatalf("wal.policy.object.max.bytes: %d", cfg.Cluster.WAL.PolicyMaxObjectBytes)
	}
	if cfg.Cluster.WAL.AutoMaxLatency != 80*time.Millisecond || cfg.Cluster.WAL.AutoMaxCostRatio != 0.5 {
		t.Fatalf("wal.auto.max.latency.ms %v, wal.auto.max.cost.ratio %v; want 80ms, 0.5", cfg.Cluster.WAL.AutoMaxLatency, cfg.Cluster.WAL.AutoMaxCostRatio)
	}
	// Unset: the default bound (0 here, cost.DefaultMaxLatency when the
	// WAL starts); 0: no bound (-1 here).
	if cfg := DefaultConfig(); cfg.Cluster.WAL.AutoMaxLatency != 0 {
		t.Fatalf("wal.auto.max.latency.ms unset: %v, want 0 (the default bound)", cfg.Cluster.WAL.AutoMaxLatency)
	}
	noBound := DefaultConfig()
	if _, err := ApplySettings(&noBound, map[string]string{"wal.auto.max.latency.ms": "0"}); err != nil || noBound.Cluster.WAL.AutoMaxLatency != -1 {
		t.Fatalf("wal.auto.max.latency.ms=0: %v (%v), want -1 (no bound)", noBound.Cluster.WAL.AutoMaxLatency, err)
	}
	for k, v := range map[string]string{"wal.auto.max.latency.ms": "-1", "wal.auto.max.cost.ratio": "0", "wal.policy": "cheap", "wal.upload.max.interval.ms": "0", "wal.policy.object.max.bytes": "-1", "wal.download.hedge.ms": "-2", "cost.price.get.per.1000": "-1", "cost.price.request.included.bytes": "1.5"} {
		cfg := DefaultConfig()
		if _, err := ApplySettings(&cfg, map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want one naming the key", k, v, err)
		}
	}
}

// TestApplySettingsUploadHedge: wal.upload.hedge.ms sets the uploader's
// PUT hedge delay (-1 never, 0 adaptive); below -1 or not a number fails
// naming the key.
func TestApplySettingsUploadHedge(t *testing.T) {
	for v, want := range map[string]time.Duration{"-1": -time.Millisecond, "0": 0, "25": 25 * time.Millisecond} {
		cfg := DefaultConfig()
		if unknown, err := ApplySettings(&cfg, map[string]string{"wal.upload.hedge.ms": v}); err != nil || len(unknown) > 0 {
			t.Fatalf("wal.upload.hedge.ms=%s: %v (unknown %v)", v, err, unknown)
		}
		if cfg.Cluster.WAL.UploadHedge != want {
			t.Fatalf("wal.upload.hedge.ms=%s: %v, want %v", v, cfg.Cluster.WAL.UploadHedge, want)
		}
	}
	for _, v := range []string{"-2", "soon"} {
		cfg := DefaultConfig()
		if _, err := ApplySettings(&cfg, map[string]string{"wal.upload.hedge.ms": v}); err == nil || !strings.Contains(err.Error(), "wal.upload.hedge.ms") {
			t.Errorf("wal.upload.hedge.ms=%s: error %v, want one naming the key", v, err)
		}
	}
}

// TestReadConfigFileRefusesHiddenKeys: a key with a form feed, a vertical
// tab, a no-break space or any other whitespace or control character is
// refused, not trimmed into the key it spells. The operator let
// "node.id\f" through spec.config as a key it did not own, and this parser
// read it as node.id (issue 26: node.id 4242, the authorizer off,
// User:mallory a super user, pprof on).
func TestReadConfigFileRefusesHiddenKeys(t *testing.T) {
	for _, line := range []string{
		"node.id\f=4242",
		"authorizer.class.name\f=",
		"super.users\u00a0=User:mallory",
		"metrics.pprof.enable\f=true",
		"\fnode.id=4242",
		"node.id\v=4242",
		"node.id\u2028=4242",
		"node.id\u200b=4242",
		"node.id\x00=4242",
		"node.id\u000c:4242",
		`node.id\u000c=4242`, // the operator's escape of the first line
		`super.users\u00a0=User:mallory`,
		`node.id\f=4242`,
		`node\ id=4242`,
		`node.id\\=4242`,
		"node.id\xff=4242",
	} {
		path := filepath.Join(t.TempDir(), "broker.properties")
		if err := os.WriteFile(path, []byte("broker.rack=zone-a\n"+line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		kv, err := ReadConfigFile(path)
		if !errors.Is(err, ErrConfigKey) {
			t.Errorf("%q: read %v, err %v; want %v", line, kv, err, ErrConfigKey)
		}
	}
	// ApplySettings refuses them too (YAML files, --set).
	cfg := DefaultConfig()
	if _, err := ApplySettings(&cfg, map[string]string{"node.id\f": "4242"}); !errors.Is(err, ErrConfigKey) {
		t.Errorf("ApplySettings(node.id\\f): err %v, want %v (node.id %d)", err, ErrConfigKey, cfg.Broker.NodeID)
	}
}

// TestReadConfigFileEscapes: the escapes and layout of java.util.Properties
// read back what was written.
func TestReadConfigFileEscapes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.properties")
	if err := os.WriteFile(path, []byte(strings.Join([]string{
		`  indented.key   =   spaced value  `,
		`colon.key: v`,
		`escaped\=key=v\\w`,
		`unicode.value=a\u00a0b\u000c\ud83d\ude00\n`,
		`continued=one,\`,
		`    two`,
		`trailing.space=x\ `,
		`empty=`,
		`equals=a=b:c`,
		"",
	}, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"indented.key":   "spaced value",
		"colon.key":      "v",
		"escaped=key":    `v\w`,
		"unicode.value":  "a\u00a0b\f\U0001F600\n",
		"continued":      "one,two",
		"trailing.space": "x ",
		"empty":          "",
		"equals":         "a=b:c",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read %q\nwant %q", got, want)
	}
}

// FuzzParseProperties: the properties parser never panics and never
// returns a key CheckConfigKey refuses, whatever the file holds.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{
		"broker.id=3\nlog.dirs = /data\n",
		"node.id\f=4242\n",
		`super.users\u00a0=User:mallory`,
		"a=b\\\n  c\n",
		`k\=x=v\ `,
		"# c\n! c\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		kv, err := parseProperties(raw)
		if err != nil {
			return
		}
		for k := range kv {
			if err := CheckConfigKey(k); err != nil {
				t.Fatalf("parsed a refused key: %v", err)
			}
		}
	})
}
