package plan

import (
	"slices"
	"strings"
	"testing"
)

// The test cluster: zones a, b, c with ID blocks 0, 100, 200.
var zoneOfID = func(id int32) string { return string(rune('a' + id/100)) }

func brokers(ids ...int32) []Broker {
	out := make([]Broker, len(ids))
	for i, id := range ids {
		out[i] = Broker{ID: id, Rack: zoneOfID(id)}
	}
	return out
}

func wanted(ids ...int32) []Wanted {
	out := make([]Wanted, len(ids))
	for i, id := range ids {
		out[i] = Wanted{Zone: zoneOfID(id), Ordinal: id % 100, ID: id}
	}
	return out
}

// part is a healthy partition of topic t: leader = first replica, full ISR.
func part(t string, p int32, replicas ...int32) Partition {
	return Partition{Topic: t, Partition: p, Replicas: replicas, ISR: slices.Clone(replicas), Leader: replicas[0]}
}

func withISR(p Partition, isr ...int32) Partition { p.ISR = isr; return p }

func withLeader(p Partition, l int32) Partition { p.Leader = l; return p }

func pod(id int32, ready, current bool) Pod {
	return Pod{Name: "broker-" + zoneOfID(id) + "-" + string(rune('0'+id%100)), BrokerID: id, Ready: ready, Current: current}
}

func terminating(p Pod) Pod { p.Terminating = true; return p }

func TestNextRestart(t *testing.T) {
	healthy := Metadata{
		Brokers:    brokers(0, 100, 200),
		Controller: 0,
		Partitions: []Partition{part("t", 0, 0, 100, 200), part("t", 1, 0, 200, 100), part("t", 2, 100, 0, 200)},
		MinISR:     map[string]int{"t": 2},
	}
	all := func(current bool) []Pod {
		return []Pod{pod(0, true, current), pod(100, true, current), pod(200, true, current)}
	}
	with := func(md Metadata, f func(*Metadata)) Metadata {
		md.Partitions = slices.Clone(md.Partitions)
		md.Brokers = slices.Clone(md.Brokers)
		f(&md)
		return md
	}
	tests := []struct {
		name        string
		md          Metadata
		pods        []Pod
		pod         string // "" = none
		done        bool
		reason      string
		unavailable []string
	}{
		{"every pod current: done", healthy, all(true), "", true, "current revision", nil},
		// Leads: 0 → 2, 100 → 1, 200 → 0; 0 is the controller.
		{"fewest leaderships first", healthy, all(false), "broker-c-0", false, "broker 200: outdated revision, next in order (leads 0", nil},
		{"the controller last", with(healthy, func(m *Metadata) { m.Controller = 200 }), all(false), "broker-b-0", false, "leads 1 partitions", nil},
		{"only the controller left", healthy, []Pod{pod(0, true, false), pod(100, true, true), pod(200, true, true)}, "broker-a-0", false, "the controller, restarted last", nil},
		{"ties by broker ID", with(healthy, func(m *Metadata) {
			m.Partitions = []Partition{part("t", 0, 0, 100, 200)}
		}), []Pod{pod(200, true, false), pod(100, true, false), pod(0, true, true)}, "broker-b-0", false, "broker 100", nil},
		{"a pod terminating: one at a time", healthy, []Pod{terminating(pod(0, false, true)), pod(100, true, false), pod(200, true, false)}, "", false, "broker-a-0 (broker 0) is terminating", nil},
		{"a restarted pod not ready yet", healthy, []Pod{pod(0, false, true), pod(100, true, false), pod(200, true, false)}, "", false, "broker-a-0 (broker 0) is not ready: waiting", nil},
		{"a restarted pod ready but still catching up: the gate blocks the brokers sharing its partitions at min.insync.replicas", with(healthy, func(m *Metadata) {
			m.Partitions[2] = withISR(m.Partitions[2], 100, 200)
		}), []Pod{pod(0, true, true), pod(100, true, false), pod(200, true, false)}, "", false,
			"none of the 2 brokers to restart may go now without taking partitions below min.insync.replicas: broker 200 by 1 partitions (t-2 ISR [100 200] min.insync.replicas 2); broker 100 by 1 partitions (t-2", nil},
		{"an outdated pod not ready goes first", with(healthy, func(m *Metadata) {
			m.Partitions[1] = withISR(m.Partitions[1], 0, 200)
		}), []Pod{pod(0, true, false), pod(100, false, false), pod(200, true, false)}, "broker-b-0", false, "broker 100: outdated revision and not ready, restarted first", nil},
		{"an outdated pod not ready goes first, even before the one fewest leaderships", healthy,
			[]Pod{pod(0, false, false), pod(100, true, false), pod(200, true, false)}, "broker-a-0", false, "broker 0: outdated revision and not ready", nil},
		{"an outdated pod not ready still passes the gate: one still in an ISR at min.insync.replicas waits", with(healthy, func(m *Metadata) {
			m.Partitions[0] = withISR(m.Partitions[0], 0, 100)
		}), []Pod{pod(0, false, false), pod(100, true, true), pod(200, true, false)}, "broker-c-0", false, "broker 200: outdated revision, next in order", nil},
		{"an unrelated under-replicated partition (a replica without a pod) does not block", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, Partition{Topic: "u", Partition: 0, Replicas: []int32{0, 300}, ISR: []int32{0}, Leader: 0})
		}), all(false), "broker-c-0", false, "broker 200: outdated revision, next in order", nil},
		{"an unrelated slow follower (on a partition the candidate does not host) does not block", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, withISR(part("u", 0, 0, 100), 0)) // 100 lags in u-0
		}), []Pod{pod(0, true, true), pod(100, true, true), pod(200, true, false)}, "broker-c-0", false, "broker 200", nil},
		{"a partition at exactly min.insync.replicas with the broker in its ISR blocks it; a broker out of that ISR passes", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, withISR(part("u", 0, 200, 100, 0), 200, 100))
			m.MinISR = map[string]int{"t": 2, "u": 2}
		}), all(false), "broker-a-0", false, "broker 0: outdated revision, next in order (leads 2 partitions; the controller, restarted last)", nil},
		{"the only broker left is blocked: the partitions say why", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, withISR(part("u", 0, 200, 100, 0), 200, 100))
			m.MinISR = map[string]int{"t": 2, "u": 2}
		}), []Pod{pod(0, true, true), pod(100, true, true), pod(200, true, false)}, "", false,
			"restarting it would take partitions below min.insync.replicas: broker 200 by 1 partitions (u-0 ISR [200 100] min.insync.replicas 2)", nil},
		{"a partition whose only in-sync replica is the candidate blocks it, even with RF = min.insync.replicas", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, withISR(part("strict", 0, 200, 100), 200))
			m.MinISR = map[string]int{"t": 2, "strict": 2}
		}), []Pod{pod(0, true, true), pod(100, true, true), pod(200, true, false)}, "", false,
			"broker 200 by 1 partitions (strict-0 ISR [200] min.insync.replicas 2, its only in-sync replica)", nil},
		{"an offline partition elsewhere does not block", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, withLeader(withISR(part("u", 0, 300, 0), 300), NoLeader))
		}), all(false), "broker-c-0", false, "broker 200", nil},
		{"an offline partition whose last ISR member is the candidate: its restart takes nothing away", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, withLeader(withISR(part("u", 0, 200, 0), 200), NoLeader))
		}), []Pod{pod(0, true, true), pod(100, true, true), pod(200, false, false)}, "broker-c-0", false, "broker 200: outdated revision and not ready", nil},
		{"reassignment in flight: the replicas being added count towards the replication factor", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, Partition{Topic: "u", Partition: 0, Replicas: []int32{200, 100, 1}, ISR: []int32{200, 100}, Leader: 200, Adding: []int32{1}, Removing: []int32{100}})
			m.MinISR = map[string]int{"t": 2, "u": 2}
		}), []Pod{pod(0, true, true), pod(100, true, true), pod(200, true, false)}, "", false, "broker 200 by 1 partitions (u-0 ISR [200 100]", nil},
		{"RF 1 and RF = min.insync.replicas cannot stay available: listed, not blocking", with(healthy, func(m *Metadata) {
			m.Partitions = append(m.Partitions, part("one", 0, 200), part("strict", 0, 100, 200, 0))
			m.MinISR = map[string]int{"t": 2, "strict": 3}
		}), all(false), "broker-c-0", false, "broker 200", []string{"one-0", "strict-0"}},
		{"min.insync.replicas 2 of RF 3: restartable", healthy, all(false), "broker-c-0", false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NextRestart(tt.md, tt.pods)
			if got.Pod != tt.pod || got.Done != tt.done || !strings.Contains(got.Reason, tt.reason) || !slices.Equal(got.Unavailable, tt.unavailable) {
				t.Fatalf("NextRestart = %+v\nwant pod %q done %v reason containing %q unavailable %v", got, tt.pod, tt.done, tt.reason, tt.unavailable)
			}
			if got.Pod != "" && got.BrokerID != podID(tt.pods, got.Pod) {
				t.Fatalf("BrokerID %d is not pod %s's", got.BrokerID, got.Pod)
			}
		})
	}
}

func podID(pods []Pod, name string) int32 {
	for _, p := range pods {
		if p.Name == name {
			return p.BrokerID
		}
	}
	return -2
}

// TestNextRestartRollsOneAtATime plays a whole roll: delete the chosen
// pod, let it come back (ready, current, caught up), ask again. Every
// broker is restarted exactly once, the controller last, and no two are
// ever down together.
func TestNextRestartRollsOneAtATime(t *testing.T) {
	md := Metadata{
		Brokers:    brokers(0, 1, 100, 101, 200, 201),
		Controller: 100,
		Partitions: []Partition{part("t", 0, 0, 100, 200), part("t", 1, 101, 201, 1), part("t", 2, 200, 1, 100), part("t", 3, 0, 101, 201)},
		MinISR:     map[string]int{"t": 2},
	}
	pods := []Pod{pod(0, true, false), pod(1, true, false), pod(100, true, false), pod(101, true, false), pod(200, true, false), pod(201, true, false)}
	var order []int32
	for range 10 {
		r := NextRestart(md, pods)
		if r.Done {
			break
		}
		if r.Pod == "" {
			t.Fatalf("roll blocked after %v: %s", order, r.Reason)
		}
		order = append(order, r.BrokerID)
		// The pod is deleted: while it is down nothing else may go.
		for i := range pods {
			if pods[i].BrokerID == r.BrokerID {
				pods[i] = terminating(Pod{Name: pods[i].Name, BrokerID: r.BrokerID})
			}
		}
		if again := NextRestart(md, pods); again.Pod != "" {
			t.Fatalf("pod %s chosen while %s is down", again.Pod, r.Pod)
		}
		// It comes back on the new revision and rejoins every ISR.
		for i := range pods {
			if pods[i].BrokerID == r.BrokerID {
				pods[i] = pod(r.BrokerID, true, true)
			}
		}
	}
	want := []int32{1, 201, 101, 200, 0, 100}
	if !slices.Equal(order, want) {
		t.Fatalf("restart order %v, want %v (fewest leaderships first, the controller 100 last)", order, want)
	}
}

func TestRollBacklog(t *testing.T) {
	md := func(parts ...Partition) Metadata { return Metadata{Partitions: parts} }
	tests := []struct {
		name string
		md   Metadata
		pods []Pod
		want int32
	}{
		{name: "nothing to wait for", md: md(Partition{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}),
			pods: []Pod{{BrokerID: 1, Ready: true}, {BrokerID: 2, Ready: true}}, want: 0},
		{name: "a pod not ready", pods: []Pod{{BrokerID: 1, Ready: true}, {BrokerID: 2}}, want: 1},
		{name: "a restarted broker behind in two partitions: both block the two outdated brokers", md: Metadata{MinISR: map[string]int{"": 2}, Partitions: []Partition{
			{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 1},
			{Replicas: []int32{2, 3, 1}, ISR: []int32{3, 1}, Leader: 3},
			{Replicas: []int32{3, 1}, ISR: []int32{3, 1}, Leader: 3}, // RF = min.insync.replicas: never blocks
		}}, pods: []Pod{{BrokerID: 1, Ready: true}, {BrokerID: 2, Ready: true, Current: true}, {BrokerID: 3, Ready: true}}, want: 4},
		{name: "an unrelated under-replicated partition is not waited for", md: Metadata{MinISR: map[string]int{"": 2}, Partitions: []Partition{
			{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
			{Replicas: []int32{4, 5, 6}, ISR: []int32{4}, Leader: 4},
		}}, pods: []Pod{{BrokerID: 1, Ready: true}, {BrokerID: 2, Ready: true}, {BrokerID: 3, Ready: true}}, want: 0},
		{name: "an offline partition is not waited for", md: md(Partition{Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: NoLeader}), pods: []Pod{{BrokerID: 1, Ready: true}}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RollBacklog(tt.md, tt.pods); got != tt.want {
				t.Errorf("RollBacklog = %d, want %d", got, tt.want)
			}
		})
	}
}
