package log

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/record"
)

// TestRandomOperations runs seeded random sequences of appends, reads,
// truncations, DeleteRecords, retention, clean reopens and simulated
// crashes against a simple model (the list of batches that must be in
// the log) and checks the log against it after every step.
func TestRandomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed*7919))
			c := newClock()
			cfg := testConfig()
			cfg.SegmentBytes = int64(2000 + rng.IntN(4000))
			cfg.IndexIntervalBytes = rng.IntN(600)
			cfg.RetentionBytes = -1
			dir := t.TempDir()
			l := openLog(t, dir, cfg, WithClock(c.now))
			defer func() { l.Close() }()

			type mbatch struct {
				base, last, ts int64
				epoch          int32
			}
			var model []mbatch
			start, end := int64(0), int64(0)
			leo := func() int64 { return end }
			epoch := int32(0)
			check := func(step string) {
				t.Helper()
				if l.EndOffset() != leo() || l.StartOffset() != start {
					t.Fatalf("%s: log [%d, %d), model [%d, %d)", step, l.StartOffset(), l.EndOffset(), start, leo())
				}
				var got []record.Header
				if start < leo() {
					got = readAll(t, l)
				}
				var want []mbatch
				for _, b := range model {
					if b.last >= start {
						want = append(want, b)
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%s: %d batches readable, model has %d", step, len(got), len(want))
				}
				for i := range got {
					if got[i].BaseOffset != want[i].base || got[i].LastOffset() != want[i].last || got[i].MaxTimestamp != want[i].ts {
						t.Fatalf("%s: batch %d is %d..%d ts %d, want %+v", step, i, got[i].BaseOffset, got[i].LastOffset(), got[i].MaxTimestamp, want[i])
					}
				}
				// The epoch cache matches the epochs of the remaining batches.
				var wantEpochs []EpochEntry
				for _, b := range want {
					if len(wantEpochs) == 0 || wantEpochs[len(wantEpochs)-1].Epoch != b.epoch {
						wantEpochs = append(wantEpochs, EpochEntry{Epoch: b.epoch, StartOffset: max(b.base, start)})
					}
				}
				gotEpochs := l.Epochs()
				if len(want) == 0 && len(gotEpochs) == 1 && gotEpochs[0].StartOffset == start {
					// Kafka keeps the latest epoch, moved to the new start,
					// when DeleteRecords empties the log.
					wantEpochs = gotEpochs
				}
				if fmt.Sprint(gotEpochs) != fmt.Sprint(wantEpochs) {
					t.Fatalf("%s: epochs %v, want %v", step, gotEpochs, wantEpochs)
				}
				for i, e := range wantEpochs {
					wantEnd := end
					if i+1 < len(wantEpochs) {
						wantEnd = wantEpochs[i+1].StartOffset
					}
					if ge, gend := l.EndOffsetForEpoch(e.Epoch); ge != e.Epoch || gend != wantEnd {
						t.Fatalf("%s: EndOffsetForEpoch(%d) = %d %d, want %d %d", step, e.Epoch, ge, gend, e.Epoch, wantEnd)
					}
				}
				// Time lookups agree with a linear search of the model.
				if len(want) > 0 {
					probe := want[rng.IntN(len(want))].ts
					off, ts, ok := l.OffsetForTimestamp(probe)
					wantOff, wantTs := int64(-1), int64(-1)
					for _, b := range want {
						// records of b have ts b.ts-(n-1) .. b.ts, one per offset
						n := b.last - b.base + 1
						for i := int64(0); i < n; i++ {
							rts := b.ts - (n - 1) + i
							if rts >= probe && b.base+i >= start {
								wantOff, wantTs = b.base+i, rts
								break
							}
						}
						if wantOff >= 0 {
							break
						}
					}
					if !ok || off != wantOff || ts != wantTs {
						t.Fatalf("%s: OffsetForTimestamp(%d) = %d %d %v, want %d %d", step, probe, off, ts, ok, wantOff, wantTs)
					}
				}
			}
			for step := 0; step < 300; step++ {
				op := rng.IntN(100)
				name := ""
				switch {
				case op < 70:
					n := 1 + rng.IntN(5)
					ts := c.now().UnixMilli() - int64(n-1)
					if rng.IntN(10) == 0 {
						epoch++
					}
					res, err := l.AppendAsLeader([]record.Batch{batch(t, n, rng.IntN(300), ts)}, epoch)
					if err != nil {
						t.Fatalf("step %d append: %v", step, err)
					}
					if res.BaseOffset != leo() {
						t.Fatalf("step %d: appended at %d, model end %d", step, res.BaseOffset, leo())
					}
					model = append(model, mbatch{res.BaseOffset, res.LastOffset, ts + int64(n-1), epoch})
					end = res.LastOffset + 1
					c.advance(time.Duration(rng.IntN(1000)) * time.Millisecond)
					name = "append"
				case op < 76:
					to := start + rng.Int64N(leo()-start+1)
					if err := l.TruncateTo(to); err != nil {
						t.Fatalf("step %d truncate %d: %v", step, to, err)
					}
					for len(model) > 0 && model[len(model)-1].last >= to {
						end = model[len(model)-1].base // a straddling batch goes whole
						model = model[:len(model)-1]
					}
					start = min(start, end)
					name = fmt.Sprintf("truncate to %d", to)
				case op < 80:
					to := start + rng.Int64N(leo()-start+1)
					if err := l.DeleteRecordsBefore(to); err != nil {
						t.Fatalf("step %d delete records %d: %v", step, to, err)
					}
					start = max(start, to)
					name = fmt.Sprintf("delete records before %d", to)
				case op < 84:
					// Retention by time removes whole old segments: the
					// model learns the new start from the log.
					cfg2 := cfg
					cfg2.RetentionMs = time.Duration(rng.IntN(200)) * time.Second
					if err := l.SetConfig(cfg2); err != nil {
						t.Fatal(err)
					}
					if _, err := l.ApplyRetention(); err != nil {
						t.Fatalf("step %d retention: %v", step, err)
					}
					if err := l.SetConfig(cfg); err != nil {
						t.Fatal(err)
					}
					if l.StartOffset() < start {
						t.Fatalf("retention moved the start back to %d", l.StartOffset())
					}
					start = l.StartOffset()
					name = "retention"
				case op < 92:
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					l = openLog(t, dir, cfg, WithClock(c.now))
					name = "clean reopen"
				default:
					if err := l.shutdown(false); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(2) == 0 { // and lose the tail's indexes
						os.Remove(filepath.Join(dir, fmt.Sprintf("%020d%s", l.segs[len(l.segs)-1].base, indexSuffix)))
					}
					l = openLog(t, dir, cfg, WithClock(c.now))
					name = "crash reopen"
				}
				check(fmt.Sprintf("step %d (%s)", step, name))
			}
			if err := l.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
