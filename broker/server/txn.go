package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/group"
	"github.com/strata-dev/strata/broker/meta/txnstate"
	"github.com/strata-dev/strata/broker/protocol"
	"github.com/strata-dev/strata/broker/txn"
)

// Transactions: the coordinator (broker/txn) with its store (etcd in a
// cluster, <data dir>/__transactions standalone), the markers it writes
// (local calls for partitions and groups this broker leads or
// coordinates, WriteTxnMarkers over the inter-broker listener for the
// others) and the KIP-890 verification of transactional produces.

// ownership follows the set of live brokers: its epoch changes whenever
// the set does, which is when groups and transactional IDs may move
// between coordinators (group.CoordinatorFor).
type ownership struct {
	b     *broker.Broker
	mu    sync.Mutex
	live  []int32
	epoch uint64
}

// Epoch returns the current ownership epoch (1 at start).
func (o *ownership) Epoch() uint64 {
	ids := liveIDs(o.b)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.epoch == 0 || !slices.Equal(ids, o.live) {
		o.live, o.epoch = ids, o.epoch+1
	}
	return o.epoch
}

func liveIDs(b *broker.Broker) []int32 {
	brokers := b.Brokers()
	ids := make([]int32, 0, len(brokers))
	for _, bi := range brokers {
		ids = append(ids, bi.ID)
	}
	return ids // sorted by ID
}

// startTxnCoordinator builds the transaction coordinator and sets
// env.Txns; Shutdown closes it.
func (s *Server) startTxnCoordinator(ctx context.Context, env *protocol.Env) error {
	cfg := s.cfg.Txn
	b := s.broker
	if s.cluster != nil {
		cfg.Store = txnstate.New(s.cluster.store)
		cfg.Owns = groupOwner(b)
		cfg.OwnershipEpoch = s.ownership.Epoch
	} else {
		fs, err := txn.OpenFileStore(filepath.Join(s.cfg.Broker.DataDir, "__transactions"))
		if err != nil {
			return fmt.Errorf("open transaction state: %w", err)
		}
		cfg.Store = fs
	}
	s.txnStore = cfg.Store
	cfg.ProducerIDs = env.ProducerIDAllocator().AllocateProducerID
	s.ib = &interBrokerClients{s: s}
	markers := &markerWriter{b: b, env: env, log: s.log.WithName("txn-markers"), remote: s.ib.request}
	cfg.Markers = markers
	if s.cfg.WrapTxnMarkers != nil {
		cfg.Markers = s.cfg.WrapTxnMarkers(markers)
	}
	m := newTxnMetrics()
	cfg.Metrics = m
	c, err := txn.New(logr.NewContext(ctx, s.log), cfg)
	if err != nil {
		return err
	}
	if err := s.metrics.Registry.Register(m); err != nil {
		c.Close()
		return fmt.Errorf("register transaction metrics: %w", err)
	}
	env.Txns = c
	s.txns = c
	s.txnVerifier = &txnVerifier{txns: c, owns: cfg.Owns, remote: s.ib.request,
		coordinatorOf: func(id string) int32 { return group.CoordinatorFor(id, liveIDs(b)) }}
	env.TxnVerifier = s.txnVerifier
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		rctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stop:
			case <-rctx.Done():
			}
			cancel()
		}()
		c.Run(rctx) // returns at Close too
	}()
	return nil
}

// stopTxnCoordinator stops the coordinator (markers in flight are
// written again by the next coordinator) and the inter-broker client.
func (s *Server) stopTxnCoordinator() {
	if s.txns != nil {
		s.txns.Close()
	}
	if s.ib != nil {
		s.ib.close()
	}
}

// interBrokerClients send this broker's inter-broker requests
// (WriteTxnMarkers, KIP-890 verification) on the inter-broker listener with
// the replica fetcher's security (secureDial: the broker's certificate, its
// SASL credentials). The target's address comes from this broker's own
// cluster view, one kgo client per address: a kgo client left to find
// brokers itself keeps a restarted broker's old address until its next
// metadata refresh (minutes).
type interBrokerClients struct {
	s  *Server
	mu sync.Mutex
	// clients by address; closed guards against use after close.
	clients map[string]*kgo.Client
	closed  bool
}

// request sends req to broker id and returns its response.
func (ibc *interBrokerClients) request(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	ib, kp := ibc.s.interBroker()
	addr := ""
	for _, bi := range ibc.s.broker.BrokersOn(ib.Name) {
		if bi.ID == id {
			addr = net.JoinHostPort(bi.Host, strconv.Itoa(int(bi.Port)))
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("broker %d is not live", id)
	}
	ibc.mu.Lock()
	if ibc.closed {
		ibc.mu.Unlock()
		return nil, errors.New("inter-broker client closed")
	}
	cl := ibc.clients[addr]
	if cl == nil {
		var err error
		cl, err = kgo.NewClient(
			kgo.SeedBrokers(addr),
			kgo.Dialer(secureDial(nil, ib, kp, ibc.s.cfg.Security.InterBroker)),
			kgo.ClientID(fmt.Sprintf("strata-broker-%d", ibc.s.cfg.Broker.NodeID)),
			kgo.RequestRetries(0),
		)
		if err != nil {
			ibc.mu.Unlock()
			return nil, err
		}
		if ibc.clients == nil {
			ibc.clients = map[string]*kgo.Client{}
		}
		ibc.clients[addr] = cl
		// Forget the clients of addresses no live broker has.
		live := map[string]bool{}
		for _, bi := range ibc.s.broker.BrokersOn(ib.Name) {
			live[net.JoinHostPort(bi.Host, strconv.Itoa(int(bi.Port)))] = true
		}
		for a, old := range ibc.clients {
			if !live[a] {
				old.Close()
				delete(ibc.clients, a)
			}
		}
	}
	ibc.mu.Unlock()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

func (ibc *interBrokerClients) close() {
	ibc.mu.Lock()
	defer ibc.mu.Unlock()
	ibc.closed = true
	for _, cl := range ibc.clients {
		cl.Close()
	}
	ibc.clients = nil
}

// markerWriter implements txn.MarkerWriter.
type markerWriter struct {
	b      *broker.Broker
	env    *protocol.Env
	log    logr.Logger
	remote func(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error)
}

// markerTimeout bounds one request to one broker.
const markerTimeout = 10 * time.Second

// WriteMarkers sends one WriteTxnMarkers per broker concerned: the
// partitions it leads, and group.OffsetsTopic when it coordinates groups
// of the transaction, with the record's coordinator epoch. Partitions of
// deleted topics are done (nothing to mark); partitions without a leader,
// failed requests and error codes are returned to be retried, and a
// partition answering TRANSACTION_COORDINATOR_FENCED (a newer coordinator
// wrote there) adds txn.ErrCoordinatorFenced.
func (w *markerWriter) WriteMarkers(ctx context.Context, m txn.Marker) (txn.Marker, error) {
	rest := txn.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Commit}
	type target struct {
		parts  []txn.TopicPartition
		groups []string
	}
	targets := map[int32]*target{}
	get := func(id int32) *target {
		t := targets[id]
		if t == nil {
			t = &target{}
			targets[id] = t
		}
		return t
	}
	for _, tp := range m.Partitions {
		if _, ok := w.b.Topic(tp.Topic); !ok {
			continue // deleted: nothing left to mark
		}
		v, ok := w.b.PartitionView(tp.Topic, tp.Partition)
		if !ok || v.Leader < 0 {
			rest.Partitions = append(rest.Partitions, tp)
			continue
		}
		get(v.Leader).parts = append(get(v.Leader).parts, tp)
	}
	live := liveIDs(w.b)
	for _, g := range m.Groups {
		owner := group.CoordinatorFor(g, live)
		if owner < 0 {
			rest.Groups = append(rest.Groups, g)
			continue
		}
		get(owner).groups = append(get(owner).groups, g)
	}
	var errs []error
	fenced := false
	for id, t := range targets {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		mk := kmsg.NewWriteTxnMarkersRequestMarker()
		mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
		for _, tp := range t.parts {
			if n := len(mk.Topics); n > 0 && mk.Topics[n-1].Topic == tp.Topic {
				mk.Topics[n-1].Partitions = append(mk.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = tp.Topic, []int32{tp.Partition}
			mk.Topics = append(mk.Topics, mt)
		}
		if len(t.groups) > 0 {
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = group.OffsetsTopic, []int32{0}
			mk.Topics = append(mk.Topics, mt)
		}
		req.Markers = append(req.Markers, mk)
		failed := func() {
			rest.Partitions = append(rest.Partitions, t.parts...)
			rest.Groups = append(rest.Groups, t.groups...)
		}
		resp, err := w.send(ctx, id, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
			failed()
			continue
		}
		acked := map[txn.TopicPartition]bool{}
		groupsAcked := false
		for _, rm := range resp.Markers {
			for _, rt := range rm.Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode == kerr.TransactionCoordinatorFenced.Code {
						fenced = true
					}
					if rp.ErrorCode != 0 {
						w.log.V(1).Info("marker not written", "broker", id, "topic", rt.Topic, "partition", rp.Partition, "error", kerr.ErrorForCode(rp.ErrorCode).Error())
						continue
					}
					if rt.Topic == group.OffsetsTopic {
						groupsAcked = true
					} else {
						acked[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = true
					}
				}
			}
		}
		for _, tp := range t.parts {
			if !acked[tp] {
				rest.Partitions = append(rest.Partitions, tp)
			}
		}
		if !groupsAcked {
			rest.Groups = append(rest.Groups, t.groups...)
		}
	}
	if fenced {
		errs = append(errs, txn.ErrCoordinatorFenced)
	}
	return rest, errors.Join(errs...)
}

// send runs req in this broker (Env.Internal) or at broker id.
func (w *markerWriter) send(ctx context.Context, id int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, markerTimeout)
	defer cancel()
	if id == w.b.NodeID() {
		resp, err := w.env.Internal(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.WriteTxnMarkersResponse), nil
	}
	resp, err := w.remote(ctx, id, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// txnMetrics are the strata_txn_* metrics.
type txnMetrics struct {
	ended   *prometheus.CounterVec
	retries prometheus.Counter
}

func newTxnMetrics() *txnMetrics {
	return &txnMetrics{
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_txn_completed_total",
			Help: "Transactions this broker's transaction coordinator completed, by outcome (commit, abort) and what ended them (client: EndTxn; timeout: transaction.timeout.ms passed; init: InitProducerId of the same transactional.id; takeover: finished after a coordinator change).",
		}, []string{"outcome", "reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_txn_marker_retries_total",
			Help: "Attempts to write transaction markers that left partitions or groups to retry (leader moving, broker down).",
		}),
	}
}

func (m *txnMetrics) TransactionEnded(outcome, reason string) {
	m.ended.WithLabelValues(outcome, reason).Inc()
}
func (m *txnMetrics) MarkerRetry() { m.retries.Inc() }

// Describe implements prometheus.Collector.
func (m *txnMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.ended.Describe(ch)
	m.retries.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *txnMetrics) Collect(ch chan<- prometheus.Metric) {
	m.ended.Collect(ch)
	m.retries.Collect(ch)
}
