package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/txntopic"
)

// The transactional ids' state as __transaction_state holds it: the
// brokers write a projection of the transaction store there, in Kafka's
// record format, through the leaders of the topic's partitions
// (broker/txntopic). Under faults its leaders move and its writers'
// watches break; after the cluster healed it must hold exactly what
// DescribeTransactions answers for every id the run used.

// txnStateString is how the history keeps an id's state: Kafka's state
// name, producer id and epoch.
func txnStateString(state string, producerID int64, epoch int16) string {
	return fmt.Sprintf("%s pid=%d epoch=%d", state, producerID, epoch)
}

// txnProjected describes the run's transactional ids, then reads their
// records back from __transaction_state until they agree or
// finalReadBound passes, and puts both into the history ("" for an id
// the topic does not hold).
func (w *workloads) txnProjected(ctx context.Context) {
	ids := []string{"chaos-txn-fence"}
	for i := range txnProducers {
		ids = append(ids, fmt.Sprintf("chaos-txn-%d", i))
	}
	ctx, cancel := context.WithTimeout(ctx, finalReadBound)
	defer cancel()
	var (
		described, got map[string]string
		lastErr        error
	)
	for {
		// Both sides are read again each time: a transaction the fence
		// just committed may still be completing (PrepareCommit).
		// A read cut short by the bound keeps the last whole one.
		d, derr := w.describeTxns(ctx, ids)
		g, rerr := w.readTxnProjection(ctx, ids)
		if lastErr = errors.Join(derr, rerr); lastErr == nil {
			described, got = d, g
			if maps.Equal(got, described) {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		wait(ctx, time.Second)
	}
	if described == nil {
		// Never read whole: say so rather than compare nothing.
		described = map[string]string{}
		for _, id := range ids {
			described[id] = "not read"
		}
	}
	at := w.since()
	w.mu.Lock()
	w.txn.Described, w.txn.Projected, w.txn.ProjectedS = map[string]string{}, map[string]string{}, at
	for _, id := range ids {
		w.txn.Described[id], w.txn.Projected[id] = described[id], got[id]
	}
	if lastErr != nil {
		w.txn.ProjectedErr = lastErr.Error()
	}
	w.mu.Unlock()
	for _, e := range txnProjectedEvents(ids, described, got, w.txn.ProjectedErr, at) {
		w.hist.write(e)
	}
}

// describeTxns returns each id's state as DescribeTransactions answers it
// ("" for an id the coordinators do not know).
func (w *workloads) describeTxns(ctx context.Context, ids []string) (map[string]string, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := w.c.adm.DescribeTransactions(rctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("describe transactions: %w", err)
	}
	out := map[string]string{}
	for _, id := range ids {
		dt, err := d.On(id, nil)
		if err == nil {
			err = dt.Err
		}
		switch {
		case err == nil:
			out[id] = txnStateString(dt.State, dt.ProducerID, dt.ProducerEpoch)
		case errors.Is(err, kerr.TransactionalIDNotFound):
			out[id] = "" // never initialised in this run
		default:
			return nil, fmt.Errorf("describe transaction %s: %w", id, err)
		}
	}
	return out, nil
}

// txnProjectedEvents are the history lines of the ids' described and
// projected states, read at t=at (readErr: why the last read failed).
func txnProjectedEvents(ids []string, described, projected map[string]string, readErr string, at float64) []Event {
	var out []Event
	for _, id := range ids {
		out = append(out, Event{T: at, Op: OpTxnDescribed, Txn: id, Value: described[id]},
			Event{T: at, Op: OpTxnProjected, Txn: id, Value: projected[id], Error: readErr})
	}
	return out
}

// readTxnProjection reads the partitions of __transaction_state holding
// ids from their start to their end and returns each id's latest state
// (tombstones remove it).
func (w *workloads) readTxnProjection(ctx context.Context, ids []string) (map[string]string, error) {
	ends, err := w.internalTopicEnds(ctx, txntopic.Topic, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var decodeErr error
	complete, err := w.readAll(ctx, txntopic.Topic, "chaos-txn-state-topic", ends.ends, func(r *kgo.Record) {
		var k kmsg.TxnMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			decodeErr = fmt.Errorf("%d/%d: key: %w", r.Partition, r.Offset, err)
			return
		}
		if r.Value == nil {
			delete(out, k.TransactionalID)
			return
		}
		var v kmsg.TxnMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			decodeErr = fmt.Errorf("%d/%d: value: %w", r.Partition, r.Offset, err)
			return
		}
		out[k.TransactionalID] = txnStateString(v.State.String(), v.ProducerID, v.ProducerEpoch)
	})
	switch {
	case err != nil:
		return nil, err
	case decodeErr != nil:
		return nil, decodeErr
	case !complete:
		return nil, fmt.Errorf("%s: read did not reach %v", txntopic.Topic, ends.ends)
	}
	for id := range out {
		if !slices.Contains(ids, id) {
			delete(out, id)
		}
	}
	return out, nil
}
