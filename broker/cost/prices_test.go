package cost

import (
	"math"
	"testing"
)

func TestForwardBreakEvenBytes(t *testing.T) {
	p := Default()
	be := p.ForwardBreakEvenBytes()
	// PUT $1.13e-6 + GET $3e-8 + 400 B across zones, against $0.02/GB
	// sent across zones: about 58 KB, within the included 512 KB.
	if be < 55_000 || be > 62_000 {
		t.Fatalf("break-even %d bytes, want about 58 KB", be)
	}
	if p.Forward(be) > p.CrossZone(be) || p.Forward(be-1) <= p.CrossZone(be-1) {
		t.Fatalf("%d is not the first size at which forwarding costs no more than the transfer", be)
	}
	// Transfer free (one zone's prices, or a provider without the
	// charge): forwarding never pays.
	free := p
	free.CrossZoneOutPerGB, free.CrossZoneInPerGB = 0, 0
	if got := free.ForwardBreakEvenBytes(); got != math.MaxInt64 {
		t.Fatalf("free transfer: break-even %d", got)
	}
	// Cross-zone reads of the bucket priced like the transfer: never.
	dear := p
	dear.FastCrossZoneReadPerGB = 0.02
	if got := dear.ForwardBreakEvenBytes(); got != math.MaxInt64 {
		t.Fatalf("cross-zone bucket reads as dear as transfer: break-even %d", got)
	}
}
