package replica

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The leader's wal.policy signal (docs/wal.md "Cost and wal.policy").
//
// While wal.policy replicates inline (walcost.go), pointers are never
// sent, so a follower that tags its replica fetches for them (the
// request's top-level TagWALPointers and one TagWALPointers per named
// partition) pays a few bytes per request and per partition for nothing:
// its fetches are larger than a classic follower's. The leader therefore
// says, in the top-level tagged field TagWALPolicy of a Fetch response,
// when its path changes for that follower's connection:
//
//   - WALPolicyInline to a follower that asks for pointers while the
//     leader is inline by policy: the follower then fetches without any
//     tag, byte for byte as a classic follower does, and is answered
//     inline as one (classic-sized responses too: nothing is said while
//     nothing changes);
//   - WALPolicyObjects once the leader turned to WAL objects, in the
//     answer to the connection's next fetch (a parked one included): the
//     follower tags its next fetch again.
//
// The leader remembers per connection whether it last said inline, and
// the follower forgets what it was told when its connection closes (it
// starts every connection asking for pointers), so both sides agree as
// long as the connection lives. Data never depends on the signal: a
// fetch without the tag is always answered inline, so a follower that
// ignores the field (an older version) or never got it stays correct;
// it only keeps paying the tag bytes.

// TagWALPolicy is the Fetch response's top-level tagged field carrying
// the leader's wal.policy signal (one byte, WALPolicyInline or
// WALPolicyObjects). "SP".
const TagWALPolicy = 0x5350

// Values of TagWALPolicy.
const (
	// WALPolicyObjects: the leader replicates through WAL objects again;
	// ask for pointers.
	WALPolicyObjects = 0x00
	// WALPolicyInline: the leader replicates inline by policy; fetch
	// without pointer tags until it says WALPolicyObjects.
	WALPolicyInline = 0x01
)

// SignalWALPolicy puts the leader's wal.policy signal into resp, the
// answer to the replica fetch req, when the follower's view changes.
// inline is the leader's Manager.PolicyInline; saidInline is the
// connection's memory of the last signal (nil: the connection keeps
// none, nothing is said). req is the request as the follower sent it
// (before its fetch session filled in the partitions it left out).
func SignalWALPolicy(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, inline bool, saidInline *atomic.Bool) {
	if saidInline == nil {
		return
	}
	switch {
	case inline && !saidInline.Load() && asksAnyPointers(req):
		saidInline.Store(true)
		resp.UnknownTags.Set(TagWALPolicy, []byte{WALPolicyInline})
	case !inline && saidInline.Load():
		saidInline.Store(false)
		resp.UnknownTags.Set(TagWALPolicy, []byte{WALPolicyObjects})
	}
}

// asksAnyPointers reports whether a follower's fetch carries a pointer
// tag: the top-level one (compact pointers) or one of a partition (a
// follower that predates compact pointers).
func asksAnyPointers(req *kmsg.FetchRequest) bool {
	if tagValue(&req.UnknownTags, TagWALPointers) != nil {
		return true
	}
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if WantsPointers(&req.Topics[i].Partitions[j]) {
				return true
			}
		}
	}
	return false
}

// heedWALPolicy reads the leader's signal from an answer: inline makes
// the following fetches on this connection untagged, objects tagged.
func (f *fetcher) heedWALPolicy(fr *kmsg.FetchResponse) {
	v := tagValue(&fr.UnknownTags, TagWALPolicy)
	if len(v) != 1 {
		return // none (or not one we know): nothing changed
	}
	switch v[0] {
	case WALPolicyInline:
		f.leaderInline = true
	case WALPolicyObjects:
		f.leaderInline = false
	}
}

// untagged: the leader said, on this connection, that it replicates
// inline by policy; items then ask for no pointers (a new connection
// asks again).
func (f *fetcher) untagged() bool {
	return f.leaderInline && f.conn != nil
}
