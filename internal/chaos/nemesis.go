package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/twmb/franz-go/pkg/kadm"
)

// nemesis carries out a schedule against the cluster. Faults overlap: each
// is applied at its time in its own goroutine and healed after its
// duration, whatever else is going on, within two limits:
//
//   - a fault point (a broker's process, its etcd proxy, a zone's bucket,
//     a network link) is under at most one fault at a time;
//   - at most maxDown brokers are down (killed, stopped, paused) at once,
//     unless the fault is Beyond (then up to every broker).
//
// A fault refused by these limits, or that fails, is counted in
// FaultErrors. It records the most brokers really down at once and the
// faults applied while another was active.
type nemesis struct {
	c       *cluster
	res     *Result
	log     io.Writer
	verbose bool
	start   time.Time
	// end is when the schedule's faults must have ended (the run's
	// length less its cooldown): an object fault stays armed until then.
	end time.Time
	// maxDown is the replication factor less one.
	maxDown int
	hist    *historyWriter

	mu       sync.Mutex
	held     map[string]bool // fault points under a fault
	down     map[int32]bool  // brokers whose process a fault took out
	active   int             // faults applied and not healed
	firstErr error           // a harness failure (a broker not starting again)
	wg       sync.WaitGroup
}

func newNemesis(c *cluster, res *Result, log io.Writer, verbose bool, maxDown int) *nemesis {
	return &nemesis{c: c, res: res, log: log, verbose: verbose, maxDown: maxDown, held: map[string]bool{}, down: map[int32]bool{}}
}

// run applies each fault at its time (in its own goroutine) and waits
// until every fault is healed. An error is a harness failure (a broker
// that does not start again).
func (n *nemesis) run(ctx context.Context, start time.Time, schedule []Fault) error {
	n.start = start
	for _, f := range schedule {
		if d := time.Until(start.Add(f.At)); d > 0 {
			wait(ctx, d) // the schedule's time, not synchronisation
		}
		if ctx.Err() != nil {
			break
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.fire(ctx, f)
		}()
	}
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.firstErr != nil {
		return n.firstErr
	}
	return ctx.Err()
}

// fire applies f, waits its duration and heals it.
func (n *nemesis) fire(ctx context.Context, f Fault) {
	spec := kindSpecs[f.Kind]
	stamp := func() string { return fmt.Sprintf("t=%5.1fs %s", time.Since(n.start).Seconds(), f.Kind) }
	var b *broker
	var claim []string
	var err error
	if spec.resolve != nil {
		err = spec.resolve(ctx, n, &f)
	}
	if err == nil {
		b, claim, err = n.admit(ctx, f, spec)
	}
	var heal func(context.Context) error
	what := ""
	if err == nil {
		heal, what, err = spec.apply(ctx, n, f, b)
		if err != nil {
			n.release(claim, b)
		}
	}
	n.mu.Lock()
	if err != nil {
		n.res.FaultErrors[f.Kind]++
		n.hist.write(Event{Op: OpFaultError, Kind: f.Kind, What: f.Target, Error: err.Error()})
		line := stamp() + " not applied: " + err.Error()
		n.res.Applied = append(n.res.Applied, line)
		n.mu.Unlock()
		if n.verbose {
			fmt.Fprintf(n.log, "  %s\n", line)
		}
		return
	}
	n.res.Faults[f.Kind]++
	if f.During != "" {
		what += " (during " + f.During + ")"
	}
	line := stamp() + " " + what
	n.res.Applied = append(n.res.Applied, line)
	n.hist.write(Event{Op: OpFault, Kind: f.Kind, What: what})
	n.mu.Unlock()
	if n.verbose {
		fmt.Fprintf(n.log, "  %s\n", line)
	}
	if heal != nil {
		if f.Duration > 0 {
			wait(ctx, f.Duration) // how long the fault lasts
		}
		if err := heal(context.WithoutCancel(ctx)); err != nil {
			n.mu.Lock()
			if n.firstErr == nil {
				n.firstErr = fmt.Errorf("healing %s: %w", f, err)
			}
			n.mu.Unlock()
		}
		n.hist.write(Event{Op: OpHeal, Kind: f.Kind, What: what})
		if n.verbose {
			fmt.Fprintf(n.log, "  %s healed: %s\n", stamp(), what)
		}
	}
	n.release(claim, b)
}

// admit resolves f's broker (process faults) and claims its fault points
// under the limits; the claim is released when f heals.
//
// A fault point busy or too many brokers down: it waits a little for the
// other faults to heal (a kind refused every time would fail the run for
// nothing), and resolves its target again on every try: the leader a
// "leader:" fault aims at may have moved off the busy broker (seed 2
// beside the CPU hog: a pause aimed at the leader of chaos-2/2 waited 10
// s on broker 1, killed by another fault, and was counted not applied,
// while another broker led the partition by then).
func (n *nemesis) admit(ctx context.Context, f Fault, spec kindSpec) (*broker, []string, error) {
	limit := n.maxDown
	if f.Beyond {
		limit = len(n.c.brokers)
	}
	deadline := time.Now().Add(admitPatience)
	for {
		b, claim, err := n.claimOf(ctx, f, spec)
		if err != nil {
			return nil, nil, err
		}
		n.mu.Lock()
		err = admitLocked(n.held, len(n.down), limit, spec.process, claim)
		if err == nil {
			for _, r := range claim {
				n.held[r] = true
			}
			if b != nil {
				n.down[b.id] = true
				n.res.MaxBrokersDown = max(n.res.MaxBrokersDown, len(n.down))
			}
			if n.active > 0 {
				n.res.OverlappingFaults++
			}
			n.active++
			n.mu.Unlock()
			return b, claim, nil
		}
		n.mu.Unlock()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, err
		}
		wait(ctx, 200*time.Millisecond) // a retry, not synchronisation
	}
}

// claimOf resolves f's broker (process faults) and lists the fault
// points f would hold.
func (n *nemesis) claimOf(ctx context.Context, f Fault, spec kindSpec) (*broker, []string, error) {
	var b *broker
	var claim []string
	if spec.process {
		var err error
		if b, err = n.resolveBroker(ctx, f.Target); err != nil {
			return nil, nil, err
		}
		claim = append(claim, fmt.Sprintf("proc:%d", b.id))
	}
	if spec.resources != nil {
		r, err := spec.resources(n, f)
		if err != nil {
			return nil, nil, err
		}
		claim = append(claim, r...)
	}
	return b, claim, nil
}

// admitPatience is how long a fault waits for its fault points and the
// brokers-down limit before it is counted as not applied.
const admitPatience = 10 * time.Second

// admitLocked is admit's rule: none of claim held by another fault, and a
// process fault only while fewer than limit brokers are down.
func admitLocked(held map[string]bool, down, limit int, process bool, claim []string) error {
	for _, r := range claim {
		if held[r] {
			return fmt.Errorf("%s is under another fault", r)
		}
	}
	if process && down >= limit {
		return fmt.Errorf("%d brokers down already (limit %d)", down, limit)
	}
	return nil
}

func (n *nemesis) release(claim []string, b *broker) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range claim {
		delete(n.held, r)
	}
	if b != nil {
		delete(n.down, b.id)
	}
	n.active--
}

func (n *nemesis) problem(p string) {
	n.mu.Lock()
	n.res.Problems = append(n.res.Problems, p)
	n.mu.Unlock()
}

// note adds a line to the applied faults' log.
func (n *nemesis) note(line string) {
	n.mu.Lock()
	n.res.Applied = append(n.res.Applied, "  "+line)
	n.mu.Unlock()
}

// healAll ends every fault: proxies pass, paused brokers continue, disks
// work again, stopped brokers start. It runs after run returned (no fault
// is active).
func (n *nemesis) healAll(ctx context.Context) {
	n.hist.write(Event{Op: OpHeal, Kind: "all", What: "every fault healed at the end of the run"})
	n.healDiskFaults()
	for _, m := range []map[int32]*tcpProxy{n.c.etcdPx, n.c.clientPx, n.c.replPx} {
		for _, p := range m {
			p.SetMode(ModePass)
		}
	}
	for _, p := range n.c.s3Px {
		p.Set(bucketFault{})
	}
	for _, b := range n.c.brokers {
		b.mu.Lock()
		paused := b.paused
		b.mu.Unlock()
		if paused {
			_ = b.resume()
		}
		if !b.running() {
			if err := n.c.startBroker(ctx, b); err != nil {
				n.problem(fmt.Sprintf("restart broker %d while healing: %v", b.id, err))
			}
		}
	}
}

// resolveBroker resolves "broker:<id>" or "leader:<topic>/<partition>"
// (the partition's leader now; if it has none, its first replica still
// up).
func (n *nemesis) resolveBroker(ctx context.Context, target string) (*broker, error) {
	var id int32
	if strings.HasPrefix(target, "leader:") {
		tp, err := targetPartition(strings.Replace(target, "leader:", "partition:", 1))
		if err != nil {
			return nil, err
		}
		// Retried as an operator's tool would: the overlapping faults
		// (a kill, a client partition) may cut the admin connection.
		var td kadm.TopicDetails
		tries, err := retryAdmin(ctx, func(rctx context.Context) error {
			var err error
			td, err = n.c.adm.ListTopics(rctx, tp.Topic)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("resolve %s (%d attempts): %w", target, tries, err)
		}
		pd := td[tp.Topic].Partitions[tp.Partition]
		id = pd.Leader
		if id < 0 {
			n.mu.Lock()
			for _, r := range pd.Replicas {
				if !n.down[r] {
					id = r
					break
				}
			}
			n.mu.Unlock()
		}
		if id < 0 {
			return nil, fmt.Errorf("resolve %s: no leader and no replica up", target)
		}
	} else {
		var err error
		if id, err = targetBroker(target); err != nil {
			return nil, err
		}
	}
	b := n.c.brokerByID(id)
	if b == nil {
		return nil, fmt.Errorf("%s: no broker %d", target, id)
	}
	return b, nil
}

func targetBroker(target string) (int32, error) {
	s, ok := strings.CutPrefix(target, "broker:")
	id, err := strconv.ParseInt(s, 10, 32)
	if !ok || err != nil {
		return 0, fmt.Errorf("target %q: want broker:<id>", target)
	}
	return int32(id), nil
}

func targetPartition(target string) (TP, error) {
	s, ok := strings.CutPrefix(target, "partition:")
	i := strings.LastIndexByte(s, '/')
	if !ok || i < 0 {
		return TP{}, fmt.Errorf("target %q: want partition:<topic>/<partition>", target)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil {
		return TP{}, fmt.Errorf("target %q: %w", target, err)
	}
	return TP{s[:i], int32(p)}, nil
}

// tamperWait is how long one round of a corruption or deletion waits for
// a follower to download from the zone's bucket before it aims again at
// the zone that leads the most partitions now (kinds.go): short, because
// a round aimed at a zone whose leaders just moved away catches nothing.
const tamperWait = 4 * time.Second

// objectFaultWindow is the part of the schedule an object fault needs
// before the cooldown: a few rounds of tamperWait. A fault drawn later
// ends the schedule (a loaded CI machine once gave one 3.3 s, aimed at a
// zone whose only broker was down, and the run failed "never applied").
const objectFaultWindow = 12 * time.Second

// tamperMinWait is the shortest last round of an object fault that aims
// again (kinds.go).
const tamperMinWait = 2 * time.Second

// tamper corrupts or deletes a WAL object of zone's bucket that a follower
// has not read yet: it arms the bucket's proxy, whose next WAL GET (a
// follower downloading an object from this zone's leader) first damages
// that object on the S3 server itself (not through the proxy), then goes
// on. Corruption flips one byte in the middle of the range the GET asks
// for (the whole object without a Range), so the follower reads it. The
// proxy counts the damaged objects' GETs and their answers
// (Result.ObjectFaults).
func (n *nemesis) tamper(ctx context.Context, zone string, del bool, wait time.Duration) (string, error) {
	px := n.c.s3Px[zone]
	if px == nil {
		return "", fmt.Errorf("no bucket proxy for zone %q", zone)
	}
	s3 := n.c.o.S3
	st, err := objstore.NewS3(ctx, objstore.Config{Bucket: BucketPrefix + zone, Region: s3.Region, Endpoint: s3.Endpoint, ForcePathStyle: true,
		MaxAttempts: 1, Credentials: &objstore.StaticCredentials{AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey}})
	if err != nil {
		return "", err
	}
	defer st.Close()
	fired := px.armTamper(func(key, rangeHeader string) error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if del {
			return st.Delete(rctx, key)
		}
		info, err := st.Head(rctx, key)
		if err != nil {
			return err
		}
		data, err := st.Get(rctx, key, 0, info.Size)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return errors.New("empty object")
		}
		lo, hi := rangeOf(rangeHeader, int64(len(data)))
		data[(lo+hi)/2] ^= 0xff
		return st.Put(rctx, key, data)
	})
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case r := <-fired:
		verb := "corrupted"
		if del {
			verb = "deleted"
		}
		if r.err != nil {
			return "", fmt.Errorf("%s %s/%s: %w", verb, st.Bucket(), r.key, r.err)
		}
		return fmt.Sprintf("%s %s/%s as a follower downloaded it", verb, st.Bucket(), r.key), nil
	case <-t.C:
	case <-ctx.Done():
	}
	px.disarm()
	select {
	case r := <-fired: // caught just now
		if r.err != nil {
			return "", r.err
		}
		return "damaged " + st.Bucket() + "/" + r.key + " as a follower downloaded it", nil
	default:
	}
	return "", fmt.Errorf("%w from bucket %s within %v", errNoDownload, st.Bucket(), wait)
}

// errNoDownload: an armed object fault saw no follower download.
var errNoDownload = errors.New("no follower downloaded")

// rangeOf parses "bytes=a-b" (the downloader's ranged GETs) into [a, b]
// within size; anything else is the whole object.
func rangeOf(h string, size int64) (lo, hi int64) {
	lo, hi = 0, size-1
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return lo, hi
	}
	a, b, ok := strings.Cut(spec, "-")
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || x < 0 || x > y || x >= size {
		return lo, hi
	}
	return x, min(y, size-1)
}
