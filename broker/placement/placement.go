package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Sentinel errors callers test with errors.Is.
var (
	// ErrInvalidReplicationFactor: the replication factor is below 1 or larger
	// than the number of brokers available. Maps to INVALID_REPLICATION_FACTOR.
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")
	// ErrInvalidPartitions: the partition count is below 1. Maps to
	// INVALID_PARTITIONS.
	ErrInvalidPartitions = errors.New("invalid number of partitions")
	// ErrInvalidBrokers: the broker list is unusable (duplicate IDs, negative
	// IDs).
	ErrInvalidBrokers = errors.New("invalid broker list")
	// ErrNoBrokerInZone: a topic pins its leaders to a zone without brokers.
	ErrNoBrokerInZone = errors.New("no broker in leader zone")
	// ErrCannotDrain: no broker outside the drained set can take a replica
	// without placing two replicas of a partition on one broker.
	ErrCannotDrain = errors.New("cannot drain broker")
)

// Broker is a placement target: an ID and the zone (Kafka rack) it runs in.
type Broker struct {
	ID   int32
	Zone string
	// Cordoned: the broker takes no new replica (Kafka's
	// cordoned.log.dirs, KIP-1066; the operator sets it on brokers it is
	// about to remove). Assign never places on it and LeaderZoneTarget
	// never picks it; its existing replicas stay where they are.
	Cordoned bool
}

// Load is what a broker already carries for other topics.
type Load struct {
	Replicas int // replicas of any partition
	Leaders  int // partitions whose preferred leader it is
}

// Request describes the partitions to place.
type Request struct {
	// Brokers are the candidates (normally the live brokers); cordoned ones
	// are left out.
	Brokers []Broker
	// Existing is the topic's current assignment, indexed by partition, when
	// partitions are being added; nil for a new topic. Replicas on brokers
	// not in Brokers (dead ones) are ignored when counting balance.
	Existing [][]int32
	// Partitions is the number of partitions to add.
	Partitions int
	// ReplicationFactor is the number of replicas per new partition.
	ReplicationFactor int
	// LeaderZone, when set, pins every preferred leader to that zone.
	LeaderZone string
	// ClusterLoad is the load the brokers carry for other topics (optional).
	// It breaks ties left by the topic's own balance.
	ClusterLoad map[int32]Load
}

// Assign returns the replica lists of the new partitions, in partition order
// (the first returned list is partition len(Existing)). The first replica of
// each list is the preferred leader.
func Assign(req Request) ([][]int32, error) {
	if req.Partitions < 1 {
		return nil, fmt.Errorf("%w: %d new partitions requested", ErrInvalidPartitions, req.Partitions)
	}
	if req.ReplicationFactor < 1 {
		return nil, fmt.Errorf("%w: %d is below 1", ErrInvalidReplicationFactor, req.ReplicationFactor)
	}
	var open []Broker
	var cordoned []int32
	for _, b := range req.Brokers {
		if b.Cordoned {
			cordoned = append(cordoned, b.ID)
			continue
		}
		open = append(open, b)
	}
	slices.Sort(cordoned)
	c, err := newCluster(open, req.ClusterLoad)
	if err != nil {
		return nil, err
	}
	if req.ReplicationFactor > len(c.brokers) {
		if len(cordoned) > 0 {
			return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available brokers (brokers %v are cordoned: they take no new replica)",
				ErrInvalidReplicationFactor, req.ReplicationFactor, len(c.brokers), cordoned)
		}
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d available brokers",
			ErrInvalidReplicationFactor, req.ReplicationFactor, len(c.brokers))
	}
	if req.LeaderZone != "" && len(c.byZone[req.LeaderZone]) == 0 {
		if len(cordoned) > 0 {
			return nil, fmt.Errorf("%w: zone %q has no broker that is not cordoned (cordoned: %v; zones: %v)", ErrNoBrokerInZone, req.LeaderZone, cordoned, c.zones)
		}
		return nil, fmt.Errorf("%w: zone %q has no broker (zones: %v)", ErrNoBrokerInZone, req.LeaderZone, c.zones)
	}
	t := newTopicCounts()
	for _, replicas := range req.Existing {
		t.add(c, replicas)
	}
	out := make([][]int32, 0, req.Partitions)
	for i := range req.Partitions {
		index := len(req.Existing) + i
		leader := c.pickLeader(t, req.LeaderZone)
		replicas := []int32{leader.ID}
		for len(replicas) < req.ReplicationFactor {
			replicas = append(replicas, c.pickFollower(t, replicas, index).ID)
		}
		t.add(c, replicas)
		out = append(out, replicas)
	}
	return out, nil
}

// cluster indexes the candidate brokers.
type cluster struct {
	brokers     []Broker // sorted by ID
	byID        map[int32]Broker
	byZone      map[string][]Broker
	zones       []string // sorted
	load        map[int32]Load
	zoneLeaders map[string]int // cluster-wide preferred leaders per zone
}

func newCluster(brokers []Broker, load map[int32]Load) (*cluster, error) {
	c := &cluster{
		byID:        make(map[int32]Broker, len(brokers)),
		byZone:      make(map[string][]Broker),
		load:        load,
		zoneLeaders: make(map[string]int),
	}
	for _, b := range brokers {
		if b.ID < 0 {
			return nil, fmt.Errorf("%w: negative broker ID %d", ErrInvalidBrokers, b.ID)
		}
		if _, dup := c.byID[b.ID]; dup {
			return nil, fmt.Errorf("%w: broker ID %d listed twice", ErrInvalidBrokers, b.ID)
		}
		c.byID[b.ID] = b
		c.brokers = append(c.brokers, b)
		if len(c.byZone[b.Zone]) == 0 {
			c.zones = append(c.zones, b.Zone)
		}
		c.byZone[b.Zone] = append(c.byZone[b.Zone], b)
	}
	slices.SortFunc(c.brokers, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(c.zones)
	for z := range c.byZone {
		slices.SortFunc(c.byZone[z], func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	}
	for id, l := range load {
		if b, ok := c.byID[id]; ok {
			c.zoneLeaders[b.Zone] += l.Leaders
		}
	}
	return c, nil
}

// topicCounts is the running balance of the topic being placed.
type topicCounts struct {
	replicas    map[int32]int
	leaders     map[int32]int
	zoneLeaders map[string]int
	// behind counts, per (leader, broker, slot), the partitions led by leader
	// that have broker at that replica slot. Spreading it means that when a
	// leader fails its partitions fail over to different brokers.
	behind map[[3]int32]int
}

func newTopicCounts() *topicCounts {
	return &topicCounts{replicas: map[int32]int{}, leaders: map[int32]int{}, zoneLeaders: map[string]int{}, behind: map[[3]int32]int{}}
}

func (t *topicCounts) add(c *cluster, replicas []int32) {
	for i, id := range replicas {
		b, ok := c.byID[id]
		if !ok {
			continue // a replica on a broker that is not a candidate
		}
		t.replicas[id]++
		t.behind[[3]int32{replicas[0], id, int32(i)}]++
		if i == 0 {
			t.leaders[id]++
			t.zoneLeaders[b.Zone]++
		}
	}
}

// pickLeader chooses the zone with the fewest preferred leaders relative to
// its broker count, then the broker in it with the fewest preferred leaders.
func (c *cluster) pickLeader(t *topicCounts, leaderZone string) Broker {
	zone := leaderZone
	if zone == "" {
		zone = slices.MinFunc(c.zones, func(a, b string) int {
			na, nb := len(c.byZone[a]), len(c.byZone[b])
			// Compare leaders/brokers without division: x/na < y/nb ⇔ x*nb < y*na.
			return cmp.Or(
				cmp.Compare(t.zoneLeaders[a]*nb, t.zoneLeaders[b]*na),
				cmp.Compare(c.zoneLeaders[a]*nb, c.zoneLeaders[b]*na),
				cmp.Compare(a, b),
			)
		})
	}
	return slices.MinFunc(c.byZone[zone], func(a, b Broker) int {
		return cmp.Or(
			cmp.Compare(t.leaders[a.ID], t.leaders[b.ID]),
			cmp.Compare(c.load[a.ID].Leaders, c.load[b.ID].Leaders),
			cmp.Compare(t.replicas[a.ID], t.replicas[b.ID]),
			cmp.Compare(c.load[a.ID].Replicas, c.load[b.ID].Replicas),
			cmp.Compare(a.ID, b.ID),
		)
	})
}

// pickFollower chooses a broker not yet in replicas, in the zone least used by
// the partition, with the fewest replicas. Remaining ties rotate with the
// partition index so that second replicas do not pile up on one broker.
// Among equally loaded brokers it prefers one that rarely follows this leader
// in this slot, so a failed leader's partitions fail over to several brokers.
func (c *cluster) pickFollower(t *topicCounts, replicas []int32, index int) Broker {
	inPartition := map[string]int{}
	for _, id := range replicas {
		inPartition[c.byID[id].Zone]++
	}
	slot := int32(len(replicas))
	n := len(c.brokers)
	rank := func(i int) int { return ((i-index)%n + n) % n }
	best, found := 0, false
	for i, b := range c.brokers {
		if slices.Contains(replicas, b.ID) {
			continue
		}
		o := c.brokers[best]
		if !found || cmp.Or(
			cmp.Compare(inPartition[b.Zone], inPartition[o.Zone]),
			cmp.Compare(t.replicas[b.ID], t.replicas[o.ID]),
			cmp.Compare(t.behind[[3]int32{replicas[0], b.ID, slot}], t.behind[[3]int32{replicas[0], o.ID, slot}]),
			cmp.Compare(c.load[b.ID].Replicas, c.load[o.ID].Replicas),
			cmp.Compare(rank(i), rank(best)),
		) < 0 {
			best, found = i, true
		}
	}
	return c.brokers[best] // Assign checked that rf ≤ len(brokers), so one is always found
}
