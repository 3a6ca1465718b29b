package controllers

import (
	"reflect"
	"strings"
	"testing"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

func TestBrokerIDRecordRoundTrip(t *testing.T) {
	kc := threeZoneCluster()
	blocks := []strata.BrokerIDBlock{{Zone: "zone-a", Base: 0, Retired: true}, {Zone: "zone-b", Base: 100}, {Zone: "zone-a", Base: 200}}
	cm, err := BuildBrokerIDRecord(kc, blocks)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != "demo-broker-ids" || cm.Namespace != "kafka" || len(cm.OwnerReferences) != 0 {
		t.Fatalf("record %s/%s owners %v: want kafka/demo-broker-ids without owner (it must outlive the KafkaCluster)", cm.Namespace, cm.Name, cm.OwnerReferences)
	}
	got, err := ParseBrokerIDRecord(cm)
	if err != nil || !reflect.DeepEqual(got, blocks) {
		t.Fatalf("ParseBrokerIDRecord = %+v, %v; want %+v", got, err, blocks)
	}
	cm.Data[BrokerIDsKey] = "{not json"
	if _, err := ParseBrokerIDRecord(cm); err == nil {
		t.Fatal("a corrupt record parsed")
	}
	delete(cm.Data, BrokerIDsKey)
	if _, err := ParseBrokerIDRecord(cm); err == nil {
		t.Fatal("a record without blocks parsed")
	}
}

func TestMergeBrokerIDBlocks(t *testing.T) {
	a0 := strata.BrokerIDBlock{Zone: "a", Base: 0}
	b1 := strata.BrokerIDBlock{Zone: "b", Base: 100}
	c2 := strata.BrokerIDBlock{Zone: "c", Base: 200}
	tests := []struct {
		name    string
		a, b    []strata.BrokerIDBlock
		want    []strata.BrokerIDBlock
		wantErr string
	}{
		{"status lost", []strata.BrokerIDBlock{a0, b1}, nil, []strata.BrokerIDBlock{a0, b1}, ""},
		{"record missing (older operator)", nil, []strata.BrokerIDBlock{a0, b1}, []strata.BrokerIDBlock{a0, b1}, ""},
		{"union in base order", []strata.BrokerIDBlock{c2, a0}, []strata.BrokerIDBlock{b1}, []strata.BrokerIDBlock{a0, b1, c2}, ""},
		{"retired in one is retired", []strata.BrokerIDBlock{a0}, []strata.BrokerIDBlock{{Zone: "a", Base: 0, Retired: true}},
			[]strata.BrokerIDBlock{{Zone: "a", Base: 0, Retired: true}}, ""},
		{"one base, two zones", []strata.BrokerIDBlock{a0}, []strata.BrokerIDBlock{{Zone: "b", Base: 0}}, nil, "block 0 is recorded for zone a and for zone b"},
		{"two active blocks of a zone", []strata.BrokerIDBlock{a0}, []strata.BrokerIDBlock{{Zone: "a", Base: 100}}, nil, "zone a has two active broker ID blocks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MergeBrokerIDBlocks(tt.a, tt.b)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("MergeBrokerIDBlocks = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
