package controllers_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/controllers/plan"
)

func TestTemplateHashFollowsTheTemplate(t *testing.T) {
	kc := &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{Zones: []strata.ZoneSpec{{Name: "a", Brokers: 1}}}}
	kc.Namespace, kc.Name = "ns", "c"
	zi := controllers.ZoneInput{Zone: kc.Spec.Zones[0]}
	base := controllers.BuildZoneStatefulSet(kc, zi, "h1")
	if base.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Fatalf("update strategy %q, want OnDelete: the operator rolls the brokers", base.Spec.UpdateStrategy.Type)
	}
	hash := base.Spec.Template.Annotations[controllers.AnnotationTemplateHash]
	if hash == "" || hash != controllers.TemplateHash(&base.Spec.Template) {
		t.Fatalf("template hash %q does not match TemplateHash", hash)
	}
	if again := controllers.BuildZoneStatefulSet(kc, zi, "h1"); again.Spec.Template.Annotations[controllers.AnnotationTemplateHash] != hash {
		t.Fatal("the same spec renders another hash")
	}
	for name, change := range map[string]func(kc *strata.KafkaCluster) string{
		"config": func(*strata.KafkaCluster) string { return "h2" },
		"image":  func(kc *strata.KafkaCluster) string { kc.Spec.Image = "strata:next"; return "h1" },
		"resources": func(kc *strata.KafkaCluster) string {
			kc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			return "h1"
		},
	} {
		kc2 := kc.DeepCopy()
		cfg := change(kc2)
		got := controllers.BuildZoneStatefulSet(kc2, controllers.ZoneInput{Zone: kc2.Spec.Zones[0]}, cfg)
		if got.Spec.Template.Annotations[controllers.AnnotationTemplateHash] == hash {
			t.Errorf("%s change keeps the template hash: no roll", name)
		}
	}
}

func TestRollPods(t *testing.T) {
	zones := []controllers.ZoneInput{{Zone: strata.ZoneSpec{Name: "a", Brokers: 2}, IDBase: 0}, {Zone: strata.ZoneSpec{Name: "b", Brokers: 1}, IDBase: 100}}
	sts := func(replicas int32, hash string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		s.Spec.Replicas = ptr.To(replicas)
		s.Spec.Template.Annotations = map[string]string{controllers.AnnotationTemplateHash: hash}
		return s
	}
	pod := func(name, hash string, ready, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{controllers.AnnotationTemplateHash: hash}}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		if terminating {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return p
	}
	got := controllers.RollPods(zones, map[string]*appsv1.StatefulSet{"a": sts(2, "new"), "b": sts(1, "new")}, map[string]*corev1.Pod{
		"c-a-0": pod("c-a-0", "old", true, false),
		"c-a-1": pod("c-a-1", "new", false, true),
		// c-b-0 missing: its StatefulSet creates it from the current template
	}, "c")
	want := []plan.Pod{
		{Name: "c-a-0", BrokerID: 0, Ready: true, Current: false},
		{Name: "c-a-1", BrokerID: 1, Ready: false, Current: true, Terminating: true},
		{Name: "c-b-0", BrokerID: 100, Ready: false, Current: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pod %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// A pod without the annotation (made by an operator before OnDelete)
	// is outdated: it runs a template the operator no longer renders.
	legacy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-b-0"}}
	got = controllers.RollPods(zones[1:], map[string]*appsv1.StatefulSet{"b": sts(1, "new")}, map[string]*corev1.Pod{"c-b-0": legacy}, "c")
	if got[0].Current {
		t.Error("a pod without the template hash counts as current")
	}
}

func TestNextRollStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(d))) }
	stuckAfter := 10 * time.Minute
	go100 := plan.Restart{Pod: "p", BrokerID: 100, Reason: "broker 100: next"}
	wait := plan.Restart{Reason: "broker 100 is not yet in the ISR of 1 partitions (t-0)"}
	tests := []struct {
		name         string
		prev         *strata.RollStatus
		d            plan.Restart
		backlog      int32
		now          time.Time
		wantSince    *metav1.Time
		wantProgress *metav1.Time
		wantWaiting  *int32
		wantStuck    bool
		wantRest     *int32
	}{
		{name: "a restart clears the wait and is progress", prev: &strata.RollStatus{BlockedSince: since(0), WaitingFor: ptr.To[int32](3)}, d: go100, backlog: -1,
			now: t0.Add(time.Hour), wantProgress: since(time.Hour), wantRest: ptr.To[int32](100)},
		{name: "first wait starts the clock", prev: &strata.RollStatus{Restarting: ptr.To[int32](100)}, d: wait, backlog: 4, now: t0,
			wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](4), wantRest: ptr.To[int32](100)},
		{name: "waiting less than the timeout", prev: &strata.RollStatus{BlockedSince: since(0), LastProgressTime: since(0), WaitingFor: ptr.To[int32](4)}, d: wait, backlog: 4,
			now: t0.Add(stuckAfter), wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](4)},
		{name: "waiting longer without progress: stuck", prev: &strata.RollStatus{BlockedSince: since(0), LastProgressTime: since(0), WaitingFor: ptr.To[int32](4)}, d: wait, backlog: 4,
			now: t0.Add(stuckAfter + time.Second), wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](4), wantStuck: true},
		{name: "more to wait for is no progress", prev: &strata.RollStatus{BlockedSince: since(0), LastProgressTime: since(0), WaitingFor: ptr.To[int32](4)}, d: wait, backlog: 6,
			now: t0.Add(stuckAfter + time.Second), wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](6), wantStuck: true},
		// The slow but steady catch-up the fixed timeout from the
		// wait's start reported stuck.
		{name: "a catch-up that goes on is progress: not stuck", prev: &strata.RollStatus{BlockedSince: since(0), LastProgressTime: since(5 * time.Minute), WaitingFor: ptr.To[int32](4)}, d: wait, backlog: 3,
			now: t0.Add(stuckAfter + time.Second), wantSince: since(0), wantProgress: since(stuckAfter + time.Second), wantWaiting: ptr.To[int32](3)},
		{name: "backlog unknown: the clock runs on", prev: &strata.RollStatus{BlockedSince: since(0), LastProgressTime: since(0), WaitingFor: ptr.To[int32](4)}, d: wait, backlog: -1,
			now: t0.Add(stuckAfter + time.Second), wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](4), wantStuck: true},
		{name: "a status from before lastProgressTime: the wait's start counts", prev: &strata.RollStatus{BlockedSince: since(0)}, d: wait, backlog: 2,
			now: t0.Add(stuckAfter + time.Second), wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](2), wantStuck: true},
		{name: "no roll before", d: wait, backlog: 0, now: t0, wantSince: since(0), wantProgress: since(0), wantWaiting: ptr.To[int32](0)},
	}
	timeEq := func(a, b *metav1.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(b)) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, stuck := controllers.NextRollStatus(tt.prev, []int32{0, 100}, tt.d, tt.backlog, tt.now, stuckAfter)
			if stuck != tt.wantStuck {
				t.Errorf("stuck %v, want %v", stuck, tt.wantStuck)
			}
			if !ptr.Equal(st.Restarting, tt.wantRest) {
				t.Errorf("restarting %v, want %v", ptr.Deref(st.Restarting, -1), ptr.Deref(tt.wantRest, -1))
			}
			if !timeEq(st.BlockedSince, tt.wantSince) {
				t.Errorf("blockedSince %v, want %v", st.BlockedSince, tt.wantSince)
			}
			if !timeEq(st.LastProgressTime, tt.wantProgress) {
				t.Errorf("lastProgressTime %v, want %v", st.LastProgressTime, tt.wantProgress)
			}
			if !ptr.Equal(st.WaitingFor, tt.wantWaiting) {
				t.Errorf("waitingFor %v, want %v", ptr.Deref(st.WaitingFor, -1), ptr.Deref(tt.wantWaiting, -1))
			}
			if tt.d.Pod == "" && st.BlockedReason != tt.d.Reason {
				t.Errorf("blockedReason %q, want %q", st.BlockedReason, tt.d.Reason)
			}
			if st.Message != tt.d.Reason {
				t.Errorf("message %q, want %q", st.Message, tt.d.Reason)
			}
		})
	}
}

func TestRollStuckAfter(t *testing.T) {
	kc := func(d *metav1.Duration) *strata.KafkaCluster {
		return &strata.KafkaCluster{Spec: strata.KafkaClusterSpec{Roll: strata.RollSpec{StuckAfter: d}}}
	}
	tests := []struct {
		name     string
		kc       *strata.KafkaCluster
		operator time.Duration
		want     time.Duration
	}{
		{name: "default", kc: kc(nil), want: controllers.DefaultRollStuckAfter},
		{name: "the operator's setting", kc: kc(nil), operator: time.Minute, want: time.Minute},
		{name: "the cluster's spec.roll.stuckAfter first", kc: kc(&metav1.Duration{Duration: 2 * time.Hour}), operator: time.Minute, want: 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := controllers.RollStuckAfter(tt.kc, tt.operator); got != tt.want {
				t.Errorf("RollStuckAfter = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestKeepReplicas(t *testing.T) {
	blocks := []strata.BrokerIDBlock{{Zone: "a", Base: 0}, {Zone: "b", Base: 100}, {Zone: "gone", Base: 200, Retired: true}}
	tests := []struct {
		name     string
		current  map[string]int32
		spec     map[string]int32
		toRemove []int32
		drained  int32
		want     map[string]int32
	}{
		{name: "nothing to remove: the spec's, scale-up included",
			current: map[string]int32{"a": 1, "b": 1}, spec: map[string]int32{"a": 2, "b": 1}, drained: -1,
			want: map[string]int32{"a": 1, "b": 1}},
		{name: "2 -> 1 while broker 1 holds replicas: kept",
			current: map[string]int32{"a": 2, "b": 1}, spec: map[string]int32{"a": 1, "b": 1}, toRemove: []int32{1}, drained: -1,
			want: map[string]int32{"a": 2, "b": 1}},
		{name: "2 -> 1 once broker 1 is drained: shrinks",
			current: map[string]int32{"a": 2, "b": 1}, spec: map[string]int32{"a": 1, "b": 1}, toRemove: []int32{1}, drained: 1,
			want: map[string]int32{"a": 1, "b": 1}},
		{name: "3 -> 1: broker 2 drained, broker 1 not yet: only the top goes",
			current: map[string]int32{"a": 3}, spec: map[string]int32{"a": 1}, toRemove: []int32{1, 2}, drained: 2,
			want: map[string]int32{"a": 2}},
		{name: "a broker beyond the spec the metadata does not know (never started, or gone): its pod may go",
			current: map[string]int32{"a": 3}, spec: map[string]int32{"a": 1}, toRemove: []int32{1}, drained: -1,
			want: map[string]int32{"a": 2}},
		{name: "removed zone: kept until drained, then to zero",
			current: map[string]int32{"a": 1, "gone": 1}, spec: map[string]int32{"a": 1}, toRemove: []int32{200}, drained: -1,
			want: map[string]int32{"a": 1, "gone": 1}},
		{name: "removed zone drained",
			current: map[string]int32{"a": 1, "gone": 1}, spec: map[string]int32{"a": 1}, toRemove: []int32{200}, drained: 200,
			want: map[string]int32{"a": 1, "gone": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := controllers.KeepReplicas(tt.current, tt.spec, tt.toRemove, tt.drained, blocks)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for z, n := range tt.want {
				if got[z] != n {
					t.Errorf("zone %s: %d replicas, want %d (all: %v)", z, got[z], n, got)
				}
			}
		})
	}
}

// TestScalingProgress: three rounds of a drain of two brokers; the
// totals add up and bytesToMove grows when the second broker's drain
// starts.
func TestScalingProgress(t *testing.T) {
	rounds := []struct {
		inFlight, planned int
		bytesLeft         int64
		start             int32 // moves this round starts
		want              strata.ScalingStatus
	}{
		{0, 4, 400, 2, strata.ScalingStatus{MovesPlanned: 4, MovesStarted: 2, BytesToMove: 400, BytesLeft: 400}},
		// Two in flight, 100 bytes copied; two more planned and started.
		{2, 2, 300, 2, strata.ScalingStatus{MovesPlanned: 4, MovesStarted: 4, BytesToMove: 400, BytesLeft: 300}},
		{1, 0, 50, 0, strata.ScalingStatus{MovesPlanned: 4, MovesStarted: 4, MovesDone: 3, BytesToMove: 400, BytesLeft: 50}},
		// The first broker is empty; the next one has 3 moves of 600.
		{0, 3, 600, 3, strata.ScalingStatus{MovesPlanned: 7, MovesStarted: 7, MovesDone: 4, BytesToMove: 950, BytesLeft: 600}},
		{0, 0, 0, 0, strata.ScalingStatus{MovesPlanned: 7, MovesStarted: 7, MovesDone: 7, BytesToMove: 950, BytesLeft: 0}},
	}
	var prev *strata.ScalingStatus
	for i, r := range rounds {
		var st strata.ScalingStatus
		controllers.ScalingProgress(&st, prev, r.inFlight, r.planned, r.bytesLeft)
		st.MovesStarted += r.start
		if st != r.want {
			t.Fatalf("round %d: %+v, want %+v", i, st, r.want)
		}
		prev = &st
	}
}

func TestEtcdBlocksRoll(t *testing.T) {
	sts := func(replicas int32, mut func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd", Generation: 2},
			Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "demo-etcd-new", CurrentRevision: "demo-etcd-new"}}
		if mut != nil {
			mut(s)
		}
		return s
	}
	member := func(ord int, ready bool, revision string) corev1.Pod {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-etcd-" + string(rune('0'+ord)), Labels: map[string]string{appsv1.StatefulSetRevisionLabel: revision}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	terminating := func(p corev1.Pod) corev1.Pod { p.DeletionTimestamp = ptr.To(metav1.Now()); return p }
	readySince := func(p corev1.Pod, ago time.Duration) corev1.Pod {
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(-ago))
		return p
	}
	healthy := []corev1.Pod{member(0, true, "demo-etcd-new"), member(1, true, "demo-etcd-new"), member(2, true, "demo-etcd-new")}
	tests := []struct {
		name    string
		sts     *appsv1.StatefulSet
		pods    []corev1.Pod
		waiting int32
		why     string
	}{
		{"every member ready on the update revision", sts(3, nil), healthy, 0, ""},
		{"a member deleted (gone)", sts(3, nil), healthy[:2], 1, "1 of 3 etcd members not serving (etcd member demo-etcd-2 does not exist)"},
		{"a member terminating", sts(3, nil), []corev1.Pod{healthy[0], terminating(healthy[1]), healthy[2]}, 1, "demo-etcd-1 is terminating"},
		{"a member not ready", sts(3, nil), []corev1.Pod{member(0, false, "demo-etcd-new"), healthy[1], member(2, false, "demo-etcd-new")}, 2, "2 of 3 etcd members not serving (etcd member demo-etcd-0 is not ready)"},
		{"etcd's own roll under way", sts(3, func(s *appsv1.StatefulSet) { s.Status.CurrentRevision = "demo-etcd-old" }),
			[]corev1.Pod{member(0, true, "demo-etcd-old"), healthy[1], healthy[2]}, 1, "demo-etcd-0 is not yet on the StatefulSet's update revision"},
		{"a template change not yet observed", sts(3, func(s *appsv1.StatefulSet) { s.Generation = 3 }), healthy, 1, "generation 3 not yet observed"},
		{"a pod beyond replicas does not count", sts(1, nil), []corev1.Pod{healthy[0], member(1, false, "x")}, 0, ""},
		{"a member ready for a second only (just back)", sts(3, nil), []corev1.Pod{healthy[0], healthy[1], readySince(member(2, true, "demo-etcd-new"), time.Second)}, 1, "demo-etcd-2 is ready for less than 5s"},
		{"a member ready for a minute", sts(3, nil), []corev1.Pod{healthy[0], healthy[1], readySince(member(2, true, "demo-etcd-new"), time.Minute)}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waiting, why := controllers.EtcdBlocksRoll(tt.sts, tt.pods)
			if waiting != tt.waiting || (tt.why == "") != (why == "") || !strings.Contains(why, tt.why) {
				t.Fatalf("EtcdBlocksRoll = %d, %q; want %d, %q", waiting, why, tt.waiting, tt.why)
			}
		})
	}
}
