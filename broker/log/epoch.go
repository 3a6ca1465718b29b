package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

const epochCheckpointFile = "leader-epoch-checkpoint"

// EpochEntry says that leader epoch Epoch started at offset StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache maps leader epochs to their start offsets (Kafka's
// LeaderEpochFileCache). It is persisted in leader-epoch-checkpoint in
// Kafka's text format: a version line (0), a count line, then one
// "epoch startOffset" line per entry. Guarded by Log.mu.
type epochCache struct {
	fs      FS
	dir     string
	entries []EpochEntry
}

func (c *epochCache) latest() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// assign records that epoch starts at offset if it is newer than the
// latest one. It reports whether the cache changed.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if epoch < 0 || epoch <= c.latest() {
		return false
	}
	// An epoch that started no earlier than the new one held no batches
	// (Kafka: maybeTruncateNonMonotonicEntries).
	for len(c.entries) > 0 && c.entries[len(c.entries)-1].StartOffset >= offset {
		c.entries = c.entries[:len(c.entries)-1]
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: offset})
	return true
}

// assignCopy is assign that never modifies the current backing array, so
// that a caller can restore the previous slice on failure.
func (c *epochCache) assignCopy(epoch int32, offset int64) bool {
	if epoch < 0 || epoch <= c.latest() {
		return false
	}
	c.entries = append([]EpochEntry(nil), c.entries...)
	return c.assign(epoch, offset)
}

// truncateFromEnd drops entries starting at or after offset.
func (c *epochCache) truncateFromEnd(offset int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart makes the earliest remaining epoch start at offset
// (the new log start), dropping epochs that ended before it.
func (c *epochCache) truncateFromStart(offset int64) bool {
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= offset {
		i++
	}
	changed := i > 0
	c.entries = c.entries[i:]
	if len(c.entries) > 0 && c.entries[0].StartOffset < offset {
		c.entries[0].StartOffset = offset
		changed = true
	}
	return changed
}

// endOffsetFor implements OffsetForLeaderEpoch with Kafka's semantics.
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	if epoch < 0 || len(c.entries) == 0 {
		return -1, -1
	}
	if epoch == c.latest() {
		return epoch, leo
	}
	// First entry with a higher epoch.
	hi := -1
	for i, e := range c.entries {
		if e.Epoch > epoch {
			hi = i
			break
		}
	}
	if hi < 0 {
		return -1, -1 // newer than anything we know
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset // older than anything we know
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

func (c *epochCache) path() string { return c.dir + string(os.PathSeparator) + epochCheckpointFile }

func (c *epochCache) persist() error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(c.entries))
	for _, e := range c.entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	if err := writeFileAtomic(c.fs, c.dir, c.path(), b.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", epochCheckpointFile, err)
	}
	return nil
}

func (c *epochCache) load() error {
	data, err := readFile(c.fs, c.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	entries, err := parseEpochCheckpoint(data)
	if err != nil {
		return &CorruptionError{File: c.path(), Offset: -1, Err: err}
	}
	c.entries = entries
	return nil
}

func parseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, fmt.Errorf("unsupported version line %q", v)
	}
	n, ok := line()
	count, err := strconv.Atoi(n)
	if !ok || err != nil || count < 0 {
		return nil, fmt.Errorf("bad count line %q", n)
	}
	var entries []EpochEntry
	for i := 0; i < count; i++ {
		l, ok := line()
		fields := strings.Fields(l)
		if !ok || len(fields) != 2 {
			return nil, fmt.Errorf("entry %d: bad line %q", i, l)
		}
		ep, err1 := strconv.ParseInt(fields[0], 10, 32)
		off, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, fmt.Errorf("entry %d: bad line %q", i, l)
		}
		if len(entries) > 0 && (int32(ep) <= entries[len(entries)-1].Epoch || off < entries[len(entries)-1].StartOffset) {
			return nil, fmt.Errorf("entry %d: %q does not increase", i, l)
		}
		entries = append(entries, EpochEntry{Epoch: int32(ep), StartOffset: off})
	}
	return entries, nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: for the latest epoch,
// the log end offset; for an older one, the start offset of the next
// higher epoch and the largest known epoch at or below the requested one;
// (-1, -1) for an unknown newer epoch or an empty cache.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.endOffsetFor(epoch, l.leo)
}

// StartEpochIfNone records that epoch starts at the log end when the
// epoch cache is empty (a log emptied by TruncateFullyAndStartAt: a
// follower that fell behind the leader's log start, a hydration), and
// persists it; it reports whether it did. A replica becoming leader
// calls it (Kafka's maybeAssignEpochStartOffset at makeLeader): a leader
// without any epoch answers every follower's fetch with a divergence at
// its log end under no epoch, which a follower already at that end
// cannot resolve by truncating, so the partition never gets its ISR back
// (strata chaos seed 42, session 25: a tiered partition stalled with
// min.insync.replicas=2). With the entry, a follower whose last epoch is
// older than every epoch here is told that epoch ends at this log's end.
func (l *Log) StartEpochIfNone(epoch int32) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, ErrClosed
	}
	if epoch < 0 || len(l.epochs.entries) > 0 {
		return false, nil
	}
	if !l.epochs.assignCopy(epoch, l.leo) {
		return false, nil
	}
	if err := l.epochs.persist(); err != nil {
		l.epochs.entries = nil
		return false, fmt.Errorf("start epoch %d at %d: %w", epoch, l.leo, err)
	}
	return true, nil
}

// LatestEpoch is the latest leader epoch in the log, -1 when none.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.epochs.latest()
}

// Epochs returns a copy of the epoch cache, oldest first.
func (l *Log) Epochs() []EpochEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]EpochEntry(nil), l.epochs.entries...)
}
