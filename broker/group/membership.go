package group

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupMetadata is the durable part of a group's membership, what Kafka
// writes to __consumer_offsets as a group metadata record: enough for a
// restarted coordinator to take the group back as Stable, so that members
// keep their ids and generation instead of all rejoining.
type GroupMetadata struct {
	Generation   int32            `json:"generation"`
	ProtocolType string           `json:"protocolType"`
	Protocol     string           `json:"protocol"`
	Leader       string           `json:"leader"`
	Members      []MemberMetadata `json:"members"`
	// Consumer is set for a KIP-848 consumer-protocol group (type
	// "consumer"); the fields above are then unused.
	Consumer *ConsumerGroupMetadata `json:"consumer,omitempty"`
}

// MemberMetadata is one member of a GroupMetadata.
type MemberMetadata struct {
	ID                     string             `json:"id"`
	InstanceID             string             `json:"instanceID,omitempty"`
	ClientID               string             `json:"clientID"`
	ClientHost             string             `json:"clientHost"`
	SessionTimeoutMillis   int32              `json:"sessionTimeoutMillis"`
	RebalanceTimeoutMillis int32              `json:"rebalanceTimeoutMillis"`
	Protocols              []ProtocolMetadata `json:"protocols"`
	Assignment             []byte             `json:"assignment"`
}

// ProtocolMetadata is one protocol a member supports, with its metadata.
type ProtocolMetadata struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// MembershipStore is optionally implemented by an OffsetStore that can
// also persist group membership. Without it, groups come back Empty after
// a coordinator restart and every member rejoins (records consumed since
// the last commit are then delivered again).
type MembershipStore interface {
	// SaveGroup replaces the stored membership of group.
	SaveGroup(ctx context.Context, group string, md GroupMetadata) error
	// LoadGroups returns the stored membership of every group.
	LoadGroups(ctx context.Context) (map[string]GroupMetadata, error)
}

// saveMembership persists the group's membership when the store supports
// it: when a generation becomes Stable, when the group becomes Empty, and
// when a static member is replaced. Failing to save costs a rebalance
// after a restart, nothing else, so it is logged, not returned.
// Callers hold g.mu.
func (g *group) saveMembership() {
	ms, ok := g.c.store.(MembershipStore)
	if !ok {
		return
	}
	md := GroupMetadata{Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader}
	for _, m := range g.sortedMembers() {
		mm := MemberMetadata{
			ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeoutMillis:   int32(m.sessionTimeout / time.Millisecond),
			RebalanceTimeoutMillis: int32(m.rebalanceTimeout / time.Millisecond),
			Assignment:             m.assignment,
		}
		for _, p := range m.protocols {
			mm.Protocols = append(mm.Protocols, ProtocolMetadata{Name: p.Name, Metadata: p.Metadata})
		}
		md.Members = append(md.Members, mm)
	}
	if err := ms.SaveGroup(context.Background(), g.id, md); err != nil {
		if g.storeFailed(err) == kerr.NotCoordinator.Code {
			g.c.log.Info("group membership not saved: another coordinator claimed the group", "group", g.id, "generation", g.generation)
			return
		}
		g.c.log.Error(err, "persisting group membership failed; members will rejoin after a restart", "group", g.id)
	}
}

// restoreMembership takes back a group from its stored membership: Stable
// with its members (each with a fresh session timeout) or Empty. Called
// before the coordinator serves requests.
func (g *group) restoreMembership(md GroupMetadata) {
	if md.Consumer != nil {
		g.restoreConsumer(md.Consumer)
		return
	}
	g.generation = md.Generation
	g.protocolType = md.ProtocolType
	if len(md.Members) == 0 {
		g.state = stateEmpty // emptySince: load time, the conservative choice
		return
	}
	g.protocol = md.Protocol
	for _, mm := range md.Members {
		m := &member{
			id:               mm.ID,
			instanceID:       mm.InstanceID,
			clientID:         mm.ClientID,
			clientHost:       mm.ClientHost,
			sessionTimeout:   time.Duration(mm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(mm.RebalanceTimeoutMillis) * time.Millisecond,
			protocolType:     md.ProtocolType,
			assignment:       mm.Assignment,
		}
		for _, p := range mm.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		g.nextSeq++
		m.seq = g.nextSeq
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
		g.resetSession(m, m.sessionTimeout)
	}
	g.leader = md.Leader
	if g.members[g.leader] == nil {
		g.leader = g.sortedMembers()[0].id
	}
	g.state = stateStable
}
