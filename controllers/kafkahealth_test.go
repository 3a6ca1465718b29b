package controllers

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// snapshot is a 3-zone cluster (brokers 0/a, 100/b, 200/c) with one topic
// whose partitions are given as leader, replicas, ISR.
func snapshot(brokers []int32, parts ...kadm.PartitionDetail) kadm.Metadata {
	racks := map[int32]string{0: "a", 100: "b", 200: "c", 1: "a"}
	md := kadm.Metadata{Controller: 0, Topics: kadm.TopicDetails{}}
	for _, id := range brokers {
		md.Brokers = append(md.Brokers, kadm.BrokerDetail{NodeID: id, Rack: ptr.To(racks[id])})
	}
	td := kadm.TopicDetail{Topic: "t", Partitions: kadm.PartitionDetails{}}
	for i, p := range parts {
		p.Topic, p.Partition = "t", int32(i)
		td.Partitions[p.Partition] = p
	}
	md.Topics["t"] = td
	return md
}

func part(leader int32, replicas, isr []int32) kadm.PartitionDetail {
	return kadm.PartitionDetail{Leader: leader, Replicas: replicas, ISR: isr}
}

func TestSummarizeKafka(t *testing.T) {
	all := []int32{0, 100, 200}
	tests := []struct {
		name string
		md   kadm.Metadata
		want strata.KafkaHealth
	}{
		{
			name: "balanced and in sync",
			md: snapshot(all,
				part(0, []int32{0, 100, 200}, []int32{0, 100, 200}),
				part(100, []int32{100, 200, 0}, []int32{0, 100, 200}),
				part(200, []int32{200, 0, 100}, []int32{0, 100, 200})),
			want: strata.KafkaHealth{Reachable: true, Controller: 0, RegisteredBrokers: 3, Topics: 1, Partitions: 3,
				LeadersPerZone: []strata.ZoneLeaders{{Zone: "a", Leaders: 1}, {Zone: "b", Leaders: 1}, {Zone: "c", Leaders: 1}}},
		},
		{
			name: "broker 100 gone: a failover, an under-replicated and an offline partition",
			md: snapshot([]int32{0, 200},
				part(200, []int32{100, 200, 0}, []int32{200, 0}),
				part(0, []int32{0, 200}, []int32{0}),
				part(-1, []int32{100}, []int32{100})),
			want: strata.KafkaHealth{Reachable: true, Controller: 0, RegisteredBrokers: 2, UnregisteredBrokers: []int32{100},
				Topics: 1, Partitions: 3, OfflinePartitions: 1, UnderReplicatedPartitions: 2, NonPreferredLeaders: 1,
				LeadersPerZone: []strata.ZoneLeaders{{Zone: "a", Leaders: 1}, {Zone: "c", Leaders: 1}}},
		},
		{
			name: "topic with a load error is left out",
			md: func() kadm.Metadata {
				md := snapshot(all, part(0, []int32{0}, []int32{0}))
				md.Topics["gone"] = kadm.TopicDetail{Topic: "gone", Err: kerr.UnknownTopicOrPartition}
				return md
			}(),
			want: strata.KafkaHealth{Reachable: true, Controller: 0, RegisteredBrokers: 3, Topics: 1, Partitions: 1,
				LeadersPerZone: []strata.ZoneLeaders{{Zone: "a", Leaders: 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SummarizeKafka(tt.md, all)
			if want := tt.want; !reflect.DeepEqual(got, want) {
				t.Errorf("SummarizeKafka =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestLeaderDrift(t *testing.T) {
	md := snapshot([]int32{0, 100, 200},
		part(0, []int32{0, 100, 200}, []int32{0, 100, 200}),   // 0: preferred leads
		part(200, []int32{100, 200, 0}, []int32{0, 100, 200}), // 1: drifted, preferred in ISR
		part(0, []int32{200, 0, 100}, []int32{0, 100}),        // 2: drifted, preferred out of ISR
		part(-1, []int32{100}, nil),                           // 3: offline
		part(0, []int32{100, 0}, []int32{0, 100}),             // 4: drifted
		part(0, []int32{1, 0}, []int32{1, 0}),                 // 5: preferred 1 in ISR but not registered
	)
	got, total := LeaderDrift(md, 10)
	if total != 2 {
		t.Fatalf("drifted = %d, want 2", total)
	}
	if want := (kadm.TopicsSet{"t": {1: {}, 4: {}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("LeaderDrift =\n%+v\nwant\n%+v", got, want)
	}
	capped, total := LeaderDrift(md, 1)
	if total != 2 || partitionCount(capped) != 1 {
		t.Fatalf("capped: %v of %d, want 1 of 2", capped, total)
	}
	if _, ok := capped["t"][1]; !ok {
		t.Errorf("capped election = %v, want the first drifted partition t/1", capped)
	}
}

func TestWALDegraded(t *testing.T) {
	tests := []struct {
		name               string
		text               string
		degraded, exported bool
		err                string
	}{
		{name: "healthy", text: "# HELP strata_wal_degraded x\n# TYPE strata_wal_degraded gauge\nstrata_wal_degraded 0\nstrata_connections 3\n", exported: true},
		{name: "degraded", text: "# TYPE strata_wal_degraded gauge\nstrata_wal_degraded 1\n", exported: true, degraded: true},
		{name: "no WAL", text: "# TYPE strata_connections gauge\nstrata_connections 3\n"},
		{name: "garbage", text: "strata_wal_degraded{ 1\n", err: "parse metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			degraded, exported, err := WALDegraded(strings.NewReader(tt.text))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || degraded != tt.degraded || exported != tt.exported {
				t.Fatalf("= %v, %v, %v; want %v, %v", degraded, exported, err, tt.degraded, tt.exported)
			}
		})
	}
}

func TestZoneWAL(t *testing.T) {
	tests := []struct {
		name    string
		scrapes []brokerWAL
		want    *strata.ZoneWALStatus
	}{
		{"healthy", []brokerWAL{{id: 0}, {id: 1}}, &strata.ZoneWALStatus{State: strata.WALHealthy}},
		{"one degraded wins over a failed scrape", []brokerWAL{{id: 0, degraded: true}, {id: 1, err: errors.New("refused")}},
			&strata.ZoneWALStatus{State: strata.WALDegraded, DegradedBrokers: []int32{0}}},
		{"failed scrape", []brokerWAL{{id: 0}, {id: 1, err: errors.New("refused")}},
			&strata.ZoneWALStatus{State: strata.WALUnknown, Message: "broker 1: refused"}},
		{"no broker", nil, &strata.ZoneWALStatus{State: strata.WALUnknown, Message: "no registered broker to read metrics from"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := ZoneWAL(tt.scrapes), tt.want; !reflect.DeepEqual(got, want) {
				t.Errorf("ZoneWAL =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	healthyMeta := []metav1.Condition{{Type: strata.ConditionMetadataHealthy, Status: metav1.ConditionTrue, Reason: ReasonEtcdHealthy}}
	badMeta := []metav1.Condition{{Type: strata.ConditionMetadataHealthy, Status: metav1.ConditionFalse, Reason: ReasonEtcdUnreachable, Message: "no etcd endpoint answered"}}
	healthy := &strata.KafkaHealth{Reachable: true, RegisteredBrokers: 3, Partitions: 6}
	tests := []struct {
		name       string
		podsReady  bool
		kafka      *strata.KafkaHealth
		conditions []metav1.Condition
		status     metav1.ConditionStatus
		reason     string
		msgHas     string
	}{
		{"all healthy", true, healthy, healthyMeta, metav1.ConditionTrue, ReasonClusterHealthy, "3 brokers registered"},
		{"under-replicated is still ready", true, &strata.KafkaHealth{Reachable: true, Partitions: 6, UnderReplicatedPartitions: 2}, healthyMeta, metav1.ConditionTrue, ReasonClusterHealthy, "2 under-replicated"},
		{"pods first", false, &strata.KafkaHealth{Error: "dial refused"}, healthyMeta, metav1.ConditionFalse, ReasonBrokersNotReady, "Kafka unreachable: dial refused"},
		{"not probed", true, nil, healthyMeta, metav1.ConditionFalse, ReasonKafkaUnreachable, "not probed"},
		{"unreachable", true, &strata.KafkaHealth{Error: "i/o timeout"}, healthyMeta, metav1.ConditionFalse, ReasonKafkaUnreachable, "i/o timeout"},
		{"offline before unregistered", true, &strata.KafkaHealth{Reachable: true, Partitions: 6, OfflinePartitions: 2, UnregisteredBrokers: []int32{100}}, healthyMeta,
			metav1.ConditionFalse, ReasonPartitionsOffline, "brokers [100] not registered"},
		{"unregistered", true, &strata.KafkaHealth{Reachable: true, UnregisteredBrokers: []int32{100}}, healthyMeta, metav1.ConditionFalse, ReasonBrokersNotRegistered, "[100]"},
		{"metadata unhealthy", true, healthy, badMeta, metav1.ConditionFalse, ReasonMetadataUnhealthy, "no etcd endpoint answered"},
		{"metadata not probed", true, healthy, nil, metav1.ConditionFalse, ReasonMetadataUnhealthy, "not probed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := &strata.KafkaCluster{Status: strata.KafkaClusterStatus{Kafka: tt.kafka, Conditions: tt.conditions}}
			status, reason, msg := readiness(kc, "3/3 brokers ready in 3 zones", tt.podsReady)
			if status != tt.status || reason != tt.reason || !strings.Contains(msg, tt.msgHas) {
				t.Errorf("readiness = %s %s %q; want %s %s containing %q", status, reason, msg, tt.status, tt.reason, tt.msgHas)
			}
		})
	}
}
