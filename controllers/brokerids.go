package controllers

import (
	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// AssignBrokerIDBlocks returns the broker ID blocks after the zones in
// spec have been taken into account, and whether anything changed.
//
// Rules, so that a broker ID never names two different brokers:
//   - a zone without an active block gets a new block whose base is one
//     block above the highest base ever handed out (the first is 0);
//   - blocks are never renumbered, whatever the order of spec.zones;
//   - a zone that left the spec keeps its block, marked retired; if it
//     comes back it gets a fresh block, because its old brokers' data and
//     metadata are gone.
//
// The existing slice is not modified.
func AssignBrokerIDBlocks(existing []strata.BrokerIDBlock, zones []strata.ZoneSpec) ([]strata.BrokerIDBlock, bool) {
	blocks := make([]strata.BrokerIDBlock, len(existing))
	copy(blocks, existing)
	changed := false

	inSpec := make(map[string]bool, len(zones))
	for _, z := range zones {
		inSpec[z.Name] = true
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
