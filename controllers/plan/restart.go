package plan

import (
	"cmp"
	"fmt"
	"slices"
)

// CaughtUp reports whether broker id is back in service after a restart:
// registered, and in the ISR of every partition it replicates whose leader
// is alive (a registered broker). Partitions without a live leader are
// skipped: no replica can catch up with a missing leader, and the restart
// did not cause that. When it is not caught up, why says what is missing.
//
// It is the gate between two restarts of a roll: the next broker may go
// only when the previous one holds full copies again, otherwise two
// brokers' copies are missing at once.
func CaughtUp(id int32, md Metadata) (ok bool, why string) {
	if !md.registered(id) {
		return false, fmt.Sprintf("broker %d is not registered in the cluster metadata", id)
	}
	var behind []string
	for _, p := range md.sortedPartitions() {
		if !slices.Contains(p.Replicas, id) || slices.Contains(p.ISR, id) {
			continue
		}
		if p.Leader == NoLeader || !md.registered(p.Leader) {
			continue
		}
		behind = append(behind, p.String())
	}
	if len(behind) > 0 {
		return false, fmt.Sprintf("broker %d is not yet in the ISR of %d partitions (%s)", id, len(behind), list(behind))
	}
	return true, ""
}

// RollBacklog counts what a roll's next restart waits for: broker pods
// not ready, replicas not in their partition's ISR, and partitions
// without a leader. A roll whose backlog goes down makes progress even
// when it restarts nobody (a restarted broker catching up partition by
// partition); one whose backlog does not is stuck after a while.
func RollBacklog(md Metadata, pods []Pod) int32 {
	var n int32
	for _, p := range pods {
		if !p.Ready {
			n++
		}
	}
	for _, p := range md.Partitions {
		for _, r := range p.Replicas {
			if !slices.Contains(p.ISR, r) {
				n++
			}
		}
		if p.Leader == NoLeader {
			n++
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
}

// NextRestart decides which broker pod may be deleted now for a rolling
// restart (pods not Current need one). The rules, in order:
//
//  1. Nothing to do when every pod is Current.
//  2. One broker at a time across the whole cluster: no pod may go while
//     any broker pod is terminating.
//  3. Every other broker pod must be ready and caught up (CaughtUp). A pod
//     that is not Current and not ready (or not caught up) is the one
//     exception: it serves nothing already, and the new revision may be
//     what it needs (a bad config being rolled back), so it is restarted
//     first instead of blocking the roll forever.
//  4. No partition may be under-replicated or offline, except for the
//     replica on the candidate itself (rule 3's exception).
//  5. Restarting the candidate must keep every partition whose ISR it is
//     in at or above min.insync.replicas, counting the ISR members other
//     than it. With rule 4 every ISR is full, so this holds exactly for
//     the partitions whose replication factor exceeds
//     min.insync.replicas; the others cannot meet it in any order (RF 1,
//     or RF = min.insync.replicas). They do not block the roll forever;
//     they are listed in Restart.Unavailable for an event.
//  6. Among the candidates that pass: brokers not serving first (rule 3's
//     exception), then the controller last, since restarting it moves the
//     controller role, and restarting it early would move it onto a broker
//     that is itself restarted later (one controller failover per roll
//     instead of several); then the broker leading the fewest partitions
//     (fewer leaderships to hand over while the roll has just started);
//     then the lowest broker ID, so the order is stable.
//
// When no pod may go, Reason says what blocks the roll.
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
	var down []Pod // not serving: not ready or not caught up
	for _, p := range pods {
		why := ""
		if !p.Ready {
			why = fmt.Sprintf("pod %s (broker %d) is not ready", p.Name, p.BrokerID)
		} else if ok, w := CaughtUp(p.BrokerID, md); !ok {
			why = w
		}
		if why == "" {
			continue
		}
		if p.Current {
			return Restart{Reason: why + ": waiting for it before the next restart"}
		}
		down = append(down, p)
	}
	candidates := outdated
	if len(down) > 0 {
		candidates = down
	}
	leads := map[int32]int{}
	for _, p := range md.Partitions {
		if p.Leader != NoLeader {
			leads[p.Leader]++
		}
	}
	slices.SortStableFunc(candidates, func(a, b Pod) int {
		return cmp.Or(
			cmp.Compare(boolRank(a.BrokerID == md.Controller), boolRank(b.BrokerID == md.Controller)),
			cmp.Compare(leads[a.BrokerID], leads[b.BrokerID]),
			cmp.Compare(a.BrokerID, b.BrokerID),
		)
	})
	first := ""
	for _, c := range candidates {
		unavailable, why := restartSafe(c.BrokerID, md)
		if why != "" {
			if first == "" {
				first = why
			}
			continue
		}
		reason := fmt.Sprintf("broker %d: outdated revision, next in order (leads %d partitions", c.BrokerID, leads[c.BrokerID])
		switch {
		case len(down) > 0:
			reason = fmt.Sprintf("broker %d: outdated revision and not serving, restarted first (", c.BrokerID)
		case c.BrokerID == md.Controller:
			reason += "; the controller, restarted last"
		}
		return Restart{Pod: c.Name, BrokerID: c.BrokerID, Reason: reason + ")", Unavailable: unavailable}
	}
	if len(candidates) > 1 {
		first = fmt.Sprintf("none of the %d brokers to restart may go now; the first: %s", len(candidates), first)
	}
	return Restart{Reason: first}
}

// restartSafe applies rules 4 and 5 to restarting broker id: it returns
// why the restart is not safe now, or the partitions that are unavailable
// for acks=all during it whatever the order.
func restartSafe(id int32, md Metadata) (unavailable []string, why string) {
	for _, p := range md.sortedPartitions() {
		var missing []int32
		for _, r := range p.Replicas {
			if r != id && !slices.Contains(p.ISR, r) {
				missing = append(missing, r)
			}
		}
		switch {
		case p.Leader == NoLeader && !(len(p.ISR) == 1 && p.ISR[0] == id):
			return nil, fmt.Sprintf("partition %s is offline", p)
		case len(missing) > 0 && p.Reassigning():
			return nil, fmt.Sprintf("partition %s is being reassigned (adding %v, removing %v) and its ISR %v lacks %v", p, p.Adding, p.Removing, p.ISR, missing)
		case len(missing) > 0:
			return nil, fmt.Sprintf("partition %s is under-replicated: ISR %v of replicas %v", p, p.ISR, p.Replicas)
		}
		if !slices.Contains(p.ISR, id) {
			continue
		}
		// Rule 4 leaves every ISR full: restarting id leaves RF-1 members,
		// at or above min.insync.replicas exactly when RF exceeds it.
		if len(p.Target()) <= md.minISR(p.Topic) {
			unavailable = append(unavailable, p.String())
		}
	}
	return unavailable, ""
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
