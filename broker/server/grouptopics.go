package server

import (
	"github.com/strata-dev/strata/broker"
)

// groupTopics is the topic metadata the KIP-848 server-side assignors
// read (group.TopicMetadata): the applied metadata view, and the zone of
// each live broker as the rack of the replicas it holds.
type groupTopics struct{ b *broker.Broker }

func (t groupTopics) TopicNames() []string {
	topics := t.b.MetadataView().Topics()
	out := make([]string, 0, len(topics))
	for _, ti := range topics {
		out = append(out, ti.Name)
	}
	return out
}

func (t groupTopics) Topic(name string, racks bool) ([16]byte, int32, [][]string, bool) {
	v := t.b.MetadataView()
	ti, ok := v.Topic(name)
	if !ok {
		return [16]byte{}, 0, nil, false
	}
	if !racks {
		return ti.ID, ti.Partitions, nil, true
	}
	zone := map[int32]string{}
	for _, bi := range t.b.Brokers() {
		zone[bi.ID] = bi.Rack
	}
	out := make([][]string, ti.Partitions)
	for p := range ti.Partitions {
		pv, ok := v.Partition(name, p)
		if !ok {
			continue
		}
		for _, r := range pv.Replicas {
			if z := zone[r]; z != "" && !contains(out[p], z) {
				out[p] = append(out[p], z)
			}
		}
	}
	return ti.ID, ti.Partitions, out, true
}

func (t groupTopics) TopicName(id [16]byte) (string, bool) {
	ti, ok := t.b.MetadataView().TopicByID(id)
	return ti.Name, ok
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
