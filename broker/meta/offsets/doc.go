// Package offsets is the etcd-backed group.OffsetStore of a replicated
// cluster: committed consumer-group offsets survive the loss of any broker,
// and a new group coordinator finds them in etcd.
//
// Layout, beside (not under) the watched metadata prefix so that commits do
// not wake every broker's metadata watch:
//
//	/strata/<cluster>/offsets/<escaped group>/<topic>/<partition>  →  JSON {offset, leaderEpoch, metadata, commitTimeMillis}
//	/strata/<cluster>/groups/<escaped group>                      →  JSON group.GroupMetadata (membership)
//	/strata/<cluster>/group-claims/<escaped group>                →  "" (written by the coordinator that claims the group)
//
// The store also implements group.MembershipStore, so a new coordinator
// takes groups back with their generation and assignments instead of making
// every member rejoin.
//
// The group name is path-escaped (it may contain '/'); topic names cannot
// contain '/'. A Commit is durable when etcd acknowledged it (raft majority,
// fsync), which is what OffsetStore asks for. Commits of more partitions
// than fit in one etcd transaction are written in several; each partition's
// commit is still atomic, as Kafka's per-partition OffsetCommit results are.
//
// Every write of a group (offsets, membership, pending transactional
// offsets, deletion) holds only while the group's claim key is the one this
// Store wrote last (group.GroupClaimer): a coordinator deposed by a newer
// one's claim gets group.ErrFenced and cannot overwrite its state.
package offsets
