package chaos

import (
	"context"
	"fmt"

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

// applyDiskFault injects a power-loss or disk-full fault; heal ends it.
func (n *nemesis) applyDiskFault(ctx context.Context, f Fault) (heal func(context.Context) error, what string, err error) {
	b, err := n.resolveBroker(ctx, f.Target)
	if err != nil {
		return nil, "", err
	}
	what = fmt.Sprintf("broker %d (%s)", b.id, f.Target)
	switch f.Kind {
	case KindPowerLoss:
		b.kill()
		dropped, err := faultfs.Drop(b.dir)
		if err != nil {
			// Not applied as scheduled; the broker must run again.
			return nil, "", fmt.Errorf("drop unsynced writes of broker %d: %w (started again: %v)", b.id, err, b.start(ctx))
		}
		return func(ctx context.Context) error { return b.start(ctx) }, what + ": " + dropped.String(), nil
	case KindDiskFull:
		if err := faultfs.SetFault(b.dir, faultfs.NoSpace); err != nil {
			return nil, "", err
		}
		return func(ctx context.Context) error {
			if err := faultfs.SetFault(b.dir, faultfs.None); err != nil {
				return err
			}
			if b.exited() {
				n.res.Applied = append(n.res.Applied, fmt.Sprintf("  broker %d had stopped on the full disk; started again", b.id))
				b.kill() // reap it
				return b.start(ctx)
			}
			return nil
		}, what, nil
	}
	return nil, "", fmt.Errorf("unknown disk fault kind %q", f.Kind)
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
			b.kill()
		}
	}
}
