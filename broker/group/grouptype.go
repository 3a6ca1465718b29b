package group

import (
	"context"
)

// Classic and KIP-848 consumer groups live in the Coordinator's map, share
// groups in the ShareCoordinator; these are the Coordinator's questions to
// the share groups.

// isShareGroup reports whether a share group of this broker has id.
func (c *Coordinator) isShareGroup(id string) bool {
	s := c.shares.Load()
	return s != nil && s.IsShareGroup(id)
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
