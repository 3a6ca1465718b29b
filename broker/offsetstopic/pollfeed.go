package offsetstopic

import (
	"context"
	"time"

	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/internaltopic"
)

// PollFeed is the Feed of a group store without change notifications (a
// single broker's FileStore): it reads the whole store whenever Version
// changed, at most every Interval, and at least every FullInterval, and
// reports every read as a snapshot; the projector writes what differs
// from the last one (internaltopic.Poll).
type PollFeed struct {
	Store interface {
		Load(context.Context) (map[string][]group.OffsetCommit, error)
		LoadGroups(context.Context) (map[string]group.GroupMetadata, error)
	}
	// Version changes when the store changed (FileStore.Size).
	Version func() int64
	// Interval (default 200 ms) and FullInterval (default 30 s).
	Interval, FullInterval time.Duration
}

// Follow implements Feed. It returns nil when ctx ends and an error when
// a read fails.
func (f *PollFeed) Follow(ctx context.Context, snapshot func(group.StoreSnapshot), _ func([]group.StoreChange)) error {
	return internaltopic.Poll(ctx, f.Interval, f.FullInterval, f.Version, func() error {
		offsets, err := f.Store.Load(ctx)
		if err != nil {
			return err
		}
		groups, err := f.Store.LoadGroups(ctx)
		if err != nil {
			return err
		}
		snapshot(group.StoreSnapshot{Offsets: offsets, Groups: groups})
		return nil
	})
}
