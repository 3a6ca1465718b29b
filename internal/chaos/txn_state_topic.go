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
	described := map[string]string{}
	for len(described) < len(ids) && ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := w.c.adm.DescribeTransactions(rctx, ids...)
		rcancel()
		if err == nil {
			for _, id := range ids {
				switch dt, err := d.On(id, nil); {
				case err == nil && dt.Err == nil:
					described[id] = txnStateString(dt.State, dt.ProducerID, dt.ProducerEpoch)
				case err == nil && errors.Is(dt.Err, kerr.TransactionalIDNotFound):
					described[id] = "" // never initialised in this run
				}
			}
		}
		if len(described) < len(ids) {
			wait(ctx, time.Second)
		}
	}
	var got map[string]string
	for {
		var err error
		got, err = w.readTxnProjection(ctx, ids)
		if err == nil && maps.Equal(got, described) || ctx.Err() != nil {
			break
		}
		wait(ctx, time.Second)
	}
	at := w.since()
	w.mu.Lock()
	w.txn.Described, w.txn.Projected, w.txn.ProjectedS = described, map[string]string{}, at
	for _, id := range ids {
		w.txn.Projected[id] = got[id]
	}
	w.mu.Unlock()
	for _, e := range txnProjectedEvents(ids, described, got, at) {
		w.hist.write(e)
	}
}

// txnProjectedEvents are the history lines of the ids' described and
// projected states, read at t=at.
func txnProjectedEvents(ids []string, described, projected map[string]string, at float64) []Event {
	var out []Event
	for _, id := range ids {
		out = append(out, Event{T: at, Op: OpTxnDescribed, Txn: id, Value: described[id]},
			Event{T: at, Op: OpTxnProjected, Txn: id, Value: projected[id]})
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
