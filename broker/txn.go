package broker

import "sync/atomic"

// TxnMarkerStats counts the transaction markers this broker wrote as
// partition leader (WriteTxnMarkers), by outcome.
type TxnMarkerStats struct {
	Committed, Aborted, Failed atomic.Int64
}

// TxnMarkers returns the broker's marker counters
// (strata_txn_markers_written_total).
func (b *Broker) TxnMarkers() *TxnMarkerStats { return &b.txnMarkers }

// OngoingTxns is the number of producer transactions open in the
// partitions this broker hosts (strata_txn_ongoing).
func (b *Broker) OngoingTxns() int {
	n := 0
	for _, p := range b.AllPartitions() {
		n += p.Log.OngoingTxns()
	}
	return n
}
