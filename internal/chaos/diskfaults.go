package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-dev/strata/broker/log/faultfs"
)

// Disk fault kinds. Every chaos broker runs with the fault layer of
// broker/log (faultfs, STRATA_FAULTFS=1), which journals what is durable
// on its data directory and takes disk faults from a control file.
const (
	// KindPowerLoss: SIGKILL a broker, drop everything its logs had not
	// fsynced (faultfs.DropUnsynced: a machine crash with a volatile page
	// cache), start it again after Duration.
	KindPowerLoss = "power-loss"
	// KindDiskFull: a broker's data directory answers ENOSPC to writes
	// and fsyncs for Duration. The broker stops on its first failed write
	// (fail-stop, docs/storage.md); the heal clears the fault and starts
	// it again if it stopped, as its supervisor would.
	KindDiskFull = "disk-full"
)

// faultFSEnv enables the fault layer in the chaos brokers.
const faultFSEnv = faultfs.EnvVar + "=1"

func init() {
	registerKind(kindSpec{name: KindPowerLoss, process: true,
		gen: func(g *gen, f *Fault) {
			f.Target = g.processTarget()
			f.Duration = g.between(2*time.Second, 6*time.Second)
		},
		apply: func(ctx context.Context, n *nemesis, _ Fault, b *broker) (func(context.Context) error, string, error) {
			n.c.killBroker(b)
			dropped, err := faultfs.Drop(b.dir)
			if err != nil {
				// Not applied as scheduled; the broker must run again.
				return nil, "", fmt.Errorf("drop unsynced writes of broker %d: %w (started again: %v)", b.id, err, n.c.startBroker(ctx, b))
			}
			return func(ctx context.Context) error { return n.c.startBroker(ctx, b) },
				fmt.Sprintf("broker %d: %s", b.id, dropped), nil
		}})
	// disk-full takes its broker out too (it stops on its first failed
	// write), so it counts towards the brokers down at once.
	registerKind(kindSpec{name: KindDiskFull, process: true,
		gen: func(g *gen, f *Fault) {
			f.Target = g.processTarget()
			f.Duration = g.between(2*time.Second, 6*time.Second)
		},
		apply: func(ctx context.Context, n *nemesis, _ Fault, b *broker) (func(context.Context) error, string, error) {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := faultfs.SetFaultAndWait(wctx, b.dir, faultfs.NoSpace)
			cancel()
			if err != nil && !b.exited() {
				_ = faultfs.SetFault(b.dir, faultfs.None)
				return nil, "", err
			}
			return func(ctx context.Context) error {
				if err := faultfs.SetFault(b.dir, faultfs.None); err != nil {
					return err
				}
				if b.exited() {
					n.note(fmt.Sprintf("broker %d had stopped on the full disk; started again", b.id))
					n.c.killBroker(b) // reap it, proxies down
					return n.c.startBroker(ctx, b)
				}
				return nil
			}, fmt.Sprintf("broker %d", b.id), nil
		}})
}

// exited reports whether the broker's process ended on its own (it was
// started and not stopped by the harness).
func (b *broker) exited() bool {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// healDiskFaults clears every broker's disk fault and reaps the brokers
// that stopped on their own (fail-stop on a disk fault), so that healAll
// starts them again.
func (n *nemesis) healDiskFaults() {
	for _, b := range n.c.brokers {
		if err := faultfs.SetFault(b.dir, faultfs.None); err != nil {
			n.res.Problems = append(n.res.Problems, fmt.Sprintf("clear the disk fault of broker %d: %v", b.id, err))
		}
		if b.exited() {
			n.c.killBroker(b)
		}
	}
}
