package placement

import (
	"fmt"
	"testing"
)

// BenchmarkAssign places one topic on a cluster of brokers spread over 3
// zones.
func BenchmarkAssign(b *testing.B) {
	for _, c := range []struct{ brokers, partitions int }{{3, 6}, {30, 1000}, {300, 10000}} {
		b.Run(fmt.Sprintf("brokers=%d/partitions=%d", c.brokers, c.partitions), func(b *testing.B) {
			per := c.brokers / 3
			brokers := zoned(fmt.Sprintf("a:%d", per), fmt.Sprintf("b:%d", per), fmt.Sprintf("c:%d", per))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Assign(Request{Brokers: brokers, Partitions: c.partitions, ReplicationFactor: 3}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
