package protocol

// ListOffsets (key 2), versions 0-9.
//
// Timestamp -1 (latest) answers the high watermark, or the last stable
// offset for IsolationLevel 1 (read_committed, v2+), -2 (earliest) the log
// start offset (of a tiered topic: the slow tier's start), -3 (max
// timestamp, v7, KIP-734) the offset and timestamp of the first record with
// the largest timestamp, across both tiers of a tiered topic (the local
// log's segment maxima and the manifest's choose the batch, its records
// are decoded), -4 (earliest-local, v8,
// KIP-405/1005) the local log start, -5 (latest-tiered, v9, KIP-1005) the
// last offset in the slow tier (-1 when none), and a timestamp >= 0 the
// first offset whose timestamp is at or after it, the slow tier searched
// first (-1, -1 when there is none). v0 answers OldStyleOffsets. CurrentLeaderEpoch
// (v4+) is checked; LeaderEpoch is always 0 on a single broker. The
// batches the max-timestamp and by-timestamp lookups decode share the
// request's decompression budget (Request.DecompressBudget, plus
// perLookupDecompression per lookup): once it is spent, the remaining
// lookups answer MESSAGE_TOO_LARGE.
//
// Zone-local produce (wal.zonelocal.produce.enable, zonelocal.go): a
// zone-tagged client's partitions this broker does not lead are forwarded
// to their leader over the inter-broker listener and its answer relayed
// (NOT_LEADER_OR_FOLLOWER when the leader cannot be reached).
//
// Never a silent skip of the tier: an answer that needs a tiered
// partition's manifest (earliest, latest-tiered, max timestamp, by
// timestamp) reads it when this broker has not yet (after a restart,
// before the tier manager's first round), and is KAFKA_STORAGE_ERROR
// (retriable) while it cannot, never the local log's answer alone.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/record"
)

func init() { register(kmsg.ListOffsets, 0, 9, handleListOffsets) }

func handleListOffsets(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ListOffsetsRequest)
	resp := r.NewResponse().(*kmsg.ListOffsetsResponse)
	b := r.Env.Broker
	// Lookups by timestamp decode stored batches: all of the request's
	// count against its decompression budget, which grows with the
	// lookups asked for.
	lookups := 0
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if rp.Timestamp >= 0 || rp.Timestamp == -3 {
				lookups++
			}
		}
	}
	r.decompress = record.NewBudget(record.RequestDecompressionBytes(r.size) + int64(lookups)*perLookupDecompression)
	ctx = record.WithBudget(ctx, r.decompress)
	remote := zoneLocalRemote(r)
	var remotes []zlRemote
	for ti, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		allowed := r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, rt.Topic)
		for pi, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !allowed {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if leader := zlLeader(remote, rt.Topic, rp.Partition); leader >= 0 {
				remotes = append(remotes, zlRemote{ti, pi, leader})
			} else if err := listOffset(ctx, b, req.Version, req.IsolationLevel, rt.Topic, rp, &sp); err != nil {
				sp.ErrorCode = broker.ErrorCode(err)
				sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(remotes) > 0 {
		forwardListOffsets(ctx, r, req, resp, remotes)
	}
	return resp, nil
}

// perLookupDecompression is what each timestamp lookup of a ListOffsets
// request adds to its decompression budget. A lookup decodes its batch up
// to the first record at or after the timestamp: ordinary batches cost a
// few MiB at most, so a consumer that looks up hundreds of partitions is
// answered, while one stored bomb per partition (up to 256 MiB each) is
// not decoded for every partition asked.
const perLookupDecompression = 4 << 20

func listOffset(ctx context.Context, b *broker.Broker, version int16, isolation int8, topic string, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) error {
	p, err := b.Partition(topic, rp.Partition)
	if err != nil {
		return err
	}
	current := int32(-1)
	if version >= 4 {
		current = rp.CurrentLeaderEpoch
	}
	if err := checkPartitionLeader(p, current); err != nil {
		return err
	}
	offset, ts := int64(-1), int64(-1)
	switch rp.Timestamp {
	case -1:
		offset = highWatermark(p)
		if isolation == 1 && version >= 2 {
			offset = p.LastStableOffset()
		}
	case -2:
		if offset, err = p.StartOffset(); err != nil {
			return err
		}
	case -4, -5:
		if offset, err = tieredListOffset(version, p, rp.Timestamp); err != nil {
			return err
		}
	case -3:
		if version < 7 {
			return fmt.Errorf("%w: max timestamp needs ListOffsets v7", kerr.UnsupportedVersion)
		}
		offset, ts, err = p.MaxTimestamp(ctx)
		if err != nil {
			return err
		}
	default:
		if rp.Timestamp < 0 {
			return fmt.Errorf("%w: timestamp %d", kerr.InvalidRequest, rp.Timestamp)
		}
		o, t, ok, err := p.OffsetForTimestamp(ctx, rp.Timestamp)
		if err != nil {
			return err
		}
		if ok {
			offset, ts = o, t
		}
	}
	sp.Offset, sp.Timestamp, sp.LeaderEpoch = offset, ts, leaderEpoch(p)
	if version == 0 {
		sp.OldStyleOffsets = []int64{}
		if offset >= 0 {
			sp.OldStyleOffsets = []int64{offset}
		}
	}
	return nil
}

// tieredListOffset answers -4 (earliest-local, v8) and -5 (latest-tiered,
// v9) of KIP-1005.
func tieredListOffset(version int16, p *broker.Partition, timestamp int64) (int64, error) {
	if timestamp == -4 {
		if version < 8 {
			return -1, fmt.Errorf("%w: earliest-local needs ListOffsets v8", kerr.UnsupportedVersion)
		}
		return p.Log.StartOffset(), nil
	}
	if version < 9 {
		return -1, fmt.Errorf("%w: latest-tiered needs ListOffsets v9", kerr.UnsupportedVersion)
	}
	return p.LatestTieredOffset()
}
