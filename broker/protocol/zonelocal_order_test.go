package protocol

import (
	"math"
	"testing"

	"github.com/strata-dev/strata/broker/record"
)

// zlBatches encodes one batch of n records per base sequence, back to
// back, for producer pid at epoch (pid -1: not idempotent).
func zlBatches(t *testing.T, pid int64, epoch int16, n int, seqs ...int32) []byte {
	t.Helper()
	var out []byte
	for _, seq := range seqs {
		spec := record.DefaultSpec()
		if pid >= 0 {
			spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, epoch, seq
		}
		recs := make([]record.Record, n)
		for i := range recs {
			recs[i] = record.Record{Value: []byte("v"), KeyLen: -1, ValueLen: 1}
		}
		b, err := record.Build(spec, recs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestZoneLocalStreamOrder: the requests of one client connection for one
// partition, in the order the connection sends them, each with the leader
// the zone's broker would send it to; want is whether it goes there (else
// NOT_LEADER_OR_FOLLOWER).
func TestZoneLocalStreamOrder(t *testing.T) {
	type req struct {
		pid    int64
		epoch  int16
		seq    int32 // first sequence; batches of 3 records
		leader int32
		want   bool
	}
	tests := []struct {
		name string
		reqs []req
	}{
		{"one leader", []req{
			{7, 0, 0, 3, true}, {7, 0, 3, 3, true}, {7, 0, 6, 3, true},
		}},
		{"leader moves with requests in flight: refused until the retry", []req{
			{7, 0, 0, 3, true},
			{7, 0, 3, 3, true}, // fails at broker 3 (moved)
			{7, 0, 6, 1, false},
			{7, 0, 9, 1, false},
			{7, 0, 3, 1, true}, // the client's retry from its first unacknowledged batch
			{7, 0, 6, 1, true},
			{7, 0, 9, 1, true},
			{7, 0, 12, 1, true},
		}},
		{"this broker becomes the leader: the same", []req{
			{7, 0, 0, 3, true}, {7, 0, 3, 2, false}, {7, 0, 3, 2, true}, {7, 0, 6, 2, true},
		}},
		{"the leader moves back before the retry: still refused", []req{
			{7, 0, 0, 3, true}, {7, 0, 3, 1, false}, {7, 0, 6, 3, false}, {7, 0, 3, 3, true}, {7, 0, 6, 3, true},
		}},
		{"the leader moves again after the retry", []req{
			{7, 0, 0, 3, true}, {7, 0, 3, 1, false}, {7, 0, 3, 1, true}, {7, 0, 6, 2, false}, {7, 0, 3, 2, true},
		}},
		{"a new epoch starts a new stream", []req{
			{7, 0, 0, 3, true}, {7, 0, 3, 1, false}, {7, 1, 0, 1, true}, {7, 1, 3, 1, true},
		}},
		{"a new producer ID starts a new stream", []req{
			{7, 0, 0, 3, true}, {7, 0, 3, 1, false}, {8, 0, 0, 1, true},
		}},
		{"not idempotent: never refused", []req{
			{-1, -1, -1, 3, true}, {-1, -1, -1, 1, true}, {-1, -1, -1, 2, true},
		}},
		{"sequences wrap", []req{
			{7, 0, math.MaxInt32 - 2, 3, true}, {7, 0, 1, 1, false}, {7, 0, math.MaxInt32 - 2, 1, true}, {7, 0, 1, 1, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &zlStreams{}
			for i, r := range tt.reqs {
				if got := s.admit("orders", 0, r.leader, zlBatches(t, r.pid, r.epoch, 3, r.seq)); got != r.want {
					t.Fatalf("request %d (seq %d to broker %d): admitted %v, want %v", i, r.seq, r.leader, got, r.want)
				}
			}
		})
	}

	t.Run("partitions are separate streams", func(t *testing.T) {
		s := &zlStreams{}
		s.admit("orders", 0, 3, zlBatches(t, 7, 0, 3, 0))
		s.admit("orders", 1, 1, zlBatches(t, 7, 0, 3, 0))
		if !s.admit("orders", 1, 1, zlBatches(t, 7, 0, 3, 3)) {
			t.Fatal("partition 1's leader did not change, its next batch was refused")
		}
		if s.admit("orders", 0, 1, zlBatches(t, 7, 0, 3, 3)) {
			t.Fatal("partition 0's leader changed, its next batch was admitted")
		}
	})
	t.Run("several batches: the last one's sequence counts", func(t *testing.T) {
		s := &zlStreams{}
		s.admit("orders", 0, 3, zlBatches(t, 7, 0, 3, 0, 3, 6)) // sequences 0..8
		if !s.admit("orders", 0, 1, zlBatches(t, 7, 0, 3, 6)) {
			t.Fatal("a retry of the request's last batch was refused")
		}
	})
	t.Run("no streams: everything admitted", func(t *testing.T) {
		var s *zlStreams
		if !s.admit("orders", 0, 1, zlBatches(t, 7, 0, 3, 0)) {
			t.Fatal("refused")
		}
	})
}

func TestSeqAtOrBefore(t *testing.T) {
	for _, tt := range []struct {
		a, b int32
		want bool
	}{
		{0, 0, true}, {0, 1, true}, {1, 0, false},
		{math.MaxInt32, 0, true}, {0, math.MaxInt32, false},
		{math.MaxInt32 - 5, 10, true}, {10, math.MaxInt32 - 5, false},
	} {
		if got := seqAtOrBefore(tt.a, tt.b); got != tt.want {
			t.Errorf("seqAtOrBefore(%d, %d) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
