package chaos

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/log"
	"github.com/strata-dev/strata/broker/record"
)

// readReplica reads a stopped replica's log of one partition from its
// directory: the batches up to hwm as stored, their records, and its log
// end offset.
func readReplica(dir string, broker int32, hwm int64) ReplicaLog {
	rl := ReplicaLog{Broker: broker}
	l, err := log.Open(dir, log.DefaultConfig())
	if err != nil {
		rl.Err = err.Error()
		return rl
	}
	defer l.Close()
	rl.End = l.EndOffset()
	for off := l.StartOffset(); off < hwm && off < rl.End; {
		rr, err := l.Read(off, 1<<20, hwm)
		if err != nil {
			rl.Err = fmt.Sprintf("read at %d: %v", off, err)
			return rl
		}
		if len(rr.Records) == 0 {
			break
		}
		rl.Bytes = append(rl.Bytes, rr.Records...)
		off = rr.HighestOffset + 1
	}
	recs, err := decodeRecords(rl.Bytes)
	if err != nil {
		rl.Err = err.Error()
	}
	rl.Records = recs
	return rl
}

// decodeRecords parses stored record batches: whole batches with valid
// frames and CRCs (record.Split; a partial tail is an error here), their
// records decoded by franz-go's fetch decoder.
func decodeRecords(b []byte) ([]Rec, error) {
	if _, partial, err := record.Split(b); err != nil || partial != 0 {
		return nil, fmt.Errorf("stored batches: %d trailing bytes of a partial batch, %v", partial, err)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches = b
	rp.HighWatermark = -1
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{}, &rp, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		return nil, fmt.Errorf("decode log: %w", fp.Err)
	}
	out := make([]Rec, 0, len(fp.Records))
	for _, r := range fp.Records {
		out = append(out, Rec{Offset: r.Offset, Value: string(r.Value)})
	}
	return out, nil
}
