package controllers

import (
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// AssignBrokerIDBlocks returns the broker ID blocks after the zones in
// spec have been taken into account, and whether anything changed.
//
// Rules, so that a broker ID never names two different brokers:
//   - a zone without an active block gets a new block whose base is one
//     block above the highest base ever handed out (the first is 0);
//   - blocks are never renumbered, whatever the order of spec.zones;
//   - a zone that left the spec keeps its block active while its brokers
//     still run (running: zones that still have a broker StatefulSet;
//     they are drained before they go, and a removal that is refused
//     keeps them); if it comes back meanwhile, it gets its brokers and
//     their data back under the same IDs;
//   - once its brokers are gone the block is retired; if the zone comes
//     back after that it gets a fresh block, because its old brokers'
//     data and metadata are gone.
//
// The existing slice is not modified.
func AssignBrokerIDBlocks(existing []strata.BrokerIDBlock, zones []strata.ZoneSpec, running []string) ([]strata.BrokerIDBlock, bool) {
	blocks := make([]strata.BrokerIDBlock, len(existing))
	copy(blocks, existing)
	changed := false

	inSpec := make(map[string]bool, len(zones))
	for _, z := range zones {
		inSpec[z.Name] = true
	}
	for _, z := range running {
		inSpec[z] = true
	}
	next := int32(0)
	for i := range blocks {
		if end := blocks[i].Base + strata.BrokerIDBlockSize; end > next {
			next = end
		}
		if !blocks[i].Retired && !inSpec[blocks[i].Zone] {
			blocks[i].Retired = true
			changed = true
		}
	}
	for _, z := range zones {
		if _, ok := ActiveBlockBase(blocks, z.Name); ok {
			continue
		}
		blocks = append(blocks, strata.BrokerIDBlock{Zone: z.Name, Base: next})
		next += strata.BrokerIDBlockSize
		changed = true
	}
	return blocks, changed
}

// ActiveBlockBase returns the base of the zone's active (not retired) block.
func ActiveBlockBase(blocks []strata.BrokerIDBlock, zone string) (int32, bool) {
	for _, b := range blocks {
		if b.Zone == zone && !b.Retired {
			return b.Base, true
		}
	}
	return 0, false
}

// BrokerIDsKey is the key of the broker ID record in its ConfigMap.
const BrokerIDsKey = "blocks.json"

// ComponentBrokerIDs labels the broker ID record.
const ComponentBrokerIDs = "broker-ids"

// BuildBrokerIDRecord is the ConfigMap <cluster>-broker-ids that records a
// cluster's broker ID blocks. It is the durable copy: status can be lost
// (a backup restore, a re-created KafkaCluster) while the brokers'
// volumes, named after zone and ordinal, are still there, and renumbering
// would hand a volume's data to another broker ID. It therefore has no
// owner reference, so it outlives its KafkaCluster like the volumes do
// (deletionPolicy Delete removes both).
func BuildBrokerIDRecord(kc *strata.KafkaCluster, blocks []strata.BrokerIDBlock) (*corev1.ConfigMap, error) {
	data, err := json.Marshal(blocks)
	if err != nil {
		return nil, fmt.Errorf("encode broker ID blocks: %w", err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: kc.Namespace,
			Name:      BrokerIDsConfigMapName(kc.Name),
			Labels:    clusterLabels(kc, ComponentBrokerIDs),
			Annotations: map[string]string{
				"kafka.strata.dev/description": "Broker ID blocks of KafkaCluster " + kc.Name + ", written by the operator. Do not edit; delete it only together with the brokers' volumes.",
			},
		},
		Data: map[string]string{BrokerIDsKey: string(data)},
	}, nil
}

// ParseBrokerIDRecord reads the blocks of a broker ID record. A record
// that does not parse is an error, never an empty record: guessing would
// renumber brokers.
func ParseBrokerIDRecord(cm *corev1.ConfigMap) ([]strata.BrokerIDBlock, error) {
	raw, ok := cm.Data[BrokerIDsKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s has no %s", cm.Name, BrokerIDsKey)
	}
	var blocks []strata.BrokerIDBlock
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return nil, fmt.Errorf("ConfigMap %s: %s: %w", cm.Name, BrokerIDsKey, err)
	}
	return blocks, nil
}

// MergeBrokerIDBlocks is the union of two records of the same cluster's
// blocks (the ConfigMap and status, which an operator before the
// ConfigMap record kept alone), ordered by base, i.e. by first
// appearance. A block retired in either is retired. Two records that give
// one base to different zones, or one zone two active blocks, contradict
// each other: that is an error for a human to resolve.
func MergeBrokerIDBlocks(a, b []strata.BrokerIDBlock) ([]strata.BrokerIDBlock, error) {
	byBase := map[int32]strata.BrokerIDBlock{}
	for _, blk := range append(append([]strata.BrokerIDBlock{}, a...), b...) {
		if prev, ok := byBase[blk.Base]; ok {
			if prev.Zone != blk.Zone {
				return nil, fmt.Errorf("broker ID block %d is recorded for zone %s and for zone %s", blk.Base, prev.Zone, blk.Zone)
			}
			blk.Retired = blk.Retired || prev.Retired
		}
		byBase[blk.Base] = blk
	}
	out := make([]strata.BrokerIDBlock, 0, len(byBase))
	for _, blk := range byBase {
		out = append(out, blk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Base < out[j].Base })
	active := map[string]int32{}
	for _, blk := range out {
		if blk.Retired {
			continue
		}
		if base, ok := active[blk.Zone]; ok {
			return nil, fmt.Errorf("zone %s has two active broker ID blocks, %d and %d", blk.Zone, base, blk.Base)
		}
		active[blk.Zone] = blk.Base
	}
	return out, nil
}
