package txn

// Change is one change of a transaction store, as a store's change feed
// reports it to followers such as the __transaction_state topic
// (broker/txntopic): the record of ID written (Metadata) or deleted
// (Metadata nil).
type Change struct {
	ID       string
	Metadata *Metadata
}

// Version changes whenever the store changes (a poll feed's cue to read
// it again, broker/txntopic).
func (s *FileStore) Version() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem.rev
}
