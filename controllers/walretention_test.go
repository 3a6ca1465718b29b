package controllers

import (
	"reflect"
	"testing"
	"time"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

func TestWALRetention(t *testing.T) {
	tests := []struct {
		name      string
		retention *metav1.Duration
		config    map[string]string
		want      time.Duration
		ok        bool
	}{
		{"default", nil, nil, time.Hour, true},
		{"spec", &metav1.Duration{Duration: 5 * time.Minute}, nil, 5 * time.Minute, true},
		{"config override wins", &metav1.Duration{Duration: 5 * time.Minute}, map[string]string{"wal.retention.ms": "120000"}, 2 * time.Minute, true},
		{"unparsable override", nil, map[string]string{"wal.retention.ms": "soon"}, 0, false},
		{"zero override", nil, map[string]string{"wal.retention.ms": "0"}, 0, false},
		{"negative override", nil, map[string]string{"wal.retention.ms": "-5"}, 0, false},
		{"overflowing override", nil, map[string]string{"wal.retention.ms": "9223372036854775807"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{WAL: strata.WALSpec{Retention: tt.retention}, Config: tt.config}}
			got, ok := WALRetention(kc)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("WALRetention = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestClustersUsingBucket(t *testing.T) {
	fb := &strata.FastBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wal-a"}}
	kc := func(ns, name string, refs ...string) strata.KafkaCluster {
		k := strata.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for i, r := range refs {
			z := strata.ZoneSpec{Name: string(rune('a' + i))}
			if r != "" {
				z.FastBucketRef = &strata.LocalObjectReference{Name: r}
			}
			k.Spec.Zones = append(k.Spec.Zones, z)
		}
		return k
	}
	bad := kc("ns", "bad", "wal-a")
	bad.Spec.Config = map[string]string{"wal.retention.ms": "x"}
	got := ClustersUsingBucket(fb, []strata.KafkaCluster{
		kc("ns", "zeta", "wal-b", "wal-a", "wal-a"), // referenced twice: listed once
		kc("ns", "other", "wal-b"),
		kc("other-ns", "same-name-elsewhere", "wal-a"),
		kc("ns", "noref", ""),
		bad,
		kc("ns", "alpha", "wal-a"),
	})
	want := []ClusterRetention{
		{Name: "ns/alpha", Retention: time.Hour, Known: true},
		{Name: "ns/bad"},
		{Name: "ns/zeta", Retention: time.Hour, Known: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ClustersUsingBucket = %+v, want %+v", got, want)
	}
}

func TestSweepInterval(t *testing.T) {
	tests := []struct {
		name     string
		clusters []ClusterRetention
		want     time.Duration
	}{
		{"no clusters", nil, time.Minute},
		{"long retention capped", []ClusterRetention{{Retention: time.Hour, Known: true}}, time.Minute},
		{"half the shortest", []ClusterRetention{{Retention: time.Hour, Known: true}, {Retention: 40 * time.Second, Known: true}}, 20 * time.Second},
		{"floor", []ClusterRetention{{Retention: 10 * time.Millisecond, Known: true}}, time.Second},
		{"unknown ignored", []ClusterRetention{{Known: false}, {Retention: 10 * time.Second, Known: true}}, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SweepInterval(tt.clusters); got != tt.want {
				t.Fatalf("SweepInterval = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPlanSweep(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	key := func(cluster, zone string, seq uint64) string { return wal.ObjectKey(cluster, zone, 101, 7, seq) }
	obj := func(k string, age time.Duration, size int64) objstore.ObjectInfo {
		o := objstore.ObjectInfo{Key: k, Size: size}
		if age >= 0 {
			o.LastModified = now.Add(-age)
		}
		return o
	}
	const noMtime = -1
	clusters := []ClusterRetention{
		{Name: "demo", Retention: 10 * time.Minute, Known: true},
		{Name: "short", Retention: time.Minute, Known: true},
		{Name: "unknown"},
	}
	listing := []objstore.ObjectInfo{
		obj(key("demo", "zone-a", 1), time.Hour, 100),                      // old: delete
		obj(key("demo", "zone-a", 2), 10*time.Minute, 200),                 // exactly the retention: delete
		obj(key("demo", "zone-a", 3), 10*time.Minute-time.Nanosecond, 300), // younger: keep
		obj(key("demo", "zone-b", 4), time.Hour, 400),                      // another zone's prefix: keep
		obj(key("short", "zone-a", 5), 2*time.Minute, 500),                 // shorter retention: delete
		obj(key("unknown", "zone-a", 6), 24*time.Hour, 600),                // retention unknown: keep
		obj(key("stranger", "zone-a", 7), 24*time.Hour, 700),               // not using the bucket: keep
		obj("wal/demo/zone-a/notes.txt", 24*time.Hour, 800),                // not a WAL key: keep
		obj("wal/demo/zone-a/101/7/1", 24*time.Hour, 900),                  // sequence not 20 digits: keep
		obj(key("demo", "zone-a", 10), noMtime, 1000),                      // no mtime, no header: keep, ask
		obj(key("demo", "zone-a", 11), noMtime, 1100),                      // no mtime, old header: delete
		obj(key("unknown", "zone-a", 12), noMtime, 1200),                   // no mtime, unknown retention: keep, no ask
	}
	created := map[string]time.Time{key("demo", "zone-a", 11): now.Add(-time.Hour)}
	plan := PlanSweep(listing, "zone-a", clusters, created, now)

	var del []string
	for _, o := range plan.Delete {
		del = append(del, o.Key)
	}
	wantDel := []string{key("demo", "zone-a", 1), key("demo", "zone-a", 2), key("demo", "zone-a", 11), key("short", "zone-a", 5)}
	if !reflect.DeepEqual(del, wantDel) {
		t.Errorf("Delete = %v\nwant %v", del, wantDel)
	}
	if len(plan.NeedCreated) != 1 || plan.NeedCreated[0].Key != key("demo", "zone-a", 10) {
		t.Errorf("NeedCreated = %v, want only seq 10", plan.NeedCreated)
	}
	if plan.Objects != 8 || plan.Bytes != 300+400+600+700+800+900+1000+1200 {
		t.Errorf("Objects, Bytes = %d, %d", plan.Objects, plan.Bytes)
	}
	tenMin, oneMin := metav1.Duration{Duration: 10 * time.Minute}, metav1.Duration{Duration: time.Minute}
	wantClusters := []strata.FastBucketWALCluster{
		{Name: "demo", Retention: &tenMin, Objects: 2, Bytes: 300 + 1000},
		{Name: "short", Retention: &oneMin},
		{Name: "unknown", Objects: 2, Bytes: 600 + 1200},
	}
	if !reflect.DeepEqual(plan.Clusters, wantClusters) {
		t.Errorf("Clusters = %+v\nwant %+v", plan.Clusters, wantClusters)
	}

	// No cluster: nothing is deleted, everything is counted.
	plan = PlanSweep(listing, "zone-a", nil, created, now)
	if len(plan.Delete) != 0 || plan.Objects != int64(len(listing)) {
		t.Errorf("without clusters: %d deletes, %d objects", len(plan.Delete), plan.Objects)
	}
	// A clock behind the objects (negative ages) deletes nothing.
	plan = PlanSweep(listing, "zone-a", clusters, created, now.Add(-48*time.Hour))
	if len(plan.Delete) != 0 {
		t.Errorf("clock in the past: deleted %v", plan.Delete)
	}
}

func TestLifecycleDays(t *testing.T) {
	r := func(d time.Duration) ClusterRetention { return ClusterRetention{Retention: d, Known: true} }
	tests := []struct {
		name     string
		clusters []ClusterRetention
		want     int32
		ok       bool
	}{
		{"no clusters", nil, 0, false},
		{"one hour", []ClusterRetention{r(time.Hour)}, 2, true},
		{"seconds", []ClusterRetention{r(3 * time.Second)}, 2, true},
		{"exactly a day", []ClusterRetention{r(24 * time.Hour)}, 2, true},
		{"a day and a bit", []ClusterRetention{r(24*time.Hour + time.Millisecond)}, 3, true},
		{"longest wins", []ClusterRetention{r(time.Hour), r(72 * time.Hour), r(time.Minute)}, 4, true},
		{"one unknown", []ClusterRetention{r(time.Hour), {Name: "x"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := LifecycleDays(tt.clusters)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("LifecycleDays = %d, %v; want %d, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestMergeLifecycleRules(t *testing.T) {
	days := func(n int32) *int32 { return &n }
	user := s3types.LifecycleRule{ID: strPtr("user-logs"), Status: s3types.ExpirationStatusEnabled,
		Filter: &s3types.LifecycleRuleFilter{Prefix: strPtr("logs/")}, Expiration: &s3types.LifecycleExpiration{Days: days(30)}}
	ours := func(n int32) s3types.LifecycleRule { return WALLifecycleRule(n) }
	stale := ours(2)
	stale.Filter = &s3types.LifecycleRuleFilter{Prefix: strPtr("")} // widened by hand: must be put back
	tests := []struct {
		name     string
		existing []s3types.LifecycleRule
		want     []s3types.LifecycleRule
		changed  bool
	}{
		{"empty", nil, []s3types.LifecycleRule{ours(2)}, true},
		{"user rule kept, ours appended", []s3types.LifecycleRule{user}, []s3types.LifecycleRule{user, ours(2)}, true},
		{"up to date", []s3types.LifecycleRule{user, ours(2)}, []s3types.LifecycleRule{user, ours(2)}, false},
		{"days changed in place", []s3types.LifecycleRule{ours(5), user}, []s3types.LifecycleRule{ours(2), user}, true},
		{"tampered filter restored", []s3types.LifecycleRule{stale}, []s3types.LifecycleRule{ours(2)}, true},
		{"duplicate dropped", []s3types.LifecycleRule{ours(2), user, ours(2)}, []s3types.LifecycleRule{ours(2), user}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := MergeLifecycleRules(tt.existing, 2)
			if changed != tt.changed || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("MergeLifecycleRules changed=%v rules=%+v\nwant changed=%v rules=%+v", changed, got, tt.changed, tt.want)
			}
		})
	}
	r := WALLifecycleRule(3)
	if *r.Filter.Prefix != "wal/" || *r.Expiration.Days != 3 || *r.ID != LifecycleRuleID || r.Status != s3types.ExpirationStatusEnabled {
		t.Fatalf("WALLifecycleRule(3) = %+v", r)
	}
}

func TestProbeDue(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	fb := func(gen, condGen int64, status metav1.ConditionStatus, lastAgo time.Duration, interval time.Duration) *strata.FastBucket {
		b := &strata.FastBucket{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		if interval > 0 {
			b.Spec.ProbeInterval = &metav1.Duration{Duration: interval}
		}
		if status != "" {
			b.Status.Conditions = []metav1.Condition{{Type: strata.ConditionReachable, Status: status, ObservedGeneration: condGen}}
			t := metav1.NewTime(now.Add(-lastAgo))
			b.Status.LastProbeTime = &t
		}
		return b
	}
	tests := []struct {
		name string
		fb   *strata.FastBucket
		due  bool
		wait time.Duration
	}{
		{"never probed", fb(1, 0, "", 0, 0), true, time.Minute},
		{"spec changed", fb(2, 1, metav1.ConditionTrue, time.Second, 0), true, time.Minute},
		{"recent success", fb(1, 1, metav1.ConditionTrue, 10*time.Second, 0), false, 50 * time.Second},
		{"success due", fb(1, 1, metav1.ConditionTrue, time.Minute, 0), true, time.Minute},
		{"failure retried within 30s", fb(1, 1, metav1.ConditionFalse, 10*time.Second, 5*time.Minute), false, 20 * time.Second},
		{"failure due", fb(1, 1, metav1.ConditionFalse, 30*time.Second, 5*time.Minute), true, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, wait := probeDue(tt.fb, now)
			if due != tt.due || wait != tt.wait {
				t.Fatalf("probeDue = %v, %v; want %v, %v", due, wait, tt.due, tt.wait)
			}
		})
	}
}
