package group

import (
	"testing"
	"time"
)

func TestShareConfigSet(t *testing.T) {
	var c ShareConfig
	for _, kv := range [][2]string{
		{"group.share.record.lock.duration.ms", "15000"},
		{"group.share.delivery.count.limit", "3"},
		{"group.share.session.timeout.ms", "20000"},
		{"group.share.heartbeat.interval.ms", "2000"},
		{"group.share.max.size", "50"},
		{"max.share.session.cache.size", "10"},
		{"share.auto.offset.reset", "earliest"},
		{"share.isolation.level", "read_committed"},
	} {
		if known, err := c.Set(kv[0], kv[1]); !known || err != nil {
			t.Fatalf("%s=%s: known %v, %v", kv[0], kv[1], known, err)
		}
	}
	want := ShareConfig{RecordLockDuration: 15 * time.Second, DeliveryCountLimit: 3, SessionTimeout: 20 * time.Second,
		HeartbeatInterval: 2 * time.Second, MaxGroupSize: 50, MaxSessions: 10, AutoOffsetReset: "earliest", IsolationLevel: "read_committed"}
	if c != want {
		t.Fatalf("%+v, want %+v", c, want)
	}
	if len(ShareSettingKeys) != 8 {
		t.Fatalf("ShareSettingKeys lists %d keys, Set knows 8", len(ShareSettingKeys))
	}
	for _, kv := range [][2]string{
		{"group.share.record.lock.duration.ms", "999"},
		{"group.share.delivery.count.limit", "11"},
		{"group.share.delivery.count.limit", "x"},
		{"group.share.max.size", "0"},
		{"share.auto.offset.reset", "none"},
		{"share.isolation.level", "read_committed "},
	} {
		if known, err := c.Set(kv[0], kv[1]); !known || err == nil {
			t.Errorf("%s=%s accepted", kv[0], kv[1])
		}
	}
	if known, _ := c.Set("group.max.size", "5"); known {
		t.Error("a consumer-group key taken for a share-group one")
	}
}
