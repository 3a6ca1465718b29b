package replica

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/meta"
	"github.com/strata-dev/strata/broker/notify"
	"github.com/strata-dev/strata/broker/record"
	"github.com/strata-dev/strata/broker/wal"
)

// Role is what this broker is for a partition.
type Role int

const (
	// RoleNone: not started yet, or stopped.
	RoleNone Role = iota
	// RoleLeader: this broker leads at State().LeaderEpoch.
	RoleLeader
	// RoleFollower: this broker follows State().Leader (NoLeader: waits).
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// Partition is one hosted replica of a partition. See the package comment
// for locking.
type Partition struct {
	TP   meta.TopicPartition
	Log  *log.Log
	self int32
	now  func() time.Time

	hwm atomic.Int64
	// hwmAt is when the HWM last moved (walstage.go).
	hwmAt hwmMoved
	// checkpointed is the HWM last written by CheckpointHWM.
	checkpointed atomic.Int64

	mu    sync.Mutex
	role  Role
	state meta.PartitionState
	// notify is closed (and replaced) whenever the HWM, the LEO reported to
	// waiters or the role changes.
	notify chan struct{}
	// changes are told whenever notify closes, uploads whenever walCh
	// does (Subscribe).
	changes, uploads notify.List
	// Leader only.
	followers map[int32]*followerState
	// epochStart is the LEO when this leadership began: a follower is
	// in sync only once it has reached it (Kafka's leaderEpochStartOffset).
	epochStart int64
	// Follower only: fetching is suspended until this time after an error
	// that needs new metadata (fenced epoch, not leader).
	retryAt time.Time
	// pendingISR is the ISR change proposed and not yet resolved (nil:
	// none). Until it is, the HWM is computed over the committed ISR plus
	// the members it adds (Kafka's maximal ISR), so that a member joining
	// the ISR in etcd has every offset below the HWM, and a member leaving
	// counts until its removal is committed.
	pendingISR *isrChange

	// WAL replication (wal.go). wal is the manager's WAL state, nil when
	// disabled. Leader: walIndex holds the pointers of uploaded ranges,
	// walPending the ranges the uploader accepted and has not resolved,
	// among them, queued in offset order, the foreign pointers of
	// forwarded ranges that wait for an upload before them (walForeign),
	// walCh is closed (and replaced) when an upload of this partition
	// finishes, walLogStart is the log start last reported to the
	// deletion tracker. Follower: walSkipUntil > LEO means fetch inline (a
	// range failed to download) until the log end reaches it.
	// throttled holds the throttled-replica marks of the topic configs
	// (throttle.go); nil: not throttled.
	throttled atomic.Pointer[throttledReplicas]

	// leaderBytes counts the record bytes appended as leader; costSeen
	// is the part the cost loop counted (walcost.go; costTick only).
	leaderBytes atomic.Int64
	costSeen    int64

	wal          *walRep
	walIndex     *wal.PointerIndex
	walPending   []walPending
	walForeign   []walForeignLive // foreign pointers in walIndex, offset order
	walCh        chan struct{}
	walLogStart  int64
	walSkipUntil int64

	// hydration is the slow-tier hydration of a follower (hydrate.go).
	hydration hydrationState

	// consumerReadAt is when a consumer fetch last read this replica as
	// follower, in Unix ns (0: never; hwmwake.go).
	consumerReadAt atomic.Int64
}

// isrChange is an ISR change the leader proposed (AlterPartition).
type isrChange struct {
	expected, proposed meta.PartitionState
	// inFlight: the compare-and-swap runs. false: its outcome is unknown
	// (the call failed without an answer; the write may have committed)
	// and the ISR loop asks again with the same proposal, not before
	// retryAt (the backoff: checks that other events request in between
	// must not hammer a store that just failed).
	inFlight bool
	retryAt  time.Time
}

type followerState struct {
	leo int64 // -1 until the follower's first fetch in this leadership
	// brokerEpoch is the registration epoch the follower's fetches carry
	// (-1 unknown: none yet in this leadership, or an older broker).
	brokerEpoch    int64
	lastFetch      time.Time
	leoAtLastFetch int64 // the leader's LEO when that fetch arrived
	lastCaughtUp   time.Time
}

// NewPartition wraps an open log. The replica starts with RoleNone; the
// Manager makes it leader or follower.
func NewPartition(tp meta.TopicPartition, l *log.Log, self int32, now func() time.Time) *Partition {
	if now == nil {
		now = time.Now
	}
	p := &Partition{TP: tp, Log: l, self: self, now: now, notify: make(chan struct{}), walCh: make(chan struct{})}
	// A restarted replica starts from its checkpointed HWM (bounded by its
	// log), else from its log start; the leader's fetch responses
	// (follower) or the ISR's fetches (leader) move it up.
	h := l.StartOffset()
	if c, err := readHWMCheckpoint(l.Dir()); err == nil {
		h = min(max(c, h), l.EndOffset())
	}
	p.hwm.Store(h)
	p.checkpointed.Store(h)
	return p
}

// hwmCheckpointFile holds a replica's HWM as of its last checkpoint
// (Kafka's replication-offset-checkpoint, one file per partition here, so
// that it goes with the partition's directory: a topic deleted and
// created again never reads its predecessor's HWM).
//
// The file is one line, the HWM in hwmDigits decimal digits and the
// CRC-32C of those digits in hex, overwritten in place: no temporary
// file to create and rename per partition at each checkpoint (at 1,200
// partitions those creations and renames were 4 % of a broker's CPU). A
// write torn by a crash fails the CRC and the replica starts from its log
// start instead, as with no checkpoint: the HWM is a lower bound the
// ISR's fetches move up, never a promise. So the periodic checkpoint
// (every replica.high.watermark.checkpoint.interval.ms) does not fsync:
// a power loss leaves an older value or a torn one, both lower bounds,
// and a killed process leaves the page cache's. It fsynced each file
// until session 29: at 1,200 partitions, hundreds of fsyncs one after
// another in the ISR loop every 5 s on each broker, 12 % of a broker's
// CPU after many partitions' first records. Shutdown (CheckpointHWMs)
// still fsyncs, so a clean restart starts from the latest HWM. A file of
// the earlier format (the HWM alone) is read as it is.
const (
	hwmCheckpointFile = "high-watermark-checkpoint"
	hwmDigits         = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// formatHWMCheckpoint is the checkpoint line of v.
func formatHWMCheckpoint(v int64) []byte {
	digits := fmt.Sprintf("%0*d", hwmDigits, v)
	return fmt.Appendf(nil, "%s %08x\n", digits, crc32.Checksum([]byte(digits), castagnoli))
}

// parseHWMCheckpoint reads a checkpoint's first line: the HWM with its
// CRC, or the HWM alone (the earlier format).
func parseHWMCheckpoint(raw []byte) (int64, error) {
	line, _, _ := strings.Cut(string(raw), "\n")
	digits, sum, withCRC := strings.Cut(strings.TrimSpace(line), " ")
	if withCRC {
		want, err := strconv.ParseUint(sum, 16, 32)
		if err != nil || len(digits) != hwmDigits || uint32(want) != crc32.Checksum([]byte(digits), castagnoli) {
			return 0, fmt.Errorf("bad high watermark checkpoint %q (torn or corrupt)", line)
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad high watermark checkpoint %q", line)
	}
	return v, nil
}

func readHWMCheckpoint(dir string) (int64, error) {
	raw, err := os.ReadFile(filepath.Join(dir, hwmCheckpointFile))
	if err != nil {
		return 0, err
	}
	v, err := parseHWMCheckpoint(raw)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", dir, err)
	}
	return v, nil
}

// CheckpointHWM writes the HWM to the partition directory if it changed
// since the last checkpoint (in place, fsynced; hwmCheckpointFile).
func (p *Partition) CheckpointHWM() error { return p.checkpointHWM(true) }

// checkpointHWM is CheckpointHWM; without sync the write is left to the
// page cache (the periodic checkpoint, see hwmCheckpointFile).
func (p *Partition) checkpointHWM(sync bool) error {
	h := p.hwm.Load()
	if h == p.checkpointed.Load() {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(p.Log.Dir(), hwmCheckpointFile), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: checkpoint HWM: %w", p.TP, err)
	}
	_, err = f.WriteAt(formatHWMCheckpoint(h), 0)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: checkpoint HWM: %w", p.TP, err)
	}
	p.checkpointed.Store(h)
	return nil
}

// HighWatermark is the offset below which records are committed.
func (p *Partition) HighWatermark() int64 { return p.hwm.Load() }

// Role returns the current role.
func (p *Partition) Role() Role {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.role
}

// State returns the partition state this replica acts on.
func (p *Partition) State() meta.PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.Clone()
}

// Changed returns a channel closed at the next change of the HWM or role
// (and, on the leader, of the log end). Fetch long polls wait on it.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.notify
}

func (p *Partition) wakeLocked() {
	close(p.notify)
	p.notify = make(chan struct{})
	p.changes.Signal()
}

// Subscribe calls onChange at each event that closes Changed's channel
// (HWM, role, a follower's log end) and onUpload at each that closes a
// WAL plan's Wait (an upload of this partition done or refused), until
// cancel is called: how a reader of many partitions learns which changed
// without waiting on channels per partition (package notify). Both run
// with the partition's lock held: they must only record the change
// (notify.Set.Mark). A nil onUpload subscribes to changes only.
func (p *Partition) Subscribe(onChange, onUpload func()) (cancel func()) {
	c1 := p.changes.Subscribe(onChange)
	if onUpload == nil {
		return c1
	}
	c2 := p.uploads.Subscribe(onUpload)
	return func() { c1(); c2() }
}

// wakeUploadWaitersLocked wakes the replica fetches waiting for an
// upload of this partition (WALServe.Wait).
func (p *Partition) wakeUploadWaitersLocked() {
	close(p.walCh)
	p.walCh = make(chan struct{})
	p.uploads.Signal()
}

func (p *Partition) setHWMLocked(v int64) {
	if v != p.hwm.Load() {
		p.hwm.Store(v)
		// Transactions whose marker is now below the HWM are stable.
		p.Log.NoteHighWatermark(v)
		p.hwmAt.mark()
		p.wakeLocked()
	}
}

// CheckLeaderEpoch applies KIP-320 to a client's CurrentLeaderEpoch: -1
// skips the check, an older epoch is FENCED_LEADER_EPOCH, a newer one
// UNKNOWN_LEADER_EPOCH (this broker has not caught up with the metadata).
func (p *Partition) CheckLeaderEpoch(current int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkEpochLocked(current)
}

func (p *Partition) checkEpochLocked(current int32) error {
	switch {
	case current < 0:
		return nil
	case current < p.state.LeaderEpoch:
		return fmt.Errorf("%w: request epoch %d, current %d", kerr.FencedLeaderEpoch, current, p.state.LeaderEpoch)
	case current > p.state.LeaderEpoch:
		return fmt.Errorf("%w: request epoch %d, this broker knows %d", kerr.UnknownLeaderEpoch, current, p.state.LeaderEpoch)
	}
	return nil
}

// CheckLeader returns NOT_LEADER_OR_FOLLOWER unless this replica leads,
// then applies CheckLeaderEpoch.
func (p *Partition) CheckLeader(current int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleLeader {
		return fmt.Errorf("%w: broker %d does not lead %s (leader %d)", kerr.NotLeaderForPartition, p.self, p.TP, p.state.Leader)
	}
	return p.checkEpochLocked(current)
}

// CheckReplica returns NOT_LEADER_OR_FOLLOWER unless this replica leads or
// follows (KIP-392: followers serve consumers), then the epoch check.
func (p *Partition) CheckReplica(current int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role == RoleNone {
		return fmt.Errorf("%w: %s is not started on broker %d", kerr.NotLeaderForPartition, p.TP, p.self)
	}
	return p.checkEpochLocked(current)
}

// becomeLeader makes this replica the leader at st.LeaderEpoch. The
// error is a failure to record the epoch in an emptied log (it leads all
// the same).
func (p *Partition) becomeLeader(st meta.PartitionState) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.role = RoleLeader
	p.state = st.Clone()
	p.epochStart = p.Log.EndOffset()
	// A log without any epoch (emptied to start at the leader's log
	// start) gets its own at its end: else every follower's fetch diverges
	// at that end under no epoch, forever (Log.StartEpochIfNone). The
	// caller logs a failure to persist it; the first append records the
	// epoch then.
	_, err := p.Log.StartEpochIfNone(st.LeaderEpoch)
	p.followers = map[int32]*followerState{}
	for _, r := range st.Replicas {
		if r != p.self {
			// Kafka starts every follower as caught up now, so that the
			// ISR is not shrunk before they had a chance to fetch.
			p.followers[r] = &followerState{leo: -1, brokerEpoch: -1, lastCaughtUp: now}
		}
	}
	p.pendingISR = nil
	if h := p.hwm.Load(); h > p.epochStart {
		p.hwm.Store(p.epochStart)
	}
	p.maybeAdvanceHWMLocked()
	p.wakeLocked()
	return err
}

// becomeFollower makes this replica a follower of st.Leader.
func (p *Partition) becomeFollower(st meta.PartitionState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.role = RoleFollower
	p.state = st.Clone()
	p.followers = nil
	p.pendingISR = nil
	p.retryAt = time.Time{}
	// The pointer index is dropped by the Manager (dropWALLocked).
	if h, leo := p.hwm.Load(), p.Log.EndOffset(); h > leo {
		p.hwm.Store(leo)
	}
	p.wakeLocked()
}

// stop drops the role (the partition is being removed).
func (p *Partition) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.role = RoleNone
	p.followers = nil
	p.closeWALLocked()
	p.wakeLocked()
}

// adopt takes a newer state of the same leadership (ISR or replicas
// changed). Older or equal partition epochs are ignored, so a watch event
// that trails the broker's own AlterPartition does not undo it.
func (p *Partition) adopt(st meta.PartitionState) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st.LeaderEpoch != p.state.LeaderEpoch || st.PartitionEpoch <= p.state.PartitionEpoch {
		return false
	}
	p.state = st.Clone()
	if c := p.pendingISR; c != nil && !c.inFlight && c.expected.PartitionEpoch < st.PartitionEpoch {
		// The record moved on (maybe by the very write whose answer was
		// lost): the proposal is settled or stale; decide again from here.
		p.pendingISR = nil
	}
	if p.role == RoleLeader {
		now := p.now()
		for _, r := range st.Replicas {
			if _, ok := p.followers[r]; !ok && r != p.self {
				p.followers[r] = &followerState{leo: -1, brokerEpoch: -1, lastCaughtUp: now}
			}
		}
		for r := range p.followers {
			if !slices.Contains(st.Replicas, r) {
				delete(p.followers, r)
			}
		}
		p.maybeAdvanceHWMLocked()
	}
	p.wakeLocked()
	return true
}

// maybeAdvanceHWMLocked moves the leader's HWM to the smallest LEO of the
// maximal ISR: the committed ISR plus the members a pending change adds
// (KIP-497). It never moves backwards, and a member whose LEO is unknown in
// this leadership holds it where it is.
func (p *Partition) maybeAdvanceHWMLocked() {
	if p.role != RoleLeader {
		return
	}
	low := p.Log.EndOffset()
	members := p.state.ISR
	if c := p.pendingISR; c != nil {
		members = append(slices.Clone(members), c.proposed.ISR...)
	}
	for _, r := range members {
		if r == p.self {
			continue
		}
		f, ok := p.followers[r]
		if !ok || f.leo < 0 {
			return
		}
		low = min(low, f.leo)
	}
	if low > p.hwm.Load() {
		p.setHWMLocked(low)
	}
}

// AppendAsLeader validates nothing (the caller did) and appends batches at
// this leader's epoch, which it returns (acks=all waits for the HWM within
// that leadership). NOT_LEADER_OR_FOLLOWER when not leading. Errors are the
// log's, including log.ErrDuplicateSequence with the original offsets.
func (p *Partition) AppendAsLeader(batches []record.Batch) (log.AppendResult, int32, error) {
	return p.appendAsLeader(batches, nil, func(epoch int32) (log.AppendResult, error) { return p.Log.AppendAsLeader(batches, epoch) })
}

// AppendForwarded is AppendAsLeader (AppendAsLeaderVerified when verify)
// for batches read from a zone-local forwarder's object range fwd: with
// WAL replication, when the append left the bytes as forwarded but for
// the fields a leader stamps, followers get a pointer to fwd's range
// instead of an upload of the batches (walForeignLocked).
func (p *Partition) AppendForwarded(batches []record.Batch, verify bool, guard *log.VerificationGuard, fwd *Forwarded) (log.AppendResult, int32, error) {
	return p.appendAsLeader(batches, fwd, func(epoch int32) (log.AppendResult, error) {
		if verify {
			return p.Log.AppendAsLeaderVerified(batches, epoch, guard)
		}
		return p.Log.AppendAsLeader(batches, epoch)
	})
}

// AppendAsLeaderVerified is AppendAsLeader through
// log.Log.AppendAsLeaderVerified (a transactional produce verified with
// its coordinator under guard, KIP-890).
func (p *Partition) AppendAsLeaderVerified(batches []record.Batch, guard *log.VerificationGuard) (log.AppendResult, int32, error) {
	return p.appendAsLeader(batches, nil, func(epoch int32) (log.AppendResult, error) {
		return p.Log.AppendAsLeaderVerified(batches, epoch, guard)
	})
}

func (p *Partition) appendAsLeader(batches []record.Batch, fwd *Forwarded, appendAt func(epoch int32) (log.AppendResult, error)) (log.AppendResult, int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleLeader {
		return log.AppendResult{}, 0, fmt.Errorf("%w: broker %d does not lead %s", kerr.NotLeaderForPartition, p.self, p.TP)
	}
	epoch := p.state.LeaderEpoch
	res, err := appendAt(epoch)
	if err != nil && !errors.Is(err, log.ErrDuplicateSequence) {
		return res, epoch, err
	}
	if err == nil {
		n := 0
		for _, b := range batches {
			n += len(b)
		}
		p.leaderBytes.Add(int64(n))
		if p.wal != nil {
			p.walAppendLocked(p.wal, batches, epoch, fwd)
		}
	}
	p.maybeAdvanceHWMLocked()
	return res, epoch, err
}

// CheckMinISR returns NOT_ENOUGH_REPLICAS when the ISR is smaller than
// minISR (checked before an acks=all append, as Kafka does).
func (p *Partition) CheckMinISR(minISR int32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := int32(len(p.state.ISR)); n < minISR {
		return fmt.Errorf("%w: %s has %d in-sync replicas %v, min.insync.replicas is %d", kerr.NotEnoughReplicas, p.TP, n, p.state.ISR, minISR)
	}
	return nil
}

// WaitHighWatermark waits until the HWM reaches offset (the acks=all
// purgatory). It fails with NOT_LEADER_OR_FOLLOWER when the leadership of
// epoch ends, with REQUEST_TIMED_OUT when ctx ends, and with
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HWM got there while the ISR
// was below minISR.
func (p *Partition) WaitHighWatermark(ctx context.Context, offset int64, epoch, minISR int32) error {
	return p.WaitHighWatermarkSince(ctx, offset, epoch, minISR, time.Now())
}

// WaitHighWatermarkSince is WaitHighWatermark for a batch appended at
// appended: the acks_all_wait stage counts from there, so a request whose
// wait starts after an earlier one of its connection (responses keep the
// request order) is measured whole.
//
// It also makes the leader's own log durable up to offset (FlushTo; the
// followers report only durable offsets, see flushFetchPositions): an
// acknowledged write is on the disk of every ISR member, so a machine
// crash of any of them, the last one included, cannot take it. The
// leader's fsync runs beside the wait for the followers, not before it:
// the answer waits for the slower of the two, not their sum.
func (p *Partition) WaitHighWatermarkSince(ctx context.Context, offset int64, epoch, minISR int32, appended time.Time) error {
	start := appended
	flushed := make(chan error, 1)
	go func() { flushed <- p.Log.FlushTo(offset) }()
	flushErr := func(err error) error {
		if errors.Is(err, log.ErrClosed) {
			return fmt.Errorf("%w: %s: log closed while waiting for replication", kerr.NotLeaderForPartition, p.TP)
		}
		return fmt.Errorf("%w: %s: cannot make the log durable: %v", kerr.KafkaStorageError, p.TP, err)
	}
	durable := false
	for waited := false; ; waited = true {
		p.mu.Lock()
		role, cur, ch, isr, w := p.role, p.state.LeaderEpoch, p.notify, len(p.state.ISR), p.wal
		p.mu.Unlock()
		if role != RoleLeader || cur != epoch {
			return fmt.Errorf("%w: leadership of %s at epoch %d ended while waiting for replication", kerr.NotLeaderForPartition, p.TP, epoch)
		}
		if p.hwm.Load() >= offset {
			if int32(isr) < minISR {
				return fmt.Errorf("%w: %s has %d in-sync replicas, min.insync.replicas is %d", kerr.NotEnoughReplicasAfterAppend, p.TP, isr, minISR)
			}
			if !durable {
				select {
				case err := <-flushed:
					if err != nil {
						return flushErr(err)
					}
				case <-ctx.Done():
					return fmt.Errorf("%w: %s: the leader's fsync up to %d did not finish in time", kerr.RequestTimedOut, p.TP, offset)
				}
			}
			if w != nil {
				if waited {
					// Woken by the HWM move: how long the wake-up took.
					if d, ok := p.hwmAt.since(); ok {
						w.stages.observe(StageHWMToProduce, d)
					}
				}
				w.stages.observe(StageAcksAllWait, time.Since(start))
			}
			return nil
		}
		select {
		case <-ch:
		case err := <-flushed:
			if err != nil {
				return flushErr(err)
			}
			durable = true
			// Nothing else to wait for here: the next pass waits on ch.
			flushed = nil
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: high watermark %d did not reach %d in time", kerr.RequestTimedOut, p.TP, p.hwm.Load(), offset)
		}
	}
}

// LeaderEpoch returns the leader epoch this replica acts on.
func (p *Partition) LeaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.LeaderEpoch
}

// Divergence is the leader's answer to a fetch whose last fetched epoch
// does not match its log: the fetcher must truncate to EndOffset (Kafka's
// DivergingEpoch).
type Divergence struct {
	Epoch     int32
	EndOffset int64
}

// divergenceFromWire reads a fetch response's DivergingEpoch: (-1, -1),
// the field's default, means none.
func divergenceFromWire(epoch int32, endOffset int64) *Divergence {
	if epoch < 0 && endOffset < 0 {
		return nil
	}
	return &Divergence{Epoch: epoch, EndOffset: endOffset}
}

// CheckDivergence compares a fetch's position with this replica's epoch
// cache (OffsetForLeaderEpoch semantics) and returns where the fetcher's
// log diverged, or nil.
//
// A fetch whose last fetched epoch is newer than every epoch of this log
// (the fetcher appended as the leader of an epoch this replica never
// saw, and this replica, elected after it, has appended nothing in its
// own epoch yet: below min.insync.replicas no produce is taken) diverges
// at this log's end, after its latest epoch. Kafka's leader answers so
// because it writes its own epoch into the cache when it is elected; the
// cache's "unknown" (-1, -1) must not go out, since on the wire it reads
// as no divergence at all: the follower would fetch past this log's end
// forever, never truncating, never rejoining the ISR (strata chaos seed
// 41 found it: a partition left with ISR [leader] for good). Only a
// leader answers so: a follower serving a consumer (KIP-392) may simply
// not have the newer epoch yet.
func (p *Partition) CheckDivergence(fetchOffset int64, lastFetchedEpoch int32) *Divergence {
	if lastFetchedEpoch < 0 {
		return nil
	}
	e, end := p.Log.EndOffsetForEpoch(lastFetchedEpoch)
	if e < 0 && end < 0 && p.Role() == RoleLeader {
		e, end = p.Log.LatestEpoch(), p.Log.EndOffset()
	}
	if e != lastFetchedEpoch || end < fetchOffset {
		return &Divergence{Epoch: e, EndOffset: end}
	}
	return nil
}

// FollowerFetch records a replica fetch from follower at fetchOffset (its
// LEO) on the leader: it updates the follower's LEO and caught-up time and
// advances the HWM. It returns the follower's previous LEO (-1: its first
// fetch of this leadership), which the WAL deletion tracker needs, and
// expand = true when the follower is outside the ISR but has caught up,
// so the ISR should expand. Callers check divergence
// first and do not call this when the fetch diverged.
func (p *Partition) FollowerFetch(follower int32, fetchOffset int64) (prevLEO int64, expand bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleLeader {
		return -1, false, fmt.Errorf("%w: broker %d does not lead %s", kerr.NotLeaderForPartition, p.self, p.TP)
	}
	f, ok := p.followers[follower]
	if !ok {
		return -1, false, fmt.Errorf("%w: broker %d is not a replica of %s", kerr.NotLeaderForPartition, follower, p.TP)
	}
	now, leo := p.now(), p.Log.EndOffset()
	if fetchOffset > leo {
		return -1, false, fmt.Errorf("%w: follower %d fetches at %d beyond the log end %d", kerr.OffsetOutOfRange, follower, fetchOffset, leo)
	}
	// Kafka's rule: caught up now if the follower reached the current LEO,
	// or as of its previous fetch if it reached the LEO of that time.
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case p.walWaitsOnUploadsLocked(fetchOffset, leo):
		// WAL: all it lacks is being uploaded; its answer is the upload.
		f.lastCaughtUp = now
	case fetchOffset >= f.leoAtLastFetch && !f.lastFetch.IsZero():
		if f.lastFetch.After(f.lastCaughtUp) {
			f.lastCaughtUp = f.lastFetch
		}
	}
	prevLEO = f.leo
	f.leo, f.lastFetch, f.leoAtLastFetch = fetchOffset, now, leo
	p.maybeAdvanceHWMLocked()
	inISR := slices.Contains(p.state.ISR, follower)
	return prevLEO, !inISR && p.pendingISR == nil && fetchOffset >= p.hwm.Load() && fetchOffset >= p.epochStart, nil
}

// followerIncarnation records the registration epoch a follower's fetch
// carries (-1: none, an older broker). A new epoch means the follower
// restarted (KIP-903): what the leader knew of it belongs to the previous
// incarnation, which may have had a tail this one lost, so it is not
// caught up until it proves it again with its fetches (an ISR member that
// does not leaves the ISR at the next proposal). It reports whether it
// restarted.
func (p *Partition) followerIncarnation(follower int32, brokerEpoch int64) (restarted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.followers[follower]
	if !ok || brokerEpoch < 0 || p.role != RoleLeader {
		return false
	}
	if f.brokerEpoch >= 0 && f.brokerEpoch != brokerEpoch {
		*f = followerState{leo: -1, brokerEpoch: brokerEpoch}
		return true
	}
	f.brokerEpoch = brokerEpoch
	return false
}

// FollowerLEO returns a follower's LEO as last reported to this leader
// (-1 unknown).
func (p *Partition) FollowerLEO(follower int32) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.followers[follower]; ok {
		return f.leo
	}
	return -1
}

// proposeISR computes the ISR change the leader wants now: members that
// have not caught up within lag, or that restarted since they joined
// (registered under another epoch than the ISR or their fetches say,
// KIP-903), leave; caught-up non-members registered under the epoch their
// fetches carry join. registration returns a broker's registration epoch
// (0: unknown) and whether it is registered. A change whose outcome is
// unknown is proposed again unchanged: AlterPartition re-reads the record,
// so a write that did commit comes back as ErrStaleState with the state
// that has it. ok is false when nothing changes or a change is in flight.
func (p *Partition) proposeISR(lag time.Duration, registration func(int32) (int64, bool)) (expected, proposed meta.PartitionState, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleLeader {
		return expected, proposed, false
	}
	if c := p.pendingISR; c != nil {
		if c.inFlight || p.now().Before(c.retryAt) {
			return expected, proposed, false
		}
		c.inFlight = true
		return c.expected.Clone(), c.proposed.Clone(), true
	}
	now, hwm := p.now(), p.hwm.Load()
	isr := []int32{p.self}
	joined := map[int32]int64{}
	for _, r := range p.state.Replicas {
		if r == p.self {
			continue
		}
		f := p.followers[r]
		if f == nil {
			continue
		}
		in := slices.Contains(p.state.ISR, r)
		epoch, registered := registration(r)
		// restarted: the broker registered again since it joined the ISR
		// or since the fetches the leader counted.
		restarted := epoch != 0 && (in && p.state.ISREpoch(r) != 0 && p.state.ISREpoch(r) != epoch ||
			f.brokerEpoch >= 0 && f.brokerEpoch != epoch)
		switch {
		case in && now.Sub(f.lastCaughtUp) <= lag && !restarted:
			isr = append(isr, r)
		case !in && f.leo >= 0 && f.leo >= hwm && f.leo >= p.epochStart && now.Sub(f.lastCaughtUp) <= lag && registered && !restarted:
			isr = append(isr, r)
			if f.brokerEpoch > 0 {
				joined[r] = f.brokerEpoch
			}
		}
	}
	// Keep the order of the replica list, as Kafka's tools print it.
	ordered := make([]int32, 0, len(isr))
	for _, r := range p.state.Replicas {
		if slices.Contains(isr, r) {
			ordered = append(ordered, r)
		}
	}
	if slices.Equal(ordered, p.state.ISR) {
		return expected, proposed, false
	}
	expected = p.state.Clone()
	proposed = p.state.Clone()
	proposed.ISR = ordered
	for r, e := range joined {
		if proposed.ISREpochs == nil {
			proposed.ISREpochs = map[int32]int64{}
		}
		proposed.ISREpochs[r] = e
	}
	p.pendingISR = &isrChange{expected: expected.Clone(), proposed: proposed.Clone(), inFlight: true}
	p.maybeAdvanceHWMLocked()
	return expected, proposed, true
}

// isrDone ends the proposal in flight. unknown: it failed without an
// answer (the write may have committed), so the change stays pending
// (counted in the maximal ISR) and is proposed again once retryAfter has
// passed.
func (p *Partition) isrDone(unknown bool, retryAfter time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.pendingISR
	if c == nil {
		return
	}
	if unknown && p.role == RoleLeader && p.state.PartitionEpoch == c.expected.PartitionEpoch {
		c.inFlight = false
		c.retryAt = p.now().Add(retryAfter)
		return
	}
	p.pendingISR = nil
	p.maybeAdvanceHWMLocked()
}

// followerEpoch returns the leader and epoch a follower fetches from, and
// whether it should fetch now.
func (p *Partition) fetchPosition() (leader, epoch int32, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleFollower || p.state.Leader == meta.NoLeader || p.state.Leader == p.self {
		return 0, 0, false
	}
	if !p.retryAt.IsZero() && p.now().Before(p.retryAt) {
		return 0, 0, false
	}
	return p.state.Leader, p.state.LeaderEpoch, true
}

// followsAt reports whether this replica still follows leader at epoch.
func (p *Partition) followsAt(leader, epoch int32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.role == RoleFollower && p.state.Leader == leader && p.state.LeaderEpoch == epoch
}

// FetchResult is one partition of a replica fetch response, as the
// fetcher hands it to the follower.
type FetchResult struct {
	Err           error
	HighWatermark int64
	LogStart      int64
	Diverging     *Divergence
	Records       []byte
}

// applyFetch applies a leader's answer for this partition, fetched at
// (leader, epoch). It returns the number of record bytes appended.
func (p *Partition) applyFetch(leader, epoch int32, res FetchResult, backoff time.Duration) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role != RoleFollower || p.state.Leader != leader || p.state.LeaderEpoch != epoch {
		return 0, nil // the role changed while the fetch was in flight
	}
	if res.Err != nil {
		p.retryAt = p.now().Add(backoff)
		if errors.Is(res.Err, kerr.OffsetOutOfRange) && res.LogStart > p.Log.EndOffset() {
			// The leader deleted what this replica would fetch next
			// (retention): restart the log at the leader's start.
			if err := p.Log.TruncateFullyAndStartAt(res.LogStart); err != nil {
				return 0, fmt.Errorf("%s: restart the log at the leader's start %d: %w", p.TP, res.LogStart, err)
			}
			p.retryAt = time.Time{}
			p.hwm.Store(min(p.hwm.Load(), res.LogStart))
			// Far behind within one leadership: the slow tier may hold
			// more of what it needs (hydrate.go decides).
			p.hydration.settled = false
			p.wakeLocked()
			return 0, nil
		}
		return 0, res.Err
	}
	if d := res.Diverging; d != nil {
		to := p.truncationPoint(*d)
		if err := p.Log.TruncateTo(to); err != nil {
			return 0, fmt.Errorf("%s: truncate to the divergence point %d: %w", p.TP, to, err)
		}
		if h := p.hwm.Load(); h > p.Log.EndOffset() {
			p.hwm.Store(p.Log.EndOffset())
		}
		p.wakeLocked()
		return 0, nil
	}
	n := 0
	if len(res.Records) > 0 {
		batches, err := splitBatches(res.Records)
		if err != nil {
			p.retryAt = p.now().Add(backoff)
			return 0, fmt.Errorf("%s: records from leader %d: %w", p.TP, leader, err)
		}
		if len(batches) > 0 {
			// Above the log end is a gap the leader's log cleaner left
			// (compacted topics): the follower keeps the same offsets.
			if batches[0].BaseOffset() < p.Log.EndOffset() {
				return 0, fmt.Errorf("%s: leader %d sent offset %d, log end is %d", p.TP, leader, batches[0].BaseOffset(), p.Log.EndOffset())
			}
			if _, err := p.Log.AppendAsFollower(batches); err != nil {
				p.retryAt = p.now().Add(backoff)
				return 0, fmt.Errorf("%s: append as follower: %w", p.TP, err)
			}
			for _, b := range batches {
				n += len(b)
			}
		}
	}
	// Only upwards (Kafka's maybeUpdateHighWatermark): a new leader may
	// not have learned the old leader's HWM yet, and a follower's HWM is
	// what its consumers read up to (KIP-392). Truncation lowers it above.
	if h := min(res.HighWatermark, p.Log.EndOffset()); h > p.hwm.Load() {
		p.setHWMLocked(h)
	} else if n > 0 {
		p.wakeLocked()
	}
	return n, nil
}

// truncationPoint is Kafka's follower truncation rule for a divergence the
// leader reported: the end of the leader's epoch bounded by the end of the
// same epoch here; when the follower has that epoch under another number it
// truncates to its own end of it (the next fetch checks again).
func (p *Partition) truncationPoint(d Divergence) int64 {
	leo := p.Log.EndOffset()
	if d.Epoch < 0 && d.EndOffset >= 0 {
		// The leader's log has no epoch at all (empty): it ends there.
		return min(d.EndOffset, leo)
	}
	if d.Epoch < 0 || d.EndOffset < 0 {
		return min(p.hwm.Load(), leo)
	}
	e, end := p.Log.EndOffsetForEpoch(d.Epoch)
	if e < 0 || end < 0 {
		return min(p.hwm.Load(), d.EndOffset, leo)
	}
	if e == d.Epoch {
		return min(d.EndOffset, end)
	}
	return min(end, d.EndOffset)
}

// splitBatches cuts a fetched record set into batches, checking each
// batch's frame and CRC-32C (record.Split). A trailing partial batch
// (allowed in fetch responses) is dropped.
func splitBatches(records []byte) ([]record.Batch, error) {
	batches, _, err := record.Split(records)
	return batches, err
}
