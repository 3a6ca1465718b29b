package group

// StoreChange is one change of a group store (offsets or membership), as
// a store's change feed reports it to followers such as the
// __consumer_offsets topic (broker/offsetstopic). Exactly one of Offset,
// OffsetDeleted, Membership and MembershipDeleted is set.
type StoreChange struct {
	Group string
	// Offset is a committed offset (a commit, or a transaction's pending
	// offset becoming visible).
	Offset *OffsetCommit
	// OffsetDeleted is a partition whose committed offset was removed
	// (OffsetDelete, DeleteGroups, expiry).
	OffsetDeleted *TopicPartition
	// Membership is a group's saved membership.
	Membership *GroupMetadata
	// MembershipDeleted reports the group's membership removed.
	MembershipDeleted bool
}

// StoreSnapshot is the whole content of a group store: every group's
// committed offsets and saved membership.
type StoreSnapshot struct {
	Offsets map[string][]OffsetCommit
	Groups  map[string]GroupMetadata
}
