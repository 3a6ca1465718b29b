package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Blocker is a partition whose availability a broker's restart would
// lower (RestartBlockers).
type Blocker struct {
	Partition string
	ISR       []int32
	MinISR    int
	// Offline: the broker is the partition's only in-sync replica, so its
	// restart would take the partition offline (blocks even where the
	// replication factor is not above min.insync.replicas).
	Offline bool
}

func (b Blocker) String() string {
	s := fmt.Sprintf("%s ISR %v min.insync.replicas %d", b.Partition, b.ISR, b.MinISR)
	if b.Offline {
		s += ", its only in-sync replica"
	}
	return s
}

// RestartBlockers is the per-partition availability gate of a restart,
// the rule of Strimzi's KafkaRoller: broker id may restart when every
// partition it hosts keeps at least min.insync.replicas in-sync replicas
// without it, and every partition it leads has another ISR member to take
// the leadership over. Only the partitions whose ISR contains id can be
// made worse by its restart; an under-replicated or offline partition
// elsewhere, or one where id is already out of the ISR, does not block
// it (a slow follower on another broker does not hold a roll for hours).
//
// Partitions whose replication factor is not above min.insync.replicas
// (RF 1, or RF = min.insync.replicas) cannot stay available for acks=all
// through a restart of any of their replicas in any order: they do not
// block the roll forever but are returned in unavailable, for an event.
// Of those, one whose only in-sync replica is id still blocks it (its
// restart would take the partition offline, where waiting for another
// replica to catch up keeps it online); RF 1 partitions cannot avoid it.
func RestartBlockers(id int32, md Metadata) (blockers []Blocker, unavailable []string) {
	for _, p := range md.sortedPartitions() {
		if !slices.Contains(p.ISR, id) || p.Leader == NoLeader {
			// Out of the ISR already, or the partition is offline: the
			// restart takes nothing away from it.
			continue
		}
		minISR := md.minISR(p.Topic)
		// During a reassignment Replicas is the union of old and new: it
		// can meet the gate once the replicas being added are in sync.
		rf := len(p.Replicas)
		others := len(p.ISR) - 1
		if rf <= 1 {
			unavailable = append(unavailable, p.String())
			continue
		}
		// min.insync.replicas is at least 1, so the gate also keeps
		// another in-sync replica to take over the partitions id leads.
		need := minISR
		if rf <= minISR {
			need = 1 // it cannot keep min.insync.replicas: keep it online
		}
		switch {
		case others < need:
			blockers = append(blockers, Blocker{Partition: p.String(), ISR: slices.Clone(p.ISR), MinISR: minISR, Offline: others == 0})
		case rf <= minISR:
			unavailable = append(unavailable, p.String())
		}
	}
	return blockers, unavailable
}

// RollBacklog counts what a roll's next restart waits for: broker pods
// not ready, plus the partitions that block each outdated broker's
// restart (RestartBlockers). A roll whose backlog goes down makes
// progress even when it restarts nobody (a restarted broker catching up
// partition by partition); one whose backlog does not is stuck after a
// while. A partition that blocks no outdated broker (an unrelated slow
// follower) is not counted: the roll does not wait for it.
func RollBacklog(md Metadata, pods []Pod) int32 {
	var n int32
	for _, p := range pods {
		if !p.Ready {
			n++
		}
	}
	for _, p := range pods {
		if !p.Current {
			b, _ := RestartBlockers(p.BrokerID, md)
			n += int32(len(b))
		}
	}
	return n
}

// Restart is NextRestart's answer.
type Restart struct {
	// Pod is the pod to delete now, BrokerID its broker; Pod is "" when
	// none may be deleted now.
	Pod      string
	BrokerID int32
	// Done: every broker pod runs the current revision; the roll is over.
	Done bool
	// Reason says why this pod, or why none may be deleted now.
	Reason string
	// Unavailable names partitions that stop accepting acks=all writes
	// while Pod restarts whatever the order, because their replication
	// factor is not above min.insync.replicas (RF 1 topics, or RF =
	// min.insync.replicas): worth an event, not a reason to stop the roll
	// forever.
	Unavailable []string
	// Blocked lists, when no pod may go because of partitions, which
	// partitions block which outdated broker (by broker ID).
	Blocked map[int32][]Blocker
}

// NextRestart decides which broker pod may be deleted now for a rolling
// restart (pods not Current need one). The rules, in order:
//
//  1. Nothing to do when every pod is Current.
//  2. One broker at a time across the whole cluster: no pod may go while
//     any broker pod is terminating, or while a Current pod (one already
//     restarted) is not ready.
//  3. Outdated pods that are not ready go first: they serve nothing
//     already, and the new revision may be what they need (a bad config
//     being rolled back).
//  4. The per-partition availability gate (RestartBlockers): the restart
//     must leave every partition whose ISR holds the candidate at or
//     above min.insync.replicas, and a partition it leads with another
//     in-sync replica to lead. Partitions it does not replicate, or whose
//     ISR it is already out of, do not block it. Partitions whose
//     replication factor is not above min.insync.replicas cannot meet the
//     gate in any order: listed in Restart.Unavailable for an event.
//     A broker restarted a moment ago and still catching up is out of
//     ISRs, which is exactly what this rule weighs for the next broker.
//  5. Among the candidates that pass: brokers not ready first (rule 3),
//     then the controller last, since restarting it moves the controller
//     role, and restarting it early would move it onto a broker that is
//     itself restarted later (one controller failover per roll instead of
//     several); then the broker leading the fewest partitions (fewer
//     leaderships to hand over while the roll has just started); then the
//     lowest broker ID, so the order is stable.
//
// When no pod may go, Reason says what blocks the roll, and Blocked which
// partitions block which broker.
func NextRestart(md Metadata, pods []Pod) Restart {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b Pod) int { return cmp.Compare(a.BrokerID, b.BrokerID) })
	var outdated []Pod
	for _, p := range pods {
		if !p.Current {
			outdated = append(outdated, p)
		}
	}
	if len(outdated) == 0 {
		return Restart{Done: true, Reason: "every broker pod runs the current revision"}
	}
	for _, p := range pods {
		if p.Terminating {
			return Restart{Reason: fmt.Sprintf("pod %s (broker %d) is terminating: one broker at a time", p.Name, p.BrokerID)}
		}
	}
	for _, p := range pods {
		if p.Current && !p.Ready {
			return Restart{Reason: fmt.Sprintf("pod %s (broker %d) is not ready: waiting for it before the next restart", p.Name, p.BrokerID)}
		}
	}
	leads := map[int32]int{}
	for _, p := range md.Partitions {
		if p.Leader != NoLeader {
			leads[p.Leader]++
		}
	}
	slices.SortStableFunc(outdated, func(a, b Pod) int {
		return cmp.Or(
			cmp.Compare(boolRank(a.Ready), boolRank(b.Ready)),
			cmp.Compare(boolRank(a.BrokerID == md.Controller), boolRank(b.BrokerID == md.Controller)),
			cmp.Compare(leads[a.BrokerID], leads[b.BrokerID]),
			cmp.Compare(a.BrokerID, b.BrokerID),
		)
	})
	blocked := map[int32][]Blocker{}
	for _, c := range outdated {
		blockers, unavailable := RestartBlockers(c.BrokerID, md)
		if len(blockers) > 0 {
			blocked[c.BrokerID] = blockers
			continue
		}
		reason := fmt.Sprintf("broker %d: outdated revision, next in order (leads %d partitions", c.BrokerID, leads[c.BrokerID])
		switch {
		case !c.Ready:
			reason = fmt.Sprintf("broker %d: outdated revision and not ready, restarted first (", c.BrokerID)
		case c.BrokerID == md.Controller:
			reason += "; the controller, restarted last"
		}
		return Restart{Pod: c.Name, BrokerID: c.BrokerID, Reason: reason + ")", Unavailable: unavailable}
	}
	return Restart{Reason: BlockedReason(outdated, blocked), Blocked: blocked}
}

// BlockedReason says which partitions block which broker, in the order
// the brokers would restart.
func BlockedReason(order []Pod, blocked map[int32][]Blocker) string {
	var parts []string
	for _, p := range order {
		if b := blocked[p.BrokerID]; len(b) > 0 {
			parts = append(parts, fmt.Sprintf("broker %d by %d partitions (%s)", p.BrokerID, len(b), list(b)))
		}
	}
	prefix := "restarting it would take partitions below min.insync.replicas: "
	if len(parts) > 1 {
		prefix = fmt.Sprintf("none of the %d brokers to restart may go now without taking partitions below min.insync.replicas: ", len(parts))
	}
	return prefix + strings.Join(parts, "; ")
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
