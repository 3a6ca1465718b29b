package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// FromKadm builds the decisions' Metadata from what the operator's admin
// client reads: Metadata (brokers, controller, partitions), the
// reassignments in flight (ListPartitionReassignments) and the topics'
// configs (DescribeTopicConfigs, for min.insync.replicas and, for a move's
// cost, whether the slow tier holds the topic). It is pure, so
// the reconciler's I/O stays a thin layer around it.
//
// A topic the metadata answers with an error makes it fail: deciding
// without knowing where a topic's replicas are could restart or drain the
// broker holding its only in-sync copy. Partition errors (an offline
// leader) are kept: the partition shows with its replicas and ISR.
func FromKadm(md kadm.Metadata, reassignments kadm.ListPartitionReassignmentsResponses, configs kadm.ResourceConfigs) (Metadata, error) {
	out := Metadata{Controller: md.Controller, MinISR: map[string]int{}, Untiered: map[string]bool{}}
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		out.Brokers = append(out.Brokers, Broker{ID: b.NodeID, Rack: rack})
	}
	for _, td := range md.Topics.Sorted() {
		if td.Err != nil {
			return Metadata{}, fmt.Errorf("topic %s: %w", td.Topic, td.Err)
		}
		for _, pd := range td.Partitions.Sorted() {
			p := Partition{Topic: td.Topic, Partition: pd.Partition, Replicas: pd.Replicas, ISR: pd.ISR, Leader: pd.Leader}
			if r, ok := reassignments[td.Topic][pd.Partition]; ok {
				p.Adding, p.Removing = r.AddingReplicas, r.RemovingReplicas
			}
			if p.Leader < 0 {
				p.Leader = NoLeader
			}
			out.Partitions = append(out.Partitions, p)
		}
	}
	for _, rc := range configs {
		if rc.Err != nil {
			return Metadata{}, fmt.Errorf("configs of topic %s: %w", rc.Name, rc.Err)
		}
		for _, c := range rc.Configs {
			if c.Value != nil && (c.Key == "cleanup.policy" && strings.Contains(*c.Value, "compact") ||
				c.Key == "remote.storage.enable" && *c.Value == "false") {
				out.Untiered[rc.Name] = true
			}
			if c.Key != "min.insync.replicas" || c.Value == nil {
				continue
			}
			n, err := strconv.Atoi(*c.Value)
			if err != nil || n < 1 {
				return Metadata{}, fmt.Errorf("topic %s: min.insync.replicas=%q is not a positive number", rc.Name, *c.Value)
			}
			out.MinISR[rc.Name] = n
		}
	}
	return out, nil
}

// ViewLags says why md mixes a broker's view with a newer controller's
// ("" when it does not): the reassignments come from the controller and
// the replicas from whichever broker answered the metadata request, so a
// reassignment whose new replicas the partition does not list yet is one
// the broker has not seen start. A plan on that view would count the
// partition on its old brokers.
func ViewLags(md Metadata) string {
	for _, p := range md.Partitions {
		for _, id := range p.Adding {
			if !slices.Contains(p.Replicas, id) {
				return fmt.Sprintf("partition %s is being reassigned onto broker %d, which its replicas %v do not list yet: the broker's metadata lags the controller", p, id, p.Replicas)
			}
		}
	}
	return ""
}

// WithSizes returns md with each partition's replica sizes
// (Partition.Sizes) from what DescribeAllLogDirs read: every broker
// reports the replicas it holds. A broker or log directory that answered
// with an error leaves those replicas' sizes unknown; a partition no broker
// reports has none (the moves then count it as empty).
func WithSizes(md Metadata, dirs kadm.DescribedAllLogDirs) Metadata {
	sizes := map[string]map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			return
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			key := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
			if sizes[key] == nil {
				sizes[key] = map[int32]int64{}
			}
			// A broker with several log dirs holding the same partition
			// (a future replica) counts the larger.
			sizes[key][d.Broker] = max(sizes[key][d.Broker], p.Size)
		})
	})
	out := md
	out.Partitions = slices.Clone(md.Partitions)
	for i := range out.Partitions {
		out.Partitions[i].Sizes = sizes[out.Partitions[i].String()]
	}
	return out
}
