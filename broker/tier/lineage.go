package tier

// Leader-epoch lineage of the tier (issue 25, window 2d). Every uploaded
// segment records the leader epochs of its batches (Segment.Epochs), so
// the manifest carries the history of the offsets it holds, as a log's
// leader-epoch checkpoint does. After an unclean election the new leader's
// log may diverge from what the old leader uploaded: the tier holds the
// old leader's batches from the divergence point on, which the new leader
// does not have (its own batches there have another epoch). Comparing the
// lineage with a replica's epochs the way a follower compares its log with
// its leader's (OffsetForLeaderEpoch) finds that point:
//
//   - the new leader cuts the manifest back to it before its first upload
//     at its epoch (the segments from there go out of the manifest; the
//     orphan sweep deletes their objects) and uploads its own batches
//     from there, instead of continuing from the old leader's end;
//   - every replica bounds its local retention by it (ConsistentEnd), not
//     by the manifest's end, so no replica deletes its own batches because
//     the tier holds different ones at those offsets.

// EpochSource is a replica's leader-epoch history (*log.Log).
type EpochSource interface {
	// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch
	// at or below epoch and the offset where the next one starts (the
	// log end for the latest); (-1, -1) when unknown.
	EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64)
}

// lineage returns the manifest's lineage: the segments' epochs, merged,
// from the first segment after the last one uploaded without lineage (an
// older Strata): what precedes it is unknown.
func (m *Manifest) lineage() []EpochStart {
	first := 0
	for i, s := range m.Segments {
		if len(s.Epochs) == 0 {
			first = i + 1
		}
	}
	var out []EpochStart
	for _, s := range m.Segments[first:] {
		for _, e := range s.Epochs {
			if n := len(out); n > 0 && out[n-1].Epoch == e.Epoch {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// consistentEnd returns the offset up to which m agrees with src's
// history: m's end, or the first offset where src has other batches than
// the tier (a divergence after an unclean election). Without evidence (no
// lineage, src's history does not reach back that far) it is m's end.
// The rule is a follower's truncation against its leader, repeated until
// it settles (one step may not suffice after several unclean elections).
func consistentEnd(m *Manifest, src EpochSource) int64 {
	end := m.EndOffset
	lin := m.lineage()
	for {
		for len(lin) > 0 && lin[len(lin)-1].Start >= end {
			lin = lin[:len(lin)-1]
		}
		if len(lin) == 0 {
			return end
		}
		last := lin[len(lin)-1]
		found, localEnd := src.EndOffsetForEpoch(last.Epoch)
		if found < 0 {
			return end
		}
		d := localEnd
		if found != last.Epoch {
			// src never had last.Epoch: they agree up to where the
			// tier's batches of a later epoch than found start.
			for _, e := range lin {
				if e.Epoch > found {
					d = min(d, e.Start)
					break
				}
			}
		}
		if d >= end {
			return end
		}
		end = d
	}
}

// truncate cuts m back to offset end (below its end): the segments
// holding offsets at or above it go, a segment straddling it too (its
// objects hold the other history past end), and the end becomes the
// first offset no kept segment holds.
func (m *Manifest) truncate(end int64) {
	keep := 0
	for keep < len(m.Segments) && m.Segments[keep].LastOffset < end {
		keep++
	}
	if keep < len(m.Segments) {
		end = min(end, m.Segments[keep].BaseOffset)
	}
	m.Segments = append([]Segment(nil), m.Segments[:keep]...)
	m.EndOffset = end
	m.StartOffset = min(m.StartOffset, end)
}

// ConsistentEnd is the offset below which a replica whose history is src
// may delete local segments the tier holds: the tier's end, or the point
// where the tier's lineage leaves src's (the tier holds another leader's
// batches from there; a leader that diverged cuts them out with its
// first upload). 0 before the manifest is known.
func (p *Partition) ConsistentEnd(src EpochSource) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.man == nil {
		return 0
	}
	return consistentEnd(p.man, src)
}
