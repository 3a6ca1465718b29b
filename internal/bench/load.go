package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/protocol"
)

// LoadOptions describe the load one mode is driven with.
type LoadOptions struct {
	// Topic is created fresh (an existing topic of that name is an error);
	// "" picks strata-bench-<mode>-<random>.
	Topic string
	// Partitions of the topic (default 12).
	Partitions int32
	// ExpectBrokers, when > 0, is how many brokers the cluster has (an
	// embedded one): the topic is created once metadata lists them all,
	// not with the replication factor of a broker that has not seen the
	// others register yet.
	ExpectBrokers int
	// ReplicationFactor of the topic; 0 picks min(3, live brokers).
	ReplicationFactor int16
	// TopicConfigs are passed to CreateTopics (e.g. min.insync.replicas).
	TopicConfigs map[string]string
	// Acks is "0", "1" or "all".
	Acks string
	// RecordSize is the value size in bytes (at least RecordHeaderSize).
	RecordSize int
	// Rate is the target in records/s over all producers; 0 produces as
	// fast as possible with at most MaxInFlight records buffered per
	// producer.
	Rate int
	// Producers and Consumers are the numbers of clients.
	Producers, Consumers int
	// MaxInFlight bounds the records a producer has buffered or in flight.
	MaxInFlight int
	// Linger is the producer linger (0: send at once).
	Linger time.Duration
	// PrimePartitions has every producer send one unmeasured record to
	// every partition, and have it answered, before the load starts: the
	// state of a producer that has run for minutes (primePartitions).
	PrimePartitions bool
	// Compression is none, gzip, snappy, lz4 or zstd.
	Compression string
	// Warmup runs the load before the measured window of Duration.
	Warmup, Duration time.Duration
	// DrainTimeout bounds how long consumers may take, after the window,
	// to read every record produced in it.
	DrainTimeout time.Duration
	// KeepTopic leaves the topic in place after the run.
	KeepTopic bool
	// ClientRacks are the clients' zones, given round-robin: consumer j
	// sends ClientRacks[j mod n] as client.rack (follower fetching), and
	// producer i names ClientRacks[i mod n] in its client ID
	// ("strata-bench,strata_az=<zone>", protocol.ClientIDZonePrefix) so the
	// brokers' traffic counters attribute its produce bytes to that zone
	// (Kafka producers have no client.rack).
	ClientRacks []string
	// ZoneLatency, when > 0, delays every client connection to a broker of
	// another zone by this one-way latency on each direction
	// (internal/netem), as the embedded cluster delays its inter-zone
	// replica connections. Clients get zones round-robin over the
	// brokers' racks (sorted): producer i zone i mod n, consumer j its
	// ClientRacks entry, else zone j mod n.
	ZoneLatency time.Duration
	// Security makes every client connect with TLS and SASL (nil:
	// PLAINTEXT); set from the cluster.
	Security *ClientSecurity
}

// DefaultLoadOptions returns the defaults of `strata bench`.
func DefaultLoadOptions() LoadOptions {
	return LoadOptions{
		Partitions:      12,
		Acks:            "all",
		RecordSize:      1024,
		Producers:       2,
		Consumers:       2,
		MaxInFlight:     1000,
		PrimePartitions: true,
		Compression:     "none",
		Warmup:          5 * time.Second,
		Duration:        10 * time.Second,
		DrainTimeout:    30 * time.Second,
	}
}

// RecordHeaderSize is the part of each record value the bench uses: an
// 8-byte wall-clock send time (Unix ns) and a 1-byte measured flag.
const RecordHeaderSize = 9

// Validate checks the options and says what is wrong.
func (o LoadOptions) Validate() error {
	var errs []error
	if o.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions %d: want at least 1", o.Partitions))
	}
	if o.ReplicationFactor < 0 {
		errs = append(errs, fmt.Errorf("replication factor %d: want 0 (automatic) or more", o.ReplicationFactor))
	}
	if _, err := parseAcks(o.Acks); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseCompression(o.Compression); err != nil {
		errs = append(errs, err)
	}
	if o.RecordSize < RecordHeaderSize {
		errs = append(errs, fmt.Errorf("record size %d: want at least %d bytes (send time and flag)", o.RecordSize, RecordHeaderSize))
	}
	if o.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate %d: want 0 (as fast as possible) or more records/s", o.Rate))
	}
	if o.Producers < 1 {
		errs = append(errs, fmt.Errorf("producers %d: want at least 1", o.Producers))
	}
	if o.Consumers < 0 {
		errs = append(errs, fmt.Errorf("consumers %d: want 0 or more", o.Consumers))
	}
	if o.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("max in flight %d: want at least 1", o.MaxInFlight))
	}
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %v: want more than 0", o.Duration))
	}
	if o.Warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup %v: want 0 or more", o.Warmup))
	}
	if o.ZoneLatency < 0 {
		errs = append(errs, fmt.Errorf("zone latency %v: want 0 or more", o.ZoneLatency))
	}
	return errors.Join(errs...)
}

func parseAcks(s string) (kgo.Acks, error) {
	switch strings.ToLower(s) {
	case "0":
		return kgo.NoAck(), nil
	case "1":
		return kgo.LeaderAck(), nil
	case "all", "-1":
		return kgo.AllISRAcks(), nil
	}
	return kgo.Acks{}, fmt.Errorf("acks %q: want 0, 1 or all", s)
}

func parseCompression(s string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(s) {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, gzip, snappy, lz4 or zstd", s)
}

// Hooks are called by RunLoad at the edges of the measured window, from
// the goroutine that called RunLoad; the load keeps running meanwhile.
type Hooks struct {
	// WindowStart is called when the warmup ends.
	WindowStart func(ctx context.Context)
	// WindowEnd is called when the window ended, every record produced in
	// it was acknowledged (or failed) and the consumers read them (or the
	// drain timed out): the followers have replicated the window's records
	// by then, so their traffic is in the counters.
	WindowEnd func(ctx context.Context)
}

// LoadResult is what one load run measured.
type LoadResult struct {
	Topic             string
	Partitions        int32
	ReplicationFactor int16
	Brokers           int
	// Window is the measured window's configured length.
	Window time.Duration
	// Produced counts the records scheduled in the window and
	// acknowledged; ProducedBytes their value bytes.
	Produced, ProducedBytes int64
	// ProduceErrors counts failed records of the window; FirstError is one
	// of the errors.
	ProduceErrors int64
	FirstError    string
	// Late counts window records sent more than 10 ms after their
	// scheduled time (only with a target rate: the load could not keep up).
	Late int64
	// Consumed counts window records read by the consumers (duplicates
	// included); ConsumedAll every record read.
	Consumed, ConsumedAll int64
	// Consumers is the number of consumer clients run (at most one per
	// partition).
	Consumers int
	// FlushedAt is when the last window record was acknowledged: the
	// producers' active time ends here.
	FlushedAt time.Time
	// DrainComplete is false when the consumers did not read every window
	// record within DrainTimeout.
	DrainComplete  bool
	ProduceLatency *Histogram
	EndToEnd       *Histogram
	// ProduceRequest is each Produce request's time from written to its
	// response read (the broker and the wire), ProduceWriteWait its wait
	// in the producer before it was written (a full in-flight window):
	// what of ProduceLatency is the broker's and what the client's.
	ProduceRequest, ProduceWriteWait *Histogram
	// RequestsInFlightMax is the most Produce requests one producer had
	// written to one broker and not yet had answered (acks 1 and all).
	// franz-go's idempotent producer allows 5 (Kafka's bound since
	// produce v4, as the Java producer's max.in.flight.requests.per.connection),
	// its non-idempotent one (acks 0 and 1 here) 1. On a WAL path a
	// record that finds every slot waiting for an object waits for the
	// object after it too.
	RequestsInFlightMax int64
	// ProduceStages splits the window records' latency at their request's
	// write and answer (nil unless acks=all on plaintext connections).
	ProduceStages *ProduceStages
	// ClientZones is set when ZoneLatency > 0.
	ClientZones *ClientZones
}

// RunLoad creates the topic on the cluster at bootstrap, runs the load
// and returns what it measured. It deletes the topic afterwards unless
// opts.KeepTopic.
func RunLoad(ctx context.Context, bootstrap []string, opts LoadOptions, hooks Hooks) (*LoadResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if len(bootstrap) == 0 {
		return nil, errors.New("no bootstrap address")
	}
	acks, _ := parseAcks(opts.Acks)
	codec, _ := parseCompression(opts.Compression)
	if opts.Topic == "" {
		opts.Topic = "strata-bench-" + randomSuffix()
	}

	secOpts, err := opts.Security.kgoOpts()
	if err != nil {
		return nil, err
	}
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...)}, secOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	res := &LoadResult{Topic: opts.Topic, Partitions: opts.Partitions, Window: opts.Duration,
		ProduceLatency: NewHistogram(), EndToEnd: NewHistogram(), ProduceRequest: NewHistogram(), ProduceWriteWait: NewHistogram()}
	reqHook := &produceRequestHook{roundTrip: res.ProduceRequest, writeWait: res.ProduceWriteWait}
	var inFlightMax atomic.Int64
	if err := createTopic(ctx, adm, opts, res); err != nil {
		return nil, err
	}
	var zones *ClientZones
	if opts.ZoneLatency > 0 {
		if zones, err = newClientZones(ctx, adm, opts); err != nil {
			return nil, err
		}
		res.ClientZones = zones
	}
	if !opts.KeepTopic {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			_, _ = adm.DeleteTopics(dctx, opts.Topic)
		}()
	}

	// Consumers first, so that they are polling when the first record lands.
	consCtx, stopConsumers := context.WithCancel(ctx)
	var consumed, consumedAll atomic.Int64
	var consWG sync.WaitGroup
	defer func() {
		stopConsumers()
		consWG.Wait()
	}()
	consumers := opts.Consumers
	if consumers > int(opts.Partitions) {
		consumers = int(opts.Partitions)
	}
	res.Consumers = consumers
	for j := 0; j < consumers; j++ {
		parts := map[int32]kgo.Offset{}
		for p := int32(j); p < opts.Partitions; p += int32(consumers) {
			parts[p] = kgo.NewOffset().AtStart()
		}
		copts := []kgo.Opt{
			kgo.SeedBrokers(bootstrap...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{opts.Topic: parts}),
			kgo.FetchMaxWait(500 * time.Millisecond),
		}
		if len(opts.ClientRacks) > 0 {
			copts = append(copts, kgo.Rack(opts.ClientRacks[j%len(opts.ClientRacks)]))
		}
		if zones != nil {
			copts = append(copts, zones.dialer(zones.Consumers[j]))
		}
		cl, err := kgo.NewClient(append(copts, secOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("consumer client: %w", err)
		}
		consWG.Add(1)
		go func() {
			defer consWG.Done()
			defer cl.Close()
			consume(consCtx, cl, res.EndToEnd, &consumed, &consumedAll)
		}()
	}

	// Producers.
	producers := make([]*kgo.Client, opts.Producers)
	// The stages are traced from the producers' connections: plaintext,
	// and idempotent batches (acks=all) carry the sequence numbers that
	// tie a record to its request.
	tracers := make([]*produceTracer, opts.Producers)
	if acks == kgo.AllISRAcks() && opts.Security == nil {
		res.ProduceStages = newProduceStages()
		for i := range tracers {
			tracers[i] = newProduceTracer()
		}
	}
	for i := range producers {
		popts := []kgo.Opt{
			kgo.SeedBrokers(bootstrap...),
			kgo.DefaultProduceTopic(opts.Topic),
			kgo.RequiredAcks(acks),
			kgo.MaxBufferedRecords(opts.MaxInFlight),
			kgo.ProducerLinger(opts.Linger),
			kgo.ProducerBatchCompression(codec),
			kgo.WithHooks(reqHook),
		}
		if acks != kgo.NoAck() {
			popts = append(popts, kgo.WithHooks(&inFlightHook{max: &inFlightMax}))
		}
		if opts.PrimePartitions {
			// franz-go's default partitioner, with the priming records sent where they say.
			popts = append(popts, kgo.RecordPartitioner(primingPartitioner{kgo.UniformBytesPartitioner(64<<10, true, true, nil)}))
		}
		if acks != kgo.AllISRAcks() { // idempotence needs acks=all
			popts = append(popts, kgo.DisableIdempotentWrite())
		}
		if len(opts.ClientRacks) > 0 {
			popts = append(popts, kgo.ClientID("strata-bench,"+protocol.ClientIDZonePrefix+opts.ClientRacks[i%len(opts.ClientRacks)]))
		}
		switch {
		case tracers[i] != nil && zones != nil:
			popts = append(popts, tracers[i].dialer(zones.dial(zones.Producers[i])))
		case tracers[i] != nil:
			popts = append(popts, tracers[i].dialer(nil))
		case zones != nil:
			popts = append(popts, zones.dialer(zones.Producers[i]))
		}
		cl, err := kgo.NewClient(append(popts, secOpts...)...)
		if err != nil {
			for _, c := range producers[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("producer client: %w", err)
		}
		producers[i] = cl
	}
	defer func() {
		for _, c := range producers {
			c.Close()
		}
	}()

	if opts.PrimePartitions {
		if err := primePartitions(ctx, producers, tracers, opts.Partitions); err != nil {
			return nil, err
		}
	}

	var st produceStats
	start := time.Now()
	windowStart := start.Add(opts.Warmup)
	windowEnd := windowStart.Add(opts.Duration)
	reqHook.to.Store(windowEnd.UnixNano())
	reqHook.from.Store(windowStart.UnixNano())
	prodCtx, stopProducers := context.WithCancel(ctx)
	var prodWG sync.WaitGroup
	// On an early return (ctx ended) the loops stop before their clients
	// close; a loop blocked in Produce is released by ctx.
	defer func() {
		stopProducers()
		prodWG.Wait()
	}()
	for i, cl := range producers {
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			rate := 0.0
			if opts.Rate > 0 {
				rate = float64(opts.Rate) / float64(len(producers))
			}
			offset := time.Duration(0)
			if rate > 0 {
				// Spread producers over one interval so they do not send in lockstep.
				offset = time.Duration(float64(time.Second) / rate * float64(i) / float64(len(producers)))
			}
			produceLoop(ctx, prodCtx.Done(), cl, rate, start.Add(offset), windowStart, windowEnd, opts.RecordSize, res.ProduceLatency, &st,
				tracers[i], res.ProduceStages)
		}()
	}

	if err := sleepUntil(ctx, windowStart); err != nil {
		return nil, err
	}
	if hooks.WindowStart != nil {
		hooks.WindowStart(ctx)
	}
	if err := sleepUntil(ctx, windowEnd); err != nil {
		return nil, err
	}
	stopProducers()
	prodWG.Wait()
	for _, cl := range producers {
		if err := cl.Flush(ctx); err != nil {
			return nil, fmt.Errorf("flush producer: %w", err)
		}
	}
	res.FlushedAt = time.Now()
	res.RequestsInFlightMax = inFlightMax.Load()
	res.Produced, res.ProducedBytes = st.acked.Load(), st.ackedBytes.Load()
	res.ProduceErrors, res.Late = st.failed.Load(), st.late.Load()
	if res.ProduceStages != nil {
		res.ProduceStages.ColdRecords = st.cold.Load()
		for _, t := range tracers {
			res.ProduceStages.Unmatched += t.unmatched.Load()
		}
	}
	if e := st.firstErr.Load(); e != nil {
		res.FirstError = e.(string)
	}

	// Drain: wait until the consumers read every acknowledged window record.
	res.DrainComplete = consumers == 0
	if consumers > 0 {
		deadline := time.Now().Add(opts.DrainTimeout)
		for consumed.Load() < res.Produced && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		res.DrainComplete = consumed.Load() >= res.Produced
	}
	if hooks.WindowEnd != nil {
		hooks.WindowEnd(ctx)
	}
	stopConsumers()
	consWG.Wait()
	res.Consumed, res.ConsumedAll = consumed.Load(), consumedAll.Load()
	if res.Produced == 0 {
		msg := "no record of the measured window was acknowledged"
		if res.FirstError != "" {
			msg += ": " + res.FirstError
		}
		return res, errors.New(msg)
	}
	return res, ctx.Err()
}

type produceStats struct {
	acked, ackedBytes, failed, late, cold atomic.Int64
	firstErr                              atomic.Value // string
}

// produceLoop produces until ctx ends. With rate > 0 record n is
// scheduled at start + n/rate and its latency counts from that time (so
// a stall shows in the latency instead of being hidden by fewer sends:
// no coordinated omission); with rate 0 records are produced as fast as
// the client's buffer of MaxInFlight records allows and latency counts
// from the Produce call.
//
// stop ends the loop; ctx (the run's context) is what records are produced
// with, so that records buffered when the window ends are still sent.
// With a tracer (of cl's connections) the window records' stages go to
// stages.
func produceLoop(ctx context.Context, stop <-chan struct{}, cl *kgo.Client, rate float64, start, windowStart, windowEnd time.Time,
	size int, lat *Histogram, st *produceStats, tracer *produceTracer, stages *ProduceStages) {
	// Every value is fresh random bytes (ChaCha8, ~GB/s): a compressed
	// load must not shrink repeated content and flatter the figures.
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	rng := mrand.NewChaCha8(seed)
	var interval time.Duration
	if rate > 0 {
		interval = time.Duration(float64(time.Second) / rate)
	}
	for n := int64(0); ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		sched := time.Now()
		if rate > 0 {
			sched = start.Add(time.Duration(n) * interval)
			if wait := time.Until(sched); wait > time.Millisecond {
				select {
				case <-stop:
					return
				case <-time.After(wait):
				}
			}
		}
		if !sched.Before(windowEnd) {
			return
		}
		measured := !sched.Before(windowStart)
		// Latency counts from the earlier of the scheduled and the actual
		// send time: a late record includes its delay, a record sent up to
		// 1 ms early (no sleep that short) counts from when it was sent.
		from := time.Now()
		sent := from
		if sched.Before(from) {
			if measured && from.Sub(sched) > 10*time.Millisecond {
				st.late.Add(1)
			}
			from = sched
		}
		v := make([]byte, size)
		_, _ = rng.Read(v[RecordHeaderSize:])
		binary.BigEndian.PutUint64(v, uint64(from.UnixNano()))
		if measured {
			v[8] = 1
		} else {
			v[8] = 0
		}
		cl.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
			now := time.Now()
			// Every record advances the trace (its sequence), measured or not.
			var rs recordStages
			traced := false
			if tracer != nil && err == nil {
				rs, traced = tracer.promised(r.Partition, from)
			}
			if !measured {
				return
			}
			if err != nil {
				st.failed.Add(1)
				st.firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			lat.Record(now.Sub(from))
			if traced {
				stages.record(rs, from, sent, now)
				if rs.cold {
					st.cold.Add(1)
				}
			}
			st.acked.Add(1)
			st.ackedBytes.Add(int64(len(r.Value)))
		})
	}
}

func consume(ctx context.Context, cl *kgo.Client, e2e *Histogram, consumed, consumedAll *atomic.Int64) {
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			consumedAll.Add(1)
			if len(r.Value) < RecordHeaderSize || r.Value[8] != 1 {
				return
			}
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
			e2e.Record(now.Sub(sent))
			consumed.Add(1)
		})
	}
}

// expectBrokersWait bounds createTopic's wait for ExpectBrokers.
const expectBrokersWait = 30 * time.Second

func createTopic(ctx context.Context, adm *kadm.Client, opts LoadOptions, res *LoadResult) error {
	brokers, err := adm.ListBrokers(ctx)
	for deadline := time.Now().Add(expectBrokersWait); err == nil && len(brokers) < opts.ExpectBrokers; {
		if time.Now().After(deadline) {
			return fmt.Errorf("metadata lists %d of the cluster's %d brokers after %v", len(brokers), opts.ExpectBrokers, expectBrokersWait)
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return err
		}
		brokers, err = adm.ListBrokers(ctx)
	}
	if err != nil {
		return fmt.Errorf("list brokers: %w", err)
	}
	res.Brokers = len(brokers)
	rf := opts.ReplicationFactor
	if rf == 0 {
		rf = int16(min(3, len(brokers)))
	}
	res.ReplicationFactor = rf
	var configs map[string]*string
	if len(opts.TopicConfigs) > 0 {
		configs = map[string]*string{}
		for k, v := range opts.TopicConfigs {
			configs[k] = kadm.StringPtr(v)
		}
	}
	// kadm returns the topic's error as err too, with the response that
	// holds the broker's reason (e.g. the file descriptors the replicas
	// need): keep it.
	cr, err := adm.CreateTopic(ctx, opts.Partitions, rf, configs, opts.Topic)
	if err != nil {
		if cr.ErrMessage != "" {
			return fmt.Errorf("create topic %s (%d partitions, RF %d): %s (%w)", opts.Topic, opts.Partitions, rf, strings.TrimPrefix(cr.ErrMessage, err.Error()+": "), err)
		}
		return fmt.Errorf("create topic %s: %w", opts.Topic, err)
	}
	// Wait until every partition has a leader.
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(ctx, opts.Topic)
		if err == nil {
			td, ok := md.Topics[opts.Topic]
			if ok && td.Err == nil && len(td.Partitions) == int(opts.Partitions) {
				ready := true
				for _, p := range td.Partitions {
					if p.Err != nil || p.Leader < 0 {
						ready = false
					}
				}
				if ready {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: partitions without a leader after 30s (last error: %v)", opts.Topic, err)
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return err
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}

// inFlightHook counts one producer's Produce requests written to a broker
// and not yet answered, and keeps the most seen in max.
type inFlightHook struct {
	mu     sync.Mutex
	counts map[int32]int64
	max    *atomic.Int64
}

func (h *inFlightHook) OnBrokerWrite(m kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != kmsg.Produce.Int16() || err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = map[int32]int64{}
	}
	h.counts[m.NodeID]++
	for n := h.counts[m.NodeID]; ; {
		old := h.max.Load()
		if n <= old || h.max.CompareAndSwap(old, n) {
			break
		}
	}
}

func (h *inFlightHook) OnBrokerE2E(m kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != kmsg.Produce.Int16() || e.WriteErr != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts[m.NodeID] > 0 {
		h.counts[m.NodeID]--
	}
}

// produceRequestHook times the producers' Produce requests answered in
// the window (franz-go's HookBrokerE2E; acks=0 requests have no answer
// and are not timed).
type produceRequestHook struct {
	from, to             atomic.Int64 // the window, Unix ns; 0: not known yet
	roundTrip, writeWait *Histogram
}

func (h *produceRequestHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != kmsg.Produce.Int16() || e.WriteErr != nil || e.ReadErr != nil || e.BytesRead == 0 {
		return
	}
	now := time.Now().UnixNano()
	if from := h.from.Load(); from == 0 || now < from || now > h.to.Load() {
		return
	}
	h.roundTrip.Record(e.ReadWait + e.TimeToRead)
	h.writeWait.Record(e.WriteWait)
}
