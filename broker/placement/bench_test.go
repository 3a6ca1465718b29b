package placement

import (
	"fmt"
	"slices"
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

// BenchmarkRebalance plans a scale-up by one broker per zone (the
// operator's rebalance; it plans every scaling round) with partition
// sizes spread over three orders of magnitude.
func BenchmarkRebalance(b *testing.B) {
	for _, c := range []struct{ brokers, partitions int }{{6, 60}, {30, 1000}} {
		b.Run(fmt.Sprintf("brokers=%d/partitions=%d", c.brokers, c.partitions), func(b *testing.B) {
			per := c.brokers / 3
			before := zoned(fmt.Sprintf("a:%d", per-1), fmt.Sprintf("b:%d", per-1), fmt.Sprintf("c:%d", per-1))
			asg, err := Assign(Request{Brokers: before, Partitions: c.partitions, ReplicationFactor: 3})
			if err != nil {
				b.Fatal(err)
			}
			var parts []Partition
			for i, rs := range asg {
				parts = append(parts, Partition{Topic: "t", Partition: int32(i), Replicas: rs, Size: int64(1+i*7919%1000) << 20})
			}
			after := slices.Clone(before)
			for i, z := range []string{"a", "b", "c"} {
				after = append(after, Broker{ID: int32(1000 + i), Zone: z})
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Rebalance(after, parts, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
