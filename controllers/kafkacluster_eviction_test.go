package controllers_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/controllers"
	"github.com/strata-dev/strata/controllers/plan"
)

func TestNextEviction(t *testing.T) {
	// Brokers 0, 100, 200 (zones a, b, c); topic t: RF 3,
	// min.insync.replicas 2.
	pods := func(mod func(p *plan.Pod)) []plan.Pod {
		ps := []plan.Pod{
			{Name: "k-a-0", BrokerID: 0, Ready: true, Current: true},
			{Name: "k-b-0", BrokerID: 100, Ready: true, Current: true},
			{Name: "k-c-0", BrokerID: 200, Ready: true, Current: true},
		}
		if mod != nil {
			for i := range ps {
				mod(&ps[i])
			}
		}
		return ps
	}
	md := func(isr ...int32) plan.Metadata {
		return plan.Metadata{
			Controller: 0,
			MinISR:     map[string]int{"t": 2},
			Partitions: []plan.Partition{
				{Topic: "t", Partition: 0, Replicas: []int32{0, 100, 200}, ISR: isr, Leader: isr[0]},
				{Topic: "t", Partition: 1, Replicas: []int32{100, 200, 0}, ISR: []int32{100, 200, 0}, Leader: 100},
			},
		}
	}
	full := md(0, 100, 200)
	for _, tc := range []struct {
		name     string
		md       plan.Metadata
		pods     []plan.Pod
		cordoned map[string]string
		pod      string
		waiting  []string
		reason   string
	}{
		{name: "no cordoned node: nothing to do", md: full, pods: pods(nil)},
		{name: "in sync everywhere: the pod on the cordoned node goes", md: full, pods: pods(nil),
			cordoned: map[string]string{"k-c-0": "node-c"}, pod: "k-c-0", reason: "broker 200 is on cordoned node node-c and every partition"},
		{name: "its restart takes t-0 below min.insync.replicas: it waits and says so", md: md(0, 200), pods: pods(nil),
			cordoned: map[string]string{"k-c-0": "node-c"}, waiting: []string{"k-c-0"},
			reason: "1 broker pods on cordoned nodes (k-c-0) wait: restarting it would take partitions below min.insync.replicas: broker 200 by 1 partitions (t-0 ISR [0 200] min.insync.replicas 2)"},
		{name: "a broker out of the ISR of t-0 already goes (the partition loses nothing)", md: md(0, 200), pods: pods(nil),
			cordoned: map[string]string{"k-b-0": "node-b"}, pod: "k-b-0"},
		{name: "another broker not ready: one at a time", md: full,
			pods:     pods(func(p *plan.Pod) { p.Ready = p.Ready && p.Name != "k-a-0" }),
			cordoned: map[string]string{"k-c-0": "node-c"}, waiting: []string{"k-c-0"},
			reason: "pod k-a-0 (broker 0) is not ready: one broker at a time"},
		{name: "another broker terminating: one at a time", md: full,
			pods:     pods(func(p *plan.Pod) { p.Terminating = p.Name == "k-b-0" }),
			cordoned: map[string]string{"k-c-0": "node-c"}, waiting: []string{"k-c-0"},
			reason: "pod k-b-0 (broker 100) is terminating"},
		{name: "the pod on the cordoned node already terminating: nothing more", md: full,
			pods:     pods(func(p *plan.Pod) { p.Terminating = p.Name == "k-c-0" }),
			cordoned: map[string]string{"k-c-0": "node-c"}},
		{name: "two brokers on cordoned nodes: the controller last", md: full, pods: pods(nil),
			cordoned: map[string]string{"k-a-0": "node-a", "k-b-0": "node-b"}, pod: "k-b-0"},
		{name: "two brokers on cordoned nodes, one not ready: that one first", md: full,
			pods:     pods(func(p *plan.Pod) { p.Ready = p.Ready && p.Name != "k-c-0" }),
			cordoned: map[string]string{"k-b-0": "node-b", "k-c-0": "node-c"}, pod: "k-c-0", reason: "not ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := controllers.NextEviction(tc.md, tc.pods, tc.cordoned)
			if e.Pod != tc.pod {
				t.Fatalf("pod %q, want %q (%s)", e.Pod, tc.pod, e.Reason)
			}
			if strings.Join(e.Waiting, ",") != strings.Join(tc.waiting, ",") {
				t.Errorf("waiting %v, want %v", e.Waiting, tc.waiting)
			}
			if !strings.Contains(e.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", e.Reason, tc.reason)
			}
			if tc.pod != "" && e.Node != tc.cordoned[tc.pod] {
				t.Errorf("node %q, want %q", e.Node, tc.cordoned[tc.pod])
			}
		})
	}
}

func TestEtcdBlocksEviction(t *testing.T) {
	member := func(ord string, ready, terminating bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "k-etcd-" + ord}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		pods  []corev1.Pod
		block bool
	}{
		{"all serving", []corev1.Pod{member("0", true, false), member("1", true, false), member("2", true, false)}, false},
		{"one member gone with the drained node: a quorum serves", []corev1.Pod{member("0", true, false), member("1", true, false)}, false},
		{"one gone, one not ready: no quorum", []corev1.Pod{member("0", true, false), member("1", false, false)}, true},
		{"one gone, one terminating: no quorum", []corev1.Pod{member("0", true, false), member("1", true, true)}, true},
		{"another StatefulSet's pods do not count", []corev1.Pod{member("0", true, false), {ObjectMeta: metav1.ObjectMeta{Name: "other-1"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := controllers.EtcdBlocksEviction(3, tc.pods, "k-etcd")
			if (why != "") != tc.block {
				t.Fatalf("EtcdBlocksEviction = %q, want blocked %v", why, tc.block)
			}
		})
	}
}

func TestNodeDraining(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  corev1.Node
		drain bool
	}{
		{"schedulable", corev1.Node{}, false},
		{"cordoned (kubectl cordon, kubectl drain)", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}, true},
		{"the cluster autoscaler's scale-down taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{"Karpenter's disruption taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}}}, true},
		{"the autoscaler's soft candidate taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectPreferNoSchedule}}}}, false},
		{"another taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := controllers.NodeDraining(&tc.node); got != tc.drain {
				t.Fatalf("NodeDraining = %v, want %v", got, tc.drain)
			}
		})
	}
}
