package bench

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fixedPartitioner picks partition pick; it has no backlog method.
type fixedPartitioner struct{ pick int }

func (f fixedPartitioner) ForTopic(string) kgo.TopicPartitioner { return f }
func (fixedPartitioner) RequiresConsistency(*kgo.Record) bool   { return false }
func (f fixedPartitioner) Partition(*kgo.Record, int) int       { return f.pick }

func TestPrimingPartitioner(t *testing.T) {
	prime := func(p int32) *kgo.Record {
		v := make([]byte, RecordHeaderSize)
		v[8] = primeFlag
		return &kgo.Record{Partition: p, Value: v}
	}
	load := func(flag byte) *kgo.Record {
		v := make([]byte, RecordHeaderSize)
		v[8] = flag
		return &kgo.Record{Partition: 7, Value: v}
	}
	tests := []struct {
		name       string
		base       kgo.Partitioner
		r          *kgo.Record
		consistent bool
		want       int
	}{
		{"priming record: its partition", fixedPartitioner{2}, prime(5), true, 5},
		{"measured record: the base's pick", fixedPartitioner{2}, load(1), false, 2},
		{"warmup record: the base's pick", fixedPartitioner{2}, load(0), false, 2},
		{"priming record, franz-go's default base", kgo.UniformBytesPartitioner(64<<10, true, true, nil), prime(9), true, 9},
		{"keyed record: the base's hash, consistent", kgo.UniformBytesPartitioner(64<<10, true, true, nil), &kgo.Record{Key: []byte("k"), Value: make([]byte, 20)}, true, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := primingPartitioner{tt.base}.ForTopic("t").(primingTopicPartitioner)
			if got := tp.RequiresConsistency(tt.r); got != tt.consistent {
				t.Errorf("RequiresConsistency = %v, want %v", got, tt.consistent)
			}
			got := tp.PartitionByBackup(tt.r, 12, nil)
			if tt.want >= 0 && got != tt.want {
				t.Errorf("partition %d, want %d", got, tt.want)
			}
			if got < 0 || got >= 12 {
				t.Errorf("partition %d out of [0, 12)", got)
			}
		})
	}
}
