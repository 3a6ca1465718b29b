package group

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeShareLog is a partition log of batches; Data is the batch's range as
// text, so a test can see which batches a fetch returned.
type fakeShareLog struct {
	start, end int64
	batches    []ShareBatch
}

// newFakeShareLog makes batches of the given sizes from offset 0.
func newFakeShareLog(sizes ...int64) *fakeShareLog {
	l := &fakeShareLog{}
	var off int64
	for _, n := range sizes {
		l.add(off, off+n-1, false)
		off += n
	}
	return l
}

func (l *fakeShareLog) add(base, last int64, control bool) {
	l.batches = append(l.batches, ShareBatch{Base: base, Last: last, Control: control, Data: []byte(fmt.Sprintf("[%d-%d]", base, last))})
	l.end = last + 1
}

func (l *fakeShareLog) Bounds() (int64, int64) { return l.start, l.end }

func (l *fakeShareLog) Batches(offset int64, maxBytes int) ([]ShareBatch, error) {
	var out []ShareBatch
	size := 0
	i := sort.Search(len(l.batches), func(i int) bool { return l.batches[i].Last >= offset })
	for _, b := range l.batches[i:] {
		if b.Base >= l.end {
			break
		}
		if len(out) > 0 && size+len(b.Data) > maxBytes || len(out) == 4 {
			break // at most 4 batches a read, to exercise reading on
		}
		out = append(out, b)
		size += len(b.Data)
	}
	return out, nil
}

const testLock = 30 * time.Second

var t0 = time.Unix(1_000_000, 0)

type shareStep struct {
	acquire  string // member acquiring (maxRecords from max)
	max      int
	ack      string // member acknowledging acks
	acks     []ShareAck
	release  string // member whose records are released
	at       time.Duration
	want     []AcquiredRange
	wantData string
	wantErr  error
	wantSPSO int64
}

func runShareSteps(t *testing.T, l ShareLog, earliest bool, steps []shareStep) *sharePartition {
	t.Helper()
	sp := newSharePartition()
	const limit = 5
	for i, st := range steps {
		now := t0.Add(st.at)
		sp.expire(now, limit)
		switch {
		case st.acquire != "":
			data, ranges, _, err := sp.acquire(l, st.acquire, st.max, 1<<20, testLock, now, earliest)
			if err != nil {
				t.Fatalf("step %d: acquire: %v", i, err)
			}
			if !reflect.DeepEqual(ranges, st.want) {
				t.Fatalf("step %d: %s acquired %+v, want %+v", i, st.acquire, ranges, st.want)
			}
			if st.wantData != "" && string(data) != st.wantData {
				t.Fatalf("step %d: data %q, want %q", i, data, st.wantData)
			}
		case st.ack != "":
			err := sp.acknowledge(st.ack, st.acks, false, limit, testLock, now)
			if !errors.Is(err, st.wantErr) || (err == nil) != (st.wantErr == nil) {
				t.Fatalf("step %d: acknowledge: %v, want %v", i, err, st.wantErr)
			}
		case st.release != "":
			sp.releaseMember(st.release, limit)
		}
		if sp.spso != st.wantSPSO {
			t.Fatalf("step %d: SPSO %d, want %d", i, sp.spso, st.wantSPSO)
		}
	}
	return sp
}

func acks(first, last int64, types ...int8) []ShareAck {
	return []ShareAck{{First: first, Last: last, Types: types}}
}

func TestSharePartitionStateMachine(t *testing.T) {
	tests := []struct {
		name     string
		log      ShareLog
		earliest bool
		steps    []shareStep
	}{{
		name: "acquire in order, accept moves the SPSO, a second member gets the rest",
		log:  newFakeShareLog(5, 5), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 3, want: []AcquiredRange{{0, 2, 1}}, wantData: "[0-4]"},
			{acquire: "b", max: 10, want: []AcquiredRange{{3, 9, 1}}, wantData: "[0-4][5-9]"},
			{ack: "a", acks: acks(0, 2, ShareAckAccept), wantSPSO: 3},
			{ack: "b", acks: acks(3, 9, ShareAckAccept), wantSPSO: 10},
			{acquire: "a", max: 10, wantSPSO: 10},
		},
	}, {
		name: "latest starts at the log end",
		log:  newFakeShareLog(5),
		steps: []shareStep{
			{acquire: "a", max: 10, wantSPSO: 5},
		},
	}, {
		name: "lock expiry makes records available to any member, count kept",
		log:  newFakeShareLog(4), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 10, want: []AcquiredRange{{0, 3, 1}}},
			{acquire: "b", max: 10, at: testLock - time.Millisecond},
			{acquire: "b", max: 10, at: testLock, want: []AcquiredRange{{0, 3, 2}}},
			{ack: "a", at: testLock, acks: acks(0, 0, ShareAckAccept), wantErr: kerr.InvalidRecordState},
			{ack: "b", at: testLock, acks: acks(0, 3, ShareAckAccept), wantSPSO: 4},
		},
	}, {
		name: "release keeps the count; the fifth release archives",
		log:  newFakeShareLog(2), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 10, want: []AcquiredRange{{0, 1, 1}}},
			{ack: "a", acks: acks(0, 1, ShareAckAccept, ShareAckRelease), wantSPSO: 1},
			{acquire: "b", max: 10, want: []AcquiredRange{{1, 1, 2}}, wantSPSO: 1},
			{ack: "b", acks: acks(1, 1, ShareAckRelease), wantSPSO: 1},
			{acquire: "b", max: 10, want: []AcquiredRange{{1, 1, 3}}, wantSPSO: 1},
			{ack: "b", acks: acks(1, 1, ShareAckRelease), wantSPSO: 1},
			{acquire: "b", max: 10, want: []AcquiredRange{{1, 1, 4}}, wantSPSO: 1},
			{ack: "b", acks: acks(1, 1, ShareAckRelease), wantSPSO: 1},
			{acquire: "b", max: 10, want: []AcquiredRange{{1, 1, 5}}, wantSPSO: 1},
			{ack: "b", acks: acks(1, 1, ShareAckRelease), wantSPSO: 2},
			{acquire: "b", max: 10, wantSPSO: 2},
		},
	}, {
		name: "lock expiry at the limit archives",
		log:  newFakeShareLog(1), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 1, want: []AcquiredRange{{0, 0, 1}}},
			{acquire: "a", max: 1, at: 1 * testLock, want: []AcquiredRange{{0, 0, 2}}},
			{acquire: "a", max: 1, at: 2 * testLock, want: []AcquiredRange{{0, 0, 3}}},
			{acquire: "a", max: 1, at: 3 * testLock, want: []AcquiredRange{{0, 0, 4}}},
			{acquire: "a", max: 1, at: 4 * testLock, want: []AcquiredRange{{0, 0, 5}}},
			{acquire: "a", max: 1, at: 5 * testLock, wantSPSO: 1},
		},
	}, {
		name: "reject and gap archive; renew is refused without IsRenewAck",
		log:  newFakeShareLog(3), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 10, want: []AcquiredRange{{0, 2, 1}}},
			{ack: "a", acks: acks(0, 2, ShareAckRenew), wantErr: kerr.InvalidRequest},
			{ack: "a", acks: acks(0, 2, ShareAckReject, ShareAckGap, ShareAckReject), wantSPSO: 3},
			{acquire: "a", max: 10, wantSPSO: 3},
		},
	}, {
		name: "malformed and foreign acknowledgements change nothing",
		log:  newFakeShareLog(4), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 2, want: []AcquiredRange{{0, 1, 1}}},
			{acquire: "b", max: 2, want: []AcquiredRange{{2, 3, 1}}},
			{ack: "a", acks: acks(1, 0, ShareAckAccept), wantErr: kerr.InvalidRequest},
			{ack: "a", acks: acks(0, 1, ShareAckAccept, ShareAckAccept, ShareAckAccept), wantErr: kerr.InvalidRequest},
			{ack: "a", acks: acks(0, 1, 9), wantErr: kerr.InvalidRequest},
			{ack: "a", acks: []ShareAck{{0, 0, []int8{ShareAckAccept}}, {2, 2, []int8{ShareAckAccept}}}, wantErr: kerr.InvalidRecordState},
			{ack: "a", acks: acks(0, 7, ShareAckAccept), wantErr: kerr.InvalidRecordState},
			{ack: "b", acks: acks(2, 3, ShareAckAccept)},
			{ack: "a", acks: acks(0, 1, ShareAckAccept), wantSPSO: 4},
		},
	}, {
		name: "a member's release gives its records to others",
		log:  newFakeShareLog(3), earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 10, want: []AcquiredRange{{0, 2, 1}}},
			{release: "b"},
			{acquire: "b", max: 10},
			{release: "a"},
			{acquire: "b", max: 10, want: []AcquiredRange{{0, 2, 2}}},
		},
	}, {
		name: "control batches and offsets between batches are never delivered",
		log: func() ShareLog {
			l := &fakeShareLog{}
			l.add(0, 1, false)
			l.add(2, 2, true) // a transaction marker
			l.add(5, 6, false)
			return l
		}(),
		earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 10, want: []AcquiredRange{{0, 1, 1}, {5, 6, 1}}, wantData: "[0-1][5-6]"},
			{ack: "a", acks: acks(0, 1, ShareAckAccept), wantSPSO: 5},
		},
	}, {
		name: "batches of aborted transactions are archived (read_committed)",
		log: func() ShareLog {
			l := &fakeShareLog{}
			l.add(0, 1, false)
			l.add(2, 3, false)
			l.batches[1].Aborted = true
			l.add(4, 4, true) // its ABORT marker
			l.add(5, 5, false)
			return l
		}(),
		earliest: true,
		steps: []shareStep{
			{acquire: "a", max: 10, want: []AcquiredRange{{0, 1, 1}, {5, 5, 1}}, wantData: "[0-1][5-5]"},
			{ack: "a", acks: []ShareAck{{0, 1, []int8{ShareAckAccept}}, {5, 5, []int8{ShareAckAccept}}}, wantSPSO: 6},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runShareSteps(t, tt.log, tt.earliest, tt.steps) })
	}
}

// TestSharePartitionInFlightWindow: at most shareMaxInFlight records are in
// flight; the window moves once the first ones are acknowledged.
func TestSharePartitionInFlightWindow(t *testing.T) {
	l := newFakeShareLog(shareMaxInFlight + 10)
	sp := newSharePartition()
	_, ranges, _, err := sp.acquire(l, "a", shareMaxInFlight+10, 1<<20, testLock, t0, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []AcquiredRange{{0, shareMaxInFlight - 1, 1}}; !reflect.DeepEqual(ranges, want) {
		t.Fatalf("acquired %+v, want %+v", ranges, want)
	}
	if err := sp.acknowledge("a", acks(0, 9, ShareAckAccept), false, 5, testLock, t0); err != nil {
		t.Fatal(err)
	}
	_, ranges, _, _ = sp.acquire(l, "a", 100, 1<<20, testLock, t0, true)
	if want := []AcquiredRange{{shareMaxInFlight, shareMaxInFlight + 9, 1}}; !reflect.DeepEqual(ranges, want) {
		t.Fatalf("after the window moved: acquired %+v, want %+v", ranges, want)
	}
}

// TestSharePartitionSnapshotRestore: the durable form keeps the SPSO,
// delivery counts and completed records; acquired records come back
// available with their count.
func TestSharePartitionSnapshotRestore(t *testing.T) {
	l := newFakeShareLog(6)
	sp := newSharePartition()
	if _, _, _, err := sp.acquire(l, "a", 6, 1<<20, testLock, t0, true); err != nil {
		t.Fatal(err)
	}
	// 0 accepted (SPSO 1), 1 released (count 1), 2 rejected, 3-5 acquired.
	if err := sp.acknowledge("a", acks(0, 2, ShareAckAccept, ShareAckRelease, ShareAckReject), false, 5, testLock, t0); err != nil {
		t.Fatal(err)
	}
	st := sp.snapshot()
	want := ShareState{StartOffset: 1, Batches: []ShareStateBatch{
		{First: 1, Last: 1, State: ShareStateAvailable, DeliveryCount: 1},
		{First: 2, Last: 2, State: ShareStateArchived, DeliveryCount: 1},
		{First: 3, Last: 5, State: ShareStateAvailable, DeliveryCount: 1},
	}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("snapshot %+v, want %+v", st, want)
	}
	back := newSharePartition()
	back.restore(st, 5)
	_, ranges, _, err := back.acquire(l, "b", 10, 1<<20, testLock, t0, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []AcquiredRange{{1, 1, 2}, {3, 5, 2}}; !reflect.DeepEqual(ranges, want) {
		t.Fatalf("after restore acquired %+v, want %+v", ranges, want)
	}
}

// TestSharePartitionLogStartMoves: records deleted by retention are
// skipped.
func TestSharePartitionLogStartMoves(t *testing.T) {
	l := newFakeShareLog(3, 3)
	sp := newSharePartition()
	if _, _, _, err := sp.acquire(l, "a", 1, 1<<20, testLock, t0, true); err != nil {
		t.Fatal(err)
	}
	l.start = 3
	l.batches = l.batches[1:]
	_, ranges, _, err := sp.acquire(l, "a", 10, 1<<20, testLock, t0, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []AcquiredRange{{3, 5, 1}}; !reflect.DeepEqual(ranges, want) || sp.spso != 3 {
		t.Fatalf("acquired %+v with SPSO %d, want %+v with SPSO 3", ranges, sp.spso, want)
	}
}
