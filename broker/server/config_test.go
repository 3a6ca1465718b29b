package server

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
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
		"broker.id":                        "3",
		"listeners":                        "PLAINTEXT://0.0.0.0:9093",
		"advertised.listeners":             "PLAINTEXT://broker-3.example:9093",
		"log.dirs":                         "/data/a,/data/b",
		"zone":                             "zone-b",
		"log.retention.hours":              "2",
		"log.segment.bytes":                "1048576",
		"log.retention.check.interval.ms":  "1000",
		"num.partitions":                   "4",
		"group.initial.rebalance.delay.ms": "0",
		"wal.bucket":                       "fast-a",
		"fast.bucket.endpoint":             "http://s3",
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
	if b.LogDefaults["log.retention.ms"] != "7200000" || b.LogDefaults["log.segment.bytes"] != "1048576" {
		t.Fatalf("log defaults = %v", b.LogDefaults)
	}
	for _, bad := range []map[string]string{
		{"broker.id": "-1"},
		{"num.partitions": "0"},
		{"auto.create.topics.enable": "maybe"},
		{"socket.request.max.bytes": "10"},
		{"default.replication.factor": "3"},
		{"group.min.session.timeout.ms": "x"},
	} {
		c := DefaultConfig()
		if _, err := ApplySettings(&c, bad); err == nil {
			t.Errorf("ApplySettings(%v) accepted", bad)
		}
	}
}
