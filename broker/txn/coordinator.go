package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's defaults of the transaction coordinator settings.
const (
	// DefaultMaxTimeout is transaction.max.timeout.ms.
	DefaultMaxTimeout = 15 * time.Minute
	// DefaultAbortCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms.
	DefaultAbortCheckInterval = 10 * time.Second
	// DefaultIDExpiration is transactional.id.expiration.ms.
	DefaultIDExpiration = 7 * 24 * time.Hour
	// DefaultIDExpirationCheckInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms.
	DefaultIDExpirationCheckInterval = time.Hour
)

// Clock is the coordinator's time source (a fake in tests).
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Marker is the outcome of one transaction to write: a control record
// on each partition and the commit or abort of the pending offsets at each
// group's coordinator.
type Marker struct {
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the record's (Metadata.CoordinatorEpoch) when
	// this coordinator began writing the markers.
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []TopicPartition
	Groups           []string
}

// ErrCoordinatorFenced is returned by a MarkerWriter when a partition
// refused a marker with TRANSACTION_COORDINATOR_FENCED: a coordinator
// with a newer coordinator epoch wrote the producer's markers there. The
// coordinator stops writing these markers and reads the record again
// before its next use.
var ErrCoordinatorFenced = errors.New("txn: a newer coordinator wrote markers for this producer")

// MarkerWriter writes transaction markers (WriteTxnMarkers to partition
// leaders, group offset completion at group coordinators). One call is
// one attempt: it returns what is still to be written — partitions whose
// leader did not acknowledge, groups whose coordinator did not — and the
// coordinator tries those again after Config.MarkerRetryBackoff. The
// markers must be idempotent: the same marker may be written twice (a
// coordinator that takes over writes them all again).
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Marker) (remaining Marker, err error)
}

// Config configures a Coordinator.
type Config struct {
	// Store persists transaction state; nil means a MemoryStore.
	Store Store
	// Markers writes commit/abort markers; required.
	Markers MarkerWriter
	// ProducerIDs allocates producer IDs never handed out before;
	// required.
	ProducerIDs func() (int64, error)
	// Clock is the time source; nil means the wall clock.
	Clock Clock
	// Owns reports whether this broker coordinates a transactional ID;
	// nil means every ID. Others get NOT_COORDINATOR.
	Owns func(id string) bool
	// OwnershipEpoch changes whenever the placement of IDs may have
	// changed (the live broker set changed); a record cached under another
	// epoch is read from the Store again before use. Nil: placement never
	// changes (a standalone broker).
	OwnershipEpoch func() uint64
	// MaxTimeout is transaction.max.timeout.ms (0: DefaultMaxTimeout).
	MaxTimeout time.Duration
	// AbortCheckInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (0:
	// DefaultAbortCheckInterval); Run also takes over IDs this often.
	AbortCheckInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms (0:
	// DefaultIDExpiration).
	IDExpiration time.Duration
	// MarkerRetryBackoff is the pause between marker attempts (0: 100 ms).
	MarkerRetryBackoff time.Duration
	// Metrics receives counts; nil: none.
	Metrics Observer
}

// Observer receives the coordinator's events (strata_txn_* metrics).
type Observer interface {
	// TransactionEnded counts a transaction's completion ("commit",
	// "abort") and why it ended ("client", "timeout", "init").
	TransactionEnded(outcome, reason string)
	// MarkerRetry counts a marker attempt that left partitions or groups
	// to retry.
	MarkerRetry()
}

// entry is one transactional ID's cached record.
//
// mu guards every field. completing is set while a goroutine writes the
// markers of the record's Prepare* state; it never holds mu while sending.
// claimed is set once this coordinator wrote the record since it read it
// from the store: its first write bumps Metadata.CoordinatorEpoch.
type entry struct {
	mu         sync.Mutex
	st         Stored
	epoch      uint64 // ownership epoch the record was read under
	completing bool
	claimed    bool
}

// Coordinator is the transaction coordinator of one broker. Safe for
// concurrent use.
type Coordinator struct {
	cfg   Config
	clock Clock
	log   logr.Logger

	mu       sync.Mutex
	entries  map[string]*entry
	closed   bool
	loaded   bool
	lastScan uint64 // ownership epoch of the last takeover scan

	// ctx ends at Close: completion goroutines stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Coordinator; Load (or Run) reads the store.
func New(ctx context.Context, cfg Config) (*Coordinator, error) {
	if cfg.Markers == nil || cfg.ProducerIDs == nil {
		return nil, errors.New("txn: Config.Markers and Config.ProducerIDs are required")
	}
	if cfg.Store == nil {
		cfg.Store = NewMemoryStore()
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.AbortCheckInterval <= 0 {
		cfg.AbortCheckInterval = DefaultAbortCheckInterval
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.MarkerRetryBackoff <= 0 {
		cfg.MarkerRetryBackoff = 100 * time.Millisecond
	}
	log := logr.FromContextOrDiscard(ctx).WithName("txn")
	cctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	return &Coordinator{cfg: cfg, clock: cfg.Clock, log: log, entries: map[string]*entry{}, ctx: cctx, cancel: cancel}, nil
}

// Close stops the coordinator's goroutines (markers in flight are left to
// the next coordinator, which writes them again).
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) owns(id string) bool { return c.cfg.Owns == nil || c.cfg.Owns(id) }

func (c *Coordinator) ownershipEpoch() uint64 {
	if c.cfg.OwnershipEpoch == nil {
		return 0
	}
	return c.cfg.OwnershipEpoch()
}

func (c *Coordinator) nowMillis() int64 { return c.clock.Now().UnixMilli() }

// Load reads every record of the store and takes over the IDs this broker
// coordinates: Prepare* transactions are completed. Until the first Load
// returned, requests get COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Load(ctx context.Context) error {
	toComplete, err := c.loadRecords(ctx)
	if err != nil {
		return err
	}
	c.takeOver(toComplete)
	return nil
}

// prepared is a record Load read in a Prepare* state, to complete.
type prepared struct {
	e        *entry
	revision int64
}

// loadRecords is Load's first step: it reads the store into the cache and
// returns the Prepare* records read.
//
// A listed record replaces a cached one only when it is newer: the list
// may have been read before a write this coordinator made since (a
// request between the list and this step), and the older record put
// back in the cache would be taken for the current one.
func (c *Coordinator) loadRecords(ctx context.Context) ([]prepared, error) {
	epoch := c.ownershipEpoch()
	recs, err := c.cfg.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("txn: load transaction state: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	for id := range c.entries {
		if !c.owns(id) {
			delete(c.entries, id) // read again if it comes back
		}
	}
	var toComplete []prepared
	for _, r := range recs {
		id := r.Metadata.TransactionalID
		if !c.owns(id) {
			continue
		}
		e := c.entries[id]
		if e == nil {
			e = &entry{}
			c.entries[id] = e
		}
		e.mu.Lock()
		if r.Revision > e.st.Revision && !e.completing {
			e.st, e.claimed = r, false
		}
		e.epoch = epoch
		if (e.st.Metadata.State == PrepareCommit || e.st.Metadata.State == PrepareAbort) && !e.completing {
			toComplete = append(toComplete, prepared{e: e, revision: e.st.Revision})
		}
		e.mu.Unlock()
	}
	c.loaded = true
	c.lastScan = epoch
	return toComplete, nil
}

// takeOver is Load's second step: it completes the Prepare* records
// loadRecords read, each only if the cache still holds that revision.
// Between the two steps requests are served: a client may have ended the
// transaction read here and begun its next one, and completing that
// record as read — its markers taken from whatever the cache holds now —
// wrote ABORT markers for the new, ongoing transaction and stored
// CompleteAbort over it without a PrepareAbort (chaos seed 41: the
// transaction's later records on two partitions came after those
// markers, its next commit closed them, and one transaction ended
// committed on two partitions and aborted on the third).
func (c *Coordinator) takeOver(toComplete []prepared) {
	n := 0
	for _, p := range toComplete {
		p.e.mu.Lock()
		if p.e.st.Revision == p.revision {
			c.startCompletionLocked(p.e, "takeover")
			n++
		}
		p.e.mu.Unlock()
	}
	if n > 0 {
		c.log.Info("took over transactions to complete", "count", n)
	}
}

// Run loads the state, then until ctx ends: aborts timed-out transactions,
// expires idle transactional IDs and takes over IDs whenever the
// ownership epoch changes.
func (c *Coordinator) Run(ctx context.Context) {
	tick := c.cfg.AbortCheckInterval
	if c.cfg.OwnershipEpoch != nil {
		tick = min(tick, time.Second) // takeovers should not wait 10 s
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var lastAbort time.Time
	for {
		c.mu.Lock()
		needScan := !c.loaded || c.lastScan != c.ownershipEpoch()
		c.mu.Unlock()
		if needScan {
			if err := c.Load(ctx); err != nil && ctx.Err() == nil {
				c.log.Error(err, "loading transaction state; retrying")
			}
		}
		if now := time.Now(); now.Sub(lastAbort) >= c.cfg.AbortCheckInterval {
			lastAbort = now
			c.AbortTimedOut(ctx)
			c.ExpireIdle(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errNotCoordinator and friends map to Kafka error codes in codeOf.
var (
	errNotCoordinator = kerr.NotCoordinator
	errLoading        = kerr.CoordinatorLoadInProgress
)

// lock returns id's entry locked, reading it from the store when it is not
// cached or was cached under another ownership epoch. create makes an
// absent record's entry (Revision 0). The error is a *kerr.Error for the
// response.
func (c *Coordinator) lock(ctx context.Context, id string) (*entry, *kerr.Error) {
	if !c.owns(id) {
		return nil, errNotCoordinator
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errNotCoordinator
	}
	if !c.loaded {
		c.mu.Unlock()
		return nil, errLoading
	}
	e := c.entries[id]
	if e == nil {
		e = &entry{epoch: ^uint64(0)} // never read: forces a Get
		c.entries[id] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	if epoch := c.ownershipEpoch(); e.epoch != epoch && !e.completing {
		r, err := c.cfg.Store.Get(ctx, id)
		if err != nil {
			e.mu.Unlock()
			c.log.Error(err, "reading transaction state", "transactionalID", id)
			return nil, kerr.CoordinatorNotAvailable
		}
		if r.Revision != e.st.Revision || r.Revision == 0 {
			e.claimed = false
		}
		e.st, e.epoch = r, epoch
		if (r.Metadata.State == PrepareCommit || r.Metadata.State == PrepareAbort) && r.Revision != 0 {
			c.startCompletionLocked(e, "takeover")
		}
	}
	return e, nil
}

// refreshLocked re-reads id's record unless this coordinator is writing
// it (completing). While two brokers' views of the live brokers differ,
// both may place an ID on themselves: writes are safe (compare-and-swap),
// but an answer that writes nothing — a retried EndTxn of a finished
// transaction, partitions already added, a fenced epoch — must come from
// the record, not from a cache older than the other coordinator's write
// (a stale cache holding the previous transaction's CompleteAbort
// answered a new transaction's abort as "done" and wrote no markers, so
// its records were read as committed). Callers hold e.mu.
func (c *Coordinator) refreshLocked(ctx context.Context, id string, e *entry) *kerr.Error {
	if e.completing {
		return nil
	}
	r, err := c.cfg.Store.Get(ctx, id)
	if err != nil {
		c.log.Error(err, "reading transaction state", "transactionalID", id)
		return kerr.CoordinatorNotAvailable
	}
	if r.Revision == e.st.Revision && r.Revision != 0 {
		return nil
	}
	e.st, e.claimed = r, false
	if (r.Metadata.State == PrepareCommit || r.Metadata.State == PrepareAbort) && r.Revision != 0 {
		c.startCompletionLocked(e, "takeover")
	}
	return nil
}

// persist writes md as e's new state (compare-and-swap on e's revision).
// Callers hold e.mu. On a conflict the entry is dropped from the cache
// (another coordinator wrote it) and NOT_COORDINATOR is returned.
//
// The first write since the record was read from the store bumps its
// CoordinatorEpoch: this coordinator's markers then carry an epoch above
// any marker a previous coordinator of the ID may still have in flight.
func (c *Coordinator) persist(ctx context.Context, e *entry, md Metadata) *kerr.Error {
	md.UpdateMillis = c.nowMillis()
	md.CoordinatorEpoch = e.st.Metadata.CoordinatorEpoch
	if !e.claimed {
		md.CoordinatorEpoch++
	}
	rev, err := c.cfg.Store.Put(ctx, md, e.st.Revision)
	if errors.Is(err, ErrConflict) {
		e.epoch = ^uint64(0) // read again next time
		e.claimed = false
		return errNotCoordinator
	}
	if err != nil {
		c.log.Error(err, "persisting transaction state", "transactionalID", md.TransactionalID, "state", md.State)
		return kerr.CoordinatorNotAvailable
	}
	e.st, e.claimed = Stored{Metadata: md, Revision: rev}, true
	return nil
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for requests
// too old to know it (as Kafka answers them).
func fencedCode(old bool) *kerr.Error {
	if old {
		return kerr.InvalidProducerEpoch
	}
	return kerr.ProducerFenced
}

// InitProducerID is InitProducerId with a transactional ID: it returns the
// producer ID and epoch, or the error for the response. expectedPID and
// expectedEpoch are the producer's current ones (KIP-360; -1 when absent);
// oldClient is set for versions that predate PRODUCER_FENCED.
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expectedPID int64, expectedEpoch int16, oldClient bool) (int64, int16, *kerr.Error) {
	if id == "" {
		return -1, -1, kerr.InvalidRequest
	}
	if timeoutMs <= 0 || time.Duration(timeoutMs)*time.Millisecond > c.cfg.MaxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout
	}
	e, kerrr := c.lock(ctx, id)
	if kerrr != nil {
		return -1, -1, kerrr
	}
	defer e.mu.Unlock()
	if e.completing {
		return -1, -1, kerr.ConcurrentTransactions
	}
	md := e.st.Metadata.clone()
	if e.st.Revision == 0 {
		pid, err := c.cfg.ProducerIDs()
		if err != nil {
			c.log.Error(err, "allocating a producer ID", "transactionalID", id)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
		md = Metadata{TransactionalID: id, ProducerID: pid, ProducerEpoch: -1, LastProducerEpoch: -1, State: Empty, StartMillis: -1}
	}
	if expectedPID >= 0 || expectedEpoch >= 0 {
		valid := expectedPID == md.ProducerID && (expectedEpoch == md.ProducerEpoch || expectedEpoch == md.LastProducerEpoch)
		if !valid {
			return -1, -1, fencedCode(oldClient)
		}
	}
	switch md.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return -1, -1, kerr.ConcurrentTransactions
	case Ongoing:
		// Abort the transaction first, fencing its producer with an
		// epoch bump; the client retries and gets the next epoch.
		if err := c.abortLocked(ctx, e, true, "init"); err != nil {
			return -1, -1, err
		}
		return -1, -1, kerr.ConcurrentTransactions
	case Dead:
		return -1, -1, kerr.ConcurrentTransactions
	}
	// Empty, CompleteCommit, CompleteAbort.
	if expectedEpoch >= 0 && expectedEpoch == md.LastProducerEpoch && md.ProducerEpoch >= 0 && e.st.Revision != 0 && expectedPID == md.ProducerID {
		// A retried InitProducerId whose answer was lost: same answer.
		return md.ProducerID, md.ProducerEpoch, nil
	}
	if md.ProducerEpoch >= math.MaxInt16-1 {
		pid, err := c.cfg.ProducerIDs()
		if err != nil {
			c.log.Error(err, "allocating a producer ID", "transactionalID", id)
			return -1, -1, kerr.CoordinatorNotAvailable
		}
		md.ProducerID, md.ProducerEpoch, md.LastProducerEpoch = pid, 0, -1
	} else {
		md.LastProducerEpoch = md.ProducerEpoch
		md.ProducerEpoch++
	}
	md.TimeoutMillis = timeoutMs
	md.State = Empty
	md.Partitions, md.Groups, md.StartMillis = nil, nil, -1
	if err := c.persist(ctx, e, md); err != nil {
		return -1, -1, err
	}
	return md.ProducerID, md.ProducerEpoch, nil
}

// checkProducer validates a request's producer ID and epoch against the
// record. Callers hold e.mu.
func checkProducer(e *entry, pid int64, epoch int16, oldClient bool) *kerr.Error {
	return checkStoredProducer(e.st, pid, epoch, oldClient)
}

func checkStoredProducer(st Stored, pid int64, epoch int16, oldClient bool) *kerr.Error {
	if st.Revision == 0 || st.Metadata.ProducerID != pid {
		return kerr.InvalidProducerIDMapping
	}
	if st.Metadata.ProducerEpoch != epoch {
		return fencedCode(oldClient)
	}
	return nil
}

// AddPartitions is AddPartitionsToTxn for one transaction: the partitions
// join the ongoing transaction (starting one). Validation of topics
// (existence, authorization) is the caller's.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition, oldClient bool) *kerr.Error {
	return c.add(ctx, id, pid, epoch, oldClient, func(md *Metadata) bool { return md.addPartitions(tps) })
}

// AddOffsets is AddOffsetsToTxn: the group's offsets join the ongoing
// transaction.
func (c *Coordinator) AddOffsets(ctx context.Context, id string, pid int64, epoch int16, group string, oldClient bool) *kerr.Error {
	return c.add(ctx, id, pid, epoch, oldClient, func(md *Metadata) bool { return md.addGroup(group) })
}

func (c *Coordinator) add(ctx context.Context, id string, pid int64, epoch int16, oldClient bool, add func(*Metadata) bool) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	e, err := c.lock(ctx, id)
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := c.refreshLocked(ctx, id, e); err != nil {
		return err
	}
	if err := checkProducer(e, pid, epoch, oldClient); err != nil {
		return err
	}
	if e.completing {
		return kerr.ConcurrentTransactions
	}
	md := e.st.Metadata.clone()
	switch md.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return kerr.ConcurrentTransactions
	case Dead:
		return kerr.InvalidProducerIDMapping
	}
	if md.State != Ongoing {
		md.Partitions, md.Groups = nil, nil
		md.StartMillis = c.nowMillis()
	}
	if !add(&md) && md.State == Ongoing {
		return nil // nothing new: no write
	}
	md.State = Ongoing
	return c.persist(ctx, e, md)
}

// Verify answers a KIP-890 verification (AddPartitionsToTxn v4
// VerifyOnly): per partition nil when it is part of the ongoing
// transaction of that producer ID and epoch, else the error the produce
// gets.
//
// It answers from the record in the Store, not from the cache: while the
// brokers' views of the live brokers differ (a broker joining or
// leaving), two coordinators may both own an ID. Their writes are safe
// (compare-and-swap on the revision), but this one's cached record may
// be older than what the other wrote: a produce was refused
// INVALID_TXN_STATE from a cached Empty record after the other
// coordinator had added its partition to the transaction. One store read
// per partition and transaction: the partition leader caches positive
// answers until the transaction's marker.
func (c *Coordinator) Verify(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition) (map[TopicPartition]*kerr.Error, *kerr.Error) {
	e, err := c.lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	st, rerr := c.cfg.Store.Get(ctx, id)
	if rerr != nil {
		c.log.Error(rerr, "reading transaction state", "transactionalID", id)
		return nil, kerr.CoordinatorNotAvailable
	}
	if err := checkStoredProducer(st, pid, epoch, false); err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]*kerr.Error, len(tps))
	for _, tp := range tps {
		if st.Metadata.State == Ongoing && st.Metadata.hasPartition(tp) {
			out[tp] = nil
		} else {
			out[tp] = kerr.InvalidTxnState
		}
	}
	return out, nil
}

// EndTxn is EndTxn: it persists PrepareCommit or PrepareAbort, starts
// writing the markers and returns; the transaction completes when every
// marker is written.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit, oldClient bool) *kerr.Error {
	if id == "" {
		return kerr.InvalidRequest
	}
	e, err := c.lock(ctx, id)
	if err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := c.refreshLocked(ctx, id, e); err != nil {
		return err
	}
	if err := checkProducer(e, pid, epoch, oldClient); err != nil {
		return err
	}
	switch st := e.st.Metadata.State; {
	case st == Ongoing && !e.completing:
		if !commit {
			return c.abortLocked(ctx, e, false, "client")
		}
		md := e.st.Metadata.clone()
		md.State = PrepareCommit
		if err := c.persist(ctx, e, md); err != nil {
			return err
		}
		c.startCompletionLocked(e, "client")
		return nil
	case st == CompleteCommit && commit, st == CompleteAbort && !commit:
		return nil // a retry of a finished EndTxn
	case st == PrepareCommit && commit, st == PrepareAbort && !commit:
		return kerr.ConcurrentTransactions
	case st == PrepareEpochFence || (st == Ongoing && e.completing):
		return kerr.ConcurrentTransactions
	default:
		return kerr.InvalidTxnState
	}
}

// abortLocked moves an Ongoing transaction to PrepareAbort (bumping the
// epoch first when fence is set, so its producer is fenced) and starts
// writing the abort markers. Callers hold e.mu.
func (c *Coordinator) abortLocked(ctx context.Context, e *entry, fence bool, reason string) *kerr.Error {
	md := e.st.Metadata.clone()
	// With no epoch left to fence with, the markers carry the current
	// one; the next InitProducerId moves to a new producer ID.
	if fence && md.ProducerEpoch < math.MaxInt16-1 {
		md.LastProducerEpoch = md.ProducerEpoch
		md.ProducerEpoch++
	}
	md.State = PrepareAbort
	if err := c.persist(ctx, e, md); err != nil {
		return err
	}
	c.startCompletionLocked(e, reason)
	return nil
}

// startCompletionLocked writes the markers of e's Prepare* state in a
// goroutine, then persists Complete*. Callers hold e.mu.
//
// A record taken over from the store (not yet written by this
// coordinator) is written first, unchanged but for its coordinator epoch,
// so that the markers carry an epoch above the previous coordinator's; a
// failed write leaves the transaction to whoever won the record.
func (c *Coordinator) startCompletionLocked(e *entry, reason string) {
	if e.completing {
		return
	}
	if st := e.st.Metadata.State; st != PrepareCommit && st != PrepareAbort {
		// Only a stored Prepare* decides the markers: from any other
		// state they would end a transaction nobody ended (takeOver).
		c.log.Info("not completing a transaction that is not prepared", "transactionalID", e.st.Metadata.TransactionalID, "state", st, "reason", reason)
		return
	}
	if !e.claimed {
		if err := c.persist(c.ctx, e, e.st.Metadata.clone()); err != nil {
			c.log.V(1).Info("cannot claim the transaction to complete it", "transactionalID", e.st.Metadata.TransactionalID, "reason", err.Error())
			return
		}
	}
	md := e.st.Metadata.clone()
	commit := md.State == PrepareCommit
	e.completing = true
	m := Marker{ProducerID: md.ProducerID, ProducerEpoch: md.ProducerEpoch, CoordinatorEpoch: md.CoordinatorEpoch, Commit: commit, Partitions: md.Partitions, Groups: md.Groups}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.complete(e, md, m, reason)
	}()
}

func (c *Coordinator) complete(e *entry, prepared Metadata, m Marker, reason string) {
	ctx := c.ctx
	defer func() {
		e.mu.Lock()
		e.completing = false
		e.mu.Unlock()
	}()
	for len(m.Partitions) > 0 || len(m.Groups) > 0 {
		if !c.owns(prepared.TransactionalID) {
			c.log.Info("no longer coordinator; leaving the markers to the new one", "transactionalID", prepared.TransactionalID)
			return
		}
		rest, err := c.cfg.Markers.WriteMarkers(ctx, m)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrCoordinatorFenced) {
			c.log.Info("a newer coordinator wrote markers for the producer; leaving the transaction to it", "transactionalID", prepared.TransactionalID,
				"coordinatorEpoch", m.CoordinatorEpoch)
			e.mu.Lock()
			e.epoch, e.claimed = ^uint64(0), false // read again before the next use
			e.mu.Unlock()
			return
		}
		if err == nil && len(rest.Partitions) == 0 && len(rest.Groups) == 0 {
			break
		}
		if err != nil {
			c.log.V(1).Info("writing transaction markers; retrying", "transactionalID", prepared.TransactionalID, "reason", err.Error())
		} else {
			m.Partitions, m.Groups = rest.Partitions, rest.Groups
		}
		if c.cfg.Metrics != nil {
			c.cfg.Metrics.MarkerRetry()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.cfg.MarkerRetryBackoff): // retry pace
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := e.st.Metadata
	if cur.ProducerID != prepared.ProducerID || cur.ProducerEpoch != prepared.ProducerEpoch || cur.State != prepared.State {
		return // changed meanwhile (another coordinator)
	}
	md := cur.clone()
	outcome := "abort"
	md.State = CompleteAbort
	if prepared.State == PrepareCommit {
		md.State, outcome = CompleteCommit, "commit"
	}
	md.Partitions, md.Groups, md.StartMillis = nil, nil, -1
	for {
		err := c.persist(ctx, e, md)
		if err == nil {
			break
		}
		if err == errNotCoordinator || ctx.Err() != nil {
			return // the owner of the record finishes it
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			e.mu.Lock()
			return
		case <-time.After(c.cfg.MarkerRetryBackoff):
		}
		e.mu.Lock()
	}
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.TransactionEnded(outcome, reason)
	}
}

// AbortTimedOut aborts, with an epoch bump, every Ongoing transaction
// older than its timeout.
func (c *Coordinator) AbortTimedOut(ctx context.Context) int {
	now := c.nowMillis()
	n := 0
	for _, id := range c.cachedIDs() {
		e, err := c.lock(ctx, id)
		if err != nil {
			continue
		}
		md := e.st.Metadata
		if md.State == Ongoing && !e.completing && md.StartMillis >= 0 && now-md.StartMillis > int64(md.TimeoutMillis) {
			if err := c.abortLocked(ctx, e, true, "timeout"); err == nil {
				n++
				c.log.Info("aborting a timed-out transaction", "transactionalID", id, "producerID", md.ProducerID, "timeoutMs", md.TimeoutMillis)
			}
		}
		e.mu.Unlock()
	}
	return n
}

// ExpireIdle removes transactional IDs without an ongoing transaction that
// were not used for IDExpiration.
func (c *Coordinator) ExpireIdle(ctx context.Context) int {
	now := c.nowMillis()
	n := 0
	for _, id := range c.cachedIDs() {
		e, err := c.lock(ctx, id)
		if err != nil {
			continue
		}
		md := e.st.Metadata
		idle := md.State == Empty || md.State == CompleteCommit || md.State == CompleteAbort
		if e.st.Revision != 0 && idle && !e.completing && now-md.UpdateMillis > c.cfg.IDExpiration.Milliseconds() {
			if err := c.cfg.Store.Delete(ctx, id, e.st.Revision); err == nil {
				e.st = Stored{}
				n++
				c.log.V(1).Info("expired an idle transactional ID", "transactionalID", id)
			}
		}
		e.mu.Unlock()
		if e.st.Revision == 0 {
			c.mu.Lock()
			if c.entries[id] == e {
				delete(c.entries, id)
			}
			c.mu.Unlock()
		}
	}
	return n
}

func (c *Coordinator) cachedIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.entries))
	for id := range c.entries {
		ids = append(ids, id)
	}
	return ids
}

// Describe returns id's record; the error is NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS or TRANSACTIONAL_ID_NOT_FOUND.
func (c *Coordinator) Describe(ctx context.Context, id string) (Metadata, *kerr.Error) {
	e, err := c.lock(ctx, id)
	if err != nil {
		return Metadata{}, err
	}
	defer e.mu.Unlock()
	if e.st.Revision == 0 {
		return Metadata{}, kerr.TransactionalIDNotFound
	}
	return e.st.Metadata.clone(), nil
}

// List returns the records of the IDs this broker coordinates.
func (c *Coordinator) List(ctx context.Context) ([]Metadata, *kerr.Error) {
	c.mu.Lock()
	loaded := c.loaded
	c.mu.Unlock()
	if !loaded {
		return nil, errLoading
	}
	var out []Metadata
	for _, id := range c.cachedIDs() {
		md, err := c.Describe(ctx, id)
		if err == nil {
			out = append(out, md)
		}
	}
	return out, nil
}

// Now is the coordinator's clock (ListTransactions' duration filter).
func (c *Coordinator) Now() time.Time { return c.clock.Now() }
