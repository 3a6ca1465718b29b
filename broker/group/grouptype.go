package group

import (
	"context"
)

// One group id, one group type.
//
// Classic and KIP-848 consumer groups live in the Coordinator's map, share
// groups in the ShareCoordinator; as in Kafka's GroupMetadataManager an id
// names one group of one type, and a request of another type answers as
// if that group were not there for it:
//
//	request against a share group           answer
//	JoinGroup                               INCONSISTENT_GROUP_PROTOCOL
//	SyncGroup, Heartbeat, LeaveGroup        UNKNOWN_MEMBER_ID
//	ConsumerGroupHeartbeat                  GROUP_ID_NOT_FOUND
//	ConsumerGroupDescribe                   GROUP_ID_NOT_FOUND
//	OffsetCommit, TxnOffsetCommit           GROUP_ID_NOT_FOUND (any generation)
//	OffsetDelete                            GROUP_ID_NOT_FOUND
//	OffsetFetch                             no offsets (-1), no error
//	DescribeGroups                          Dead (v6: GROUP_ID_NOT_FOUND)
//	DeleteGroups                            deletes it when it has no members
//
// and ShareGroupHeartbeat, ShareGroupDescribe and the share-group offset
// APIs answer GROUP_ID_NOT_FOUND for a classic or consumer group (share.go).
// A classic group that holds nothing (no members, offsets or pending
// commits) does not count: it is dropped when unused.

// isShareGroup reports whether a share group of this broker has id.
func (c *Coordinator) isShareGroup(id string) bool {
	s := c.shares.Load()
	return s != nil && s.IsShareGroup(id)
}

// lockGroupNotShare is lockGroup for the requests that may create a classic
// or consumer group: share reports that id is a share group's (nothing is
// created or locked then).
func (c *Coordinator) lockGroupNotShare(id string, create bool) (g *group, share bool) {
	if create {
		c.typeMu.Lock()
		defer c.typeMu.Unlock()
	}
	if c.isShareGroup(id) {
		return nil, true
	}
	return c.lockGroup(id, create), false
}

// deleteShareGroup hands a DeleteGroups of id to the share coordinator;
// found is false when id is not a share group.
func (c *Coordinator) deleteShareGroup(ctx context.Context, id string) (code int16, found bool) {
	s := c.shares.Load()
	if s == nil {
		return 0, false
	}
	return s.deleteGroup(ctx, id)
}
