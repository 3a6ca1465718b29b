package protocol

// Zone-local produce (wal.zonelocal.produce.enable, docs/wal.md
// "Zone-local produce").
//
// A client that names its zone in its client ID (strata_az=<zone>) is
// shown, in Metadata, its own zone's replica as the leader of every
// partition that has a live replica in that zone, with the real leader
// epoch (zoneLocalLeaders says why partitions without one keep their
// leader). A Produce such a
// broker receives for a partition it does not lead is not refused: the
// broker writes the partition's record sets into one object of its own
// zone's WAL bucket (Env.ZoneLocal.PutRecords) and sends the real leader
// a Produce (v9+, the same acks, timeout and transactional ID) whose
// partitions carry no records but a tagged field, TagZoneLocalRecords,
// naming the object, the byte range and its CRC-32C. The leader reads the
// range from that bucket and appends it through the ordinary produce
// path (validation, idempotence, KIP-890 verification, acks); its answer
// per partition is relayed to the client. ListOffsets, OffsetForLeaderEpoch
// and DeleteRecords such a client sends to a broker that does not lead a
// partition are forwarded to the leader (Env.ZoneLocal.Forward) and the
// answer relayed. Fetch needs nothing: a v11+ consumer fetch is served by
// any replica (KIP-392).
//
// Only a request whose principal may CLUSTER_ACTION on the cluster (a
// broker) may carry TagZoneLocalRecords or TagZoneLocalRange, and a
// partition that carries one is never forwarded again
// (NOT_LEADER_OR_FOLLOWER when the receiver does not lead it).

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/replica"
)

// TagZoneLocalRecords is the tagged field of a Produce partition (v9+)
// that names forwarded records in an object instead of carrying them:
// bucket str | key str | offset u64 | length u32 | crc32c u32 (strings:
// u16 length + bytes, integers big endian). The first form: still read,
// sent only to a leader that does not announce TagZoneLocalForms.
const TagZoneLocalRecords = 0x5A4C // "ZL"

// The second form names each object once per request: the Produce
// request's TagZoneLocalObjects lists them, count u16 | count × (bucket
// str | key str), and a partition's TagZoneLocalRange points into it,
// object index u16 | offset u64 | length u32 | crc32c u32 (18 bytes
// instead of about 100: these bytes cross zones).
const (
	TagZoneLocalObjects = 0x5A4F // "ZO", Produce request
	TagZoneLocalRange   = 0x5A52 // "ZR", Produce partition
)

// TagZoneLocalKeep is the tagged field of a forwarded Produce request
// (top level) by which the forwarder says it keeps its objects for at
// least the uvarint number of milliseconds after the leader answers
// (wal.zonelocal.object.keep.ms), so the leader may point its followers
// at them instead of uploading the records again (docs/wal.md
// "Zone-local produce", "Followers read the forwarded object"). A
// forwarder of an older release deletes its objects at the answer and
// sends no such tag: its records are uploaded by the leader as before.
const TagZoneLocalKeep = 0x5A4B // "ZK"

// TagZoneLocalForms is the tagged field of an ApiVersions response (v3+)
// by which a broker tells another broker (client ID BrokerClientIDPrefix)
// the forms of forwarded records it reads: u8, 2 for both. A leader
// without it (an older release, mid rolling upgrade) is sent the first.
const TagZoneLocalForms = 0x5A4C

// ZoneLocalFormsRead is this release's TagZoneLocalForms value.
const ZoneLocalFormsRead = 2

// ZoneLocal is the broker's side of zone-local produce (broker/server).
type ZoneLocal interface {
	// Forwarding says whether this broker forwards the produce of
	// zone-tagged clients (wal.zonelocal.produce.enable); a broker with
	// WAL replication on reads forwarded objects either way.
	Forwarding() bool
	// Inline says whether a forwarded request of n record bytes goes to
	// its leaders inline, in the Produce, instead of through an object:
	// the bucket path failed lately (a PUT of this broker's, or a
	// leader's GET or check of one of its objects), or the zone-local
	// policy finds an object dearer than the transfer it saves
	// (wal.zonelocal.produce.policy=auto).
	Inline(n int) bool
	// InlineFallback says whether a failed bucket path sends the records
	// inline (wal.zonelocal.produce.inline.ms > 0) rather than answering
	// KAFKA_STORAGE_ERROR.
	InlineFallback() bool
	// BucketFailed reports a failure of the bucket path.
	BucketFailed(err error)
	// ForwardedInline counts partitions sent to their leaders inline.
	ForwardedInline(n int)
	// PutRecords writes the record sets back to back into one new object
	// of this broker's zone bucket and returns where each one is.
	PutRecords(ctx context.Context, sets [][]byte) ([]ZoneLocalRef, error)
	// SharesWAL says whether PutRecords puts the sets into the broker's
	// next WAL object (with its pending own batches, cut by the WAL
	// policy's plan as a produce request's, PutRecords nudging it), so
	// that a request that appended batches and forwards others need not
	// cut its own object first.
	SharesWAL() bool
	// Send writes the request build returns to broker id now, after
	// every request Send wrote to that broker before (the leader appends
	// in the order the client sent), and returns a wait for its answer.
	// build is told whether the broker reads the second form of
	// forwarded records (TagZoneLocalForms), as the connection it is
	// written on learnt.
	Send(ctx context.Context, id int32, build func(compact bool) kmsg.Request) (wait func(context.Context) (kmsg.Response, error), err error)
	// Forward sends req to broker id and returns its answer.
	Forward(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error)
	// Done tells that the leaders answered (or gave up) on the object of
	// refs: it may be deleted, KeepObjects after.
	Done(refs []ZoneLocalRef)
	// KeepObjects is how long an object stays after Done
	// (wal.zonelocal.object.keep.ms; 0: deleted at once), which the
	// forwarded requests announce (TagZoneLocalKeep).
	KeepObjects() time.Duration
	// Read returns the bytes of refs (the leader's side), one entry per
	// ref; an error per ref.
	Read(ctx context.Context, refs []ZoneLocalRef) ([][]byte, []error)
	// Appended counts partitions appended from forwarded objects.
	Appended(n int)
}

// ZoneLocalRef is a forwarded record set: where it is and its CRC-32C.
type ZoneLocalRef struct {
	Bucket, Key    string
	Offset, Length int64
	CRC            uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ZoneLocalCRC is the checksum a ZoneLocalRef carries.
func ZoneLocalCRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func (ref ZoneLocalRef) encode() []byte {
	b := make([]byte, 0, 4+len(ref.Bucket)+len(ref.Key)+16)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ref.Bucket)))
	b = append(b, ref.Bucket...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(ref.Key)))
	b = append(b, ref.Key...)
	b = binary.BigEndian.AppendUint64(b, uint64(ref.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(ref.Length))
	return binary.BigEndian.AppendUint32(b, ref.CRC)
}

var errBadZoneLocalTag = errors.New("malformed zone-local records tag")

// zoneLocalObject is an entry of TagZoneLocalObjects.
type zoneLocalObject struct{ Bucket, Key string }

// maxZoneLocalObjects bounds TagZoneLocalObjects (a forwarder names one).
const maxZoneLocalObjects = 1024

func encodeZoneLocalObjects(objs []zoneLocalObject) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(objs)))
	for _, o := range objs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(o.Bucket)))
		b = append(b, o.Bucket...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(o.Key)))
		b = append(b, o.Key...)
	}
	return b
}

func decodeZoneLocalObjects(b []byte) ([]zoneLocalObject, error) {
	if len(b) < 2 {
		return nil, errBadZoneLocalTag
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if n == 0 || n > maxZoneLocalObjects {
		return nil, errBadZoneLocalTag
	}
	str := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		l := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+l {
			return "", false
		}
		s := string(b[2 : 2+l])
		b = b[2+l:]
		return s, true
	}
	objs := make([]zoneLocalObject, 0, n)
	for range n {
		bucket, ok1 := str()
		key, ok2 := str()
		if !ok1 || !ok2 || key == "" {
			return nil, errBadZoneLocalTag
		}
		objs = append(objs, zoneLocalObject{bucket, key})
	}
	if len(b) != 0 {
		return nil, errBadZoneLocalTag
	}
	return objs, nil
}

// encodeRange is ref's TagZoneLocalRange, its object at index i.
func (ref ZoneLocalRef) encodeRange(i int) []byte {
	b := make([]byte, 0, 18)
	b = binary.BigEndian.AppendUint16(b, uint16(i))
	b = binary.BigEndian.AppendUint64(b, uint64(ref.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(ref.Length))
	return binary.BigEndian.AppendUint32(b, ref.CRC)
}

// decodeZoneLocalRange reads a TagZoneLocalRange against its request's
// objects.
func decodeZoneLocalRange(b []byte, objs []zoneLocalObject) (ZoneLocalRef, error) {
	if len(b) != 18 {
		return ZoneLocalRef{}, errBadZoneLocalTag
	}
	i := int(binary.BigEndian.Uint16(b))
	if i >= len(objs) {
		return ZoneLocalRef{}, fmt.Errorf("%w: object %d of %d", errBadZoneLocalTag, i, len(objs))
	}
	ref := ZoneLocalRef{
		Bucket: objs[i].Bucket, Key: objs[i].Key,
		Offset: int64(binary.BigEndian.Uint64(b[2:])),
		Length: int64(binary.BigEndian.Uint32(b[10:])),
		CRC:    binary.BigEndian.Uint32(b[14:]),
	}
	if ref.Offset < 0 {
		return ZoneLocalRef{}, errBadZoneLocalTag
	}
	return ref, nil
}

func decodeZoneLocalRef(b []byte) (ZoneLocalRef, error) {
	var ref ZoneLocalRef
	str := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return "", false
		}
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, true
	}
	var ok1, ok2 bool
	ref.Bucket, ok1 = str()
	ref.Key, ok2 = str()
	if !ok1 || !ok2 || len(b) != 16 || ref.Key == "" {
		return ZoneLocalRef{}, errBadZoneLocalTag
	}
	ref.Offset = int64(binary.BigEndian.Uint64(b))
	ref.Length = int64(binary.BigEndian.Uint32(b[8:]))
	ref.CRC = binary.BigEndian.Uint32(b[12:])
	if ref.Offset < 0 {
		return ZoneLocalRef{}, errBadZoneLocalTag
	}
	return ref, nil
}

// zoneLocalTag returns the partition's TagZoneLocalRecords value, or nil.
func zoneLocalTag(rp *kmsg.ProduceRequestTopicPartition) []byte {
	return unknownTag(&rp.UnknownTags, TagZoneLocalRecords)
}

// hasZoneLocalTag says whether the partition names forwarded records, in
// either form.
func hasZoneLocalTag(rp *kmsg.ProduceRequestTopicPartition) bool {
	return unknownTag(&rp.UnknownTags, TagZoneLocalRecords) != nil || unknownTag(&rp.UnknownTags, TagZoneLocalRange) != nil
}

// unknownTag returns a copy of tag id's value, or nil.
func unknownTag(tags *kmsg.Tags, id uint32) []byte {
	var val []byte
	tags.Each(func(t uint32, v []byte) {
		if t == id {
			val = append([]byte{}, v...)
		}
	})
	return val
}

// zoneLocalClient returns the zone of a client that zone-local produce
// serves on this broker ("" for others): forwarding on, a zone in the
// client ID, not an internal request.
func zoneLocalClient(r *Request) string {
	if r.internal || r.Env.ZoneLocal == nil || !r.Env.ZoneLocal.Forwarding() || strings.HasPrefix(r.Client.ClientID, BrokerClientIDPrefix) {
		return ""
	}
	return ClientIDZone(r.Client.ClientID)
}

// BrokerClientIDPrefix starts the client ID of a broker's own requests to
// other brokers ("strata-broker-<id>", with ",strata_az=<zone>" on
// forwarded requests so that their bytes are counted as the zone's): a
// broker's request is never forwarded again.
const BrokerClientIDPrefix = "strata-broker-"

// zoneLocalLeaders rewrites the leaders of a Metadata answer for a client
// of zone: each partition that has a live replica in that zone shows it as
// its leader, with the real leader epoch. A partition without a replica
// in the zone keeps its real leader: a broker without a replica could take
// the client's produce but not serve its fetches (a consumer told so would
// refresh its metadata forever), so such partitions are produced to
// across zones, as before.
func zoneLocalLeaders(b *broker.Broker, listener, zone string, topics []kmsg.MetadataResponseTopic) {
	var inZone []int32
	for _, bi := range b.BrokersOn(listener) {
		if bi.Rack == zone {
			inZone = append(inZone, bi.ID)
		}
	}
	if len(inZone) == 0 {
		return
	}
	for ti := range topics {
		for pi := range topics[ti].Partitions {
			p := &topics[ti].Partitions[pi]
			if p.ErrorCode == 0 {
				p.Leader = zoneLocalLeader(inZone, p.Leader, p.Replicas)
			}
		}
	}
}

// zoneLocalLeader is the leader a zone-tagged client is shown: the first
// replica among the live brokers of its zone (inZone), else the leader.
func zoneLocalLeader(inZone []int32, leader int32, replicas []int32) int32 {
	if leader < 0 || slices.Contains(inZone, leader) {
		return leader
	}
	for _, id := range replicas {
		if slices.Contains(inZone, id) {
			return id
		}
	}
	return leader
}

// loadZoneLocalRecords replaces the records of every partition that names
// forwarded records (TagZoneLocalRecords) with the object's bytes. It
// returns the partitions that failed with their error (answered without
// appending), keyed by topic index and partition index; forwarded counts
// the partitions loaded.
func loadZoneLocalRecords(ctx context.Context, r *Request, req *kmsg.ProduceRequest) (failed map[[2]int]error, forwarded int, sources map[[2]int]*replica.Forwarded) {
	type at struct{ ti, pi int }
	var refs []ZoneLocalRef
	var where []at
	var objs []zoneLocalObject
	var objsErr error
	objsRead := false
	for ti := range req.Topics {
		for pi := range req.Topics[ti].Partitions {
			rp := &req.Topics[ti].Partitions[pi]
			tag := zoneLocalTag(rp)
			rangeTag := unknownTag(&rp.UnknownTags, TagZoneLocalRange)
			if tag == nil && rangeTag == nil {
				continue
			}
			if failed == nil {
				failed = map[[2]int]error{}
			}
			if !r.internal && !r.authorizedCluster(kmsg.ACLOperationClusterAction) {
				failed[[2]int{ti, pi}] = fmt.Errorf("%w: forwarded records need CLUSTER_ACTION", kerr.ClusterAuthorizationFailed)
				continue
			}
			var ref ZoneLocalRef
			var err error
			switch {
			case tag != nil && rangeTag != nil:
				err = fmt.Errorf("%w: both forms on one partition", errBadZoneLocalTag)
			case tag != nil:
				ref, err = decodeZoneLocalRef(tag)
			default:
				if !objsRead {
					objsRead = true
					if v := unknownTag(&req.UnknownTags, TagZoneLocalObjects); v != nil {
						objs, objsErr = decodeZoneLocalObjects(v)
					} else {
						objsErr = fmt.Errorf("%w: a range without the request's objects", errBadZoneLocalTag)
					}
				}
				err = objsErr
				if err == nil {
					ref, err = decodeZoneLocalRange(rangeTag, objs)
				}
			}
			if err != nil {
				failed[[2]int{ti, pi}] = fmt.Errorf("%w: %v", kerr.CorruptMessage, err)
				continue
			}
			if r.Env.ZoneLocal == nil {
				failed[[2]int{ti, pi}] = fmt.Errorf("%w: forwarded records, and this broker reads no WAL bucket", kerr.KafkaStorageError)
				continue
			}
			refs = append(refs, ref)
			where = append(where, at{ti, pi})
		}
	}
	if len(refs) == 0 {
		return failed, 0, nil
	}
	// With WAL replication, a forwarder that keeps its objects lets the
	// followers read them (replica.Partition.AppendForwarded): the
	// append needs the range and its bytes as forwarded.
	keep := zoneLocalKept(req)
	if keep > 0 && r.Env.Broker != nil {
		if rm := r.Env.Broker.Replicas(); rm == nil || !rm.WALEnabled() {
			keep = 0
		}
	} else {
		keep = 0
	}
	data, errs := r.Env.ZoneLocal.Read(ctx, refs)
	for i, w := range where {
		if errs[i] != nil {
			failed[[2]int{w.ti, w.pi}] = fmt.Errorf("%w: forwarded records s3://%s/%s: %v", kerr.KafkaStorageError, refs[i].Bucket, refs[i].Key, errs[i])
			continue
		}
		if ZoneLocalCRC(data[i]) != refs[i].CRC {
			// The bytes were damaged in the bucket, not sent corrupt by
			// the client: KAFKA_STORAGE_ERROR, which every client retries
			// (through a new object). franz-go fails a batch answered
			// CORRUPT_MESSAGE at once, as the client's own fault.
			failed[[2]int{w.ti, w.pi}] = fmt.Errorf("%w: forwarded records s3://%s/%s: CRC-32C mismatch", kerr.KafkaStorageError, refs[i].Bucket, refs[i].Key)
			continue
		}
		req.Topics[w.ti].Partitions[w.pi].Records = data[i]
		forwarded++
		if keep > 0 {
			if sources == nil {
				sources = map[[2]int]*replica.Forwarded{}
			}
			ref := refs[i]
			sources[[2]int{w.ti, w.pi}] = &replica.Forwarded{
				Bucket: ref.Bucket, Key: ref.Key, Offset: ref.Offset, Length: ref.Length, CRC: ref.CRC,
				// The append stamps the batches in place.
				Data: bytes.Clone(data[i]), Keep: keep,
			}
		}
	}
	return failed, forwarded, sources
}

// forwardedPart is a partition of a client's Produce this broker forwards.
type forwardedPart struct {
	sp     *kmsg.ProduceResponseTopicPartition
	topic  string
	part   int32
	leader int32
	recs   []byte
}

// zoneLocalForwardTarget returns the leader a zone-local client's produce
// to partition p is forwarded to, or -1 when this broker serves it itself
// (it leads it, or no other live leader is known).
func zoneLocalForwardTarget(b *broker.Broker, topic string, partition int32) int32 {
	leader := partitionLeader(b, topic, partition)
	if leader == b.Config().NodeID {
		return -1
	}
	return leader
}

// partitionLeader returns the partition's leader in this broker's
// metadata, -1 when none is known.
func partitionLeader(b *broker.Broker, topic string, partition int32) int32 {
	v, ok := b.MetadataView().Partition(topic, partition)
	if !ok || v.Leader < 0 {
		return -1
	}
	return v.Leader
}

// forwardProduce writes the parts' records into one object and sends each
// leader its Produce, off the connection's dispatch loop; the returned
// func (run deferred) waits for the answers and fills the parts'
// responses. nudgeOwn, when set, cuts the request's own WAL batches,
// which the object would have carried (ZoneLocal.SharesWAL): it is
// called when the records do not go through the bucket after all.
func forwardProduce(ctx context.Context, r *Request, req *kmsg.ProduceRequest, parts []forwardedPart, nudgeOwn func()) func() {
	zl := r.Env.ZoneLocal
	fail := func(p forwardedPart, err error) {
		p.sp.BaseOffset, p.sp.LogAppendTime, p.sp.LogStartOffset = -1, -1, -1
		p.sp.ErrorCode = broker.ErrorCode(err)
		p.sp.ErrorMessage = broker.ErrorMessage(err)
	}
	sets := make([][]byte, len(parts))
	for i, p := range parts {
		sets[i] = p.recs
	}
	acks := req.Acks
	if acks == 0 {
		acks = 1 // the leader's answer tells whether to delete the object
	}
	type sent struct {
		leader int32
		parts  []int
		wait   func(context.Context) (kmsg.Response, error)
	}
	var leaders []int32
	byLeader := map[int32][]int{}
	for i, p := range parts {
		if _, ok := byLeader[p.leader]; !ok {
			leaders = append(leaders, p.leader)
		}
		byLeader[p.leader] = append(byLeader[p.leader], i)
	}
	// The PUT runs beside the connection's next requests (theirs too);
	// the sends to the leaders keep the connection's request order: a
	// request is sent once the one before it was (or failed), which is
	// the order an idempotent producer's sequences need.
	prev, mine := r.Env.zoneLocalOrder(r.Client.ConnID)
	var refs []ZoneLocalRef
	var calls []sent
	var inline bool // set before ready closes
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		defer r.Env.zoneLocalSent(r.Client.ConnID, mine)
		// Through the bucket unless it failed lately or costs more than
		// the transfer; a failed PUT sends the records inline (they
		// cross zones, as a plain produce's would): a zone whose bucket
		// is out keeps producing.
		size := 0
		for _, set := range sets {
			size += len(set)
		}
		inline = zl.Inline(size)
		if !inline {
			var err error
			refs, err = zl.PutRecords(ctx, sets)
			if err != nil && nudgeOwn != nil {
				nudgeOwn()
			}
			if err != nil {
				if ctx.Err() != nil || !zl.InlineFallback() {
					if prev != nil {
						<-prev
					}
					for _, p := range parts {
						fail(p, fmt.Errorf("%w: zone-local produce: %v", kerr.KafkaStorageError, err))
					}
					return
				}
				zl.BucketFailed(err)
				inline = true
			}
		} else if nudgeOwn != nil {
			nudgeOwn()
		}
		if prev != nil {
			<-prev
		}
		if inline {
			refs = nil
			zl.ForwardedInline(len(parts))
		}
		for _, leader := range leaders {
			build := func(compact bool) kmsg.Request {
				return forwardedRequest(req, acks, parts, byLeader[leader], refs, compact, inline, zl.KeepObjects())
			}
			wait, err := zl.Send(ctx, leader, build)
			if err != nil {
				for _, i := range byLeader[leader] {
					fail(parts[i], fmt.Errorf("%w: zone-local produce to leader %d: %v", kerr.NotLeaderForPartition, leader, err))
				}
				continue
			}
			calls = append(calls, sent{leader: leader, parts: byLeader[leader], wait: wait})
		}
	}()
	// The leader answers acks=all within the request's timeout; a margin
	// for the PUT, the hop and the GET before REQUEST_TIMED_OUT.
	deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond + 5*time.Second)
	return func() {
		<-ready
		defer zl.Done(refs)
		wctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		for _, c := range calls {
			kresp, err := c.wait(wctx)
			if err != nil {
				code := fmt.Errorf("%w: zone-local produce, leader %d: %v", kerr.RequestTimedOut, c.leader, err)
				if wctx.Err() == nil {
					// The connection to the leader broke: the client
					// refreshes its metadata and retries.
					code = fmt.Errorf("%w: zone-local produce, leader %d: %v", kerr.NotLeaderForPartition, c.leader, err)
				}
				for _, i := range c.parts {
					fail(parts[i], code)
				}
				continue
			}
			resp := kresp.(*kmsg.ProduceResponse)
			for _, i := range c.parts {
				p := parts[i]
				answered := false
				for _, rt := range resp.Topics {
					if rt.Topic != p.topic {
						continue
					}
					for _, rp := range rt.Partitions {
						if rp.Partition == p.part {
							if !inline && rp.ErrorCode == kerr.KafkaStorageError.Code {
								// The leader could not read or check the
								// object (or its log failed): the
								// client's retry goes inline.
								msg := ""
								if rp.ErrorMessage != nil {
									msg = *rp.ErrorMessage
								}
								zl.BucketFailed(fmt.Errorf("leader %d answered KAFKA_STORAGE_ERROR: %s", c.leader, msg))
							}
							p.sp.ErrorCode, p.sp.ErrorMessage = rp.ErrorCode, rp.ErrorMessage
							p.sp.BaseOffset, p.sp.LogAppendTime, p.sp.LogStartOffset = rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset
							p.sp.ErrorRecords = rp.ErrorRecords
							answered = true
						}
					}
				}
				if !answered {
					fail(p, fmt.Errorf("%w: leader %d did not answer the partition", kerr.UnknownServerError, c.leader))
				}
			}
		}
	}
}

// forwardedRequest is the Produce v11 a leader is sent for the parts idx
// (refs: where each part's records are): partitions naming their range
// in the second form (the objects once, in the request's
// TagZoneLocalObjects) when compact, else each with its
// TagZoneLocalRecords.
func forwardedRequest(req *kmsg.ProduceRequest, acks int16, parts []forwardedPart, idx []int, refs []ZoneLocalRef, compact, inline bool, keep time.Duration) *kmsg.ProduceRequest {
	fr := kmsg.NewPtrProduceRequest()
	fr.SetVersion(11)
	fr.Acks, fr.TimeoutMillis, fr.TransactionID = acks, req.TimeoutMillis, req.TransactionID
	var objs []zoneLocalObject
	for _, i := range idx {
		p := parts[i]
		ti := slices.IndexFunc(fr.Topics, func(t kmsg.ProduceRequestTopic) bool { return t.Topic == p.topic })
		if ti < 0 {
			t := kmsg.NewProduceRequestTopic()
			t.Topic = p.topic
			fr.Topics = append(fr.Topics, t)
			ti = len(fr.Topics) - 1
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = p.part
		switch {
		case inline:
			// The bucket path is out or dearer than the transfer: the
			// records themselves.
			rp.Records = p.recs
		case compact:
			o := zoneLocalObject{refs[i].Bucket, refs[i].Key}
			oi := slices.Index(objs, o)
			if oi < 0 {
				objs = append(objs, o)
				oi = len(objs) - 1
			}
			rp.UnknownTags.Set(TagZoneLocalRange, refs[i].encodeRange(oi))
		default:
			rp.UnknownTags.Set(TagZoneLocalRecords, refs[i].encode())
		}
		fr.Topics[ti].Partitions = append(fr.Topics[ti].Partitions, rp)
	}
	if len(objs) > 0 {
		fr.UnknownTags.Set(TagZoneLocalObjects, encodeZoneLocalObjects(objs))
	}
	if !inline && keep >= time.Millisecond {
		fr.UnknownTags.Set(TagZoneLocalKeep, binary.AppendUvarint(nil, uint64(keep/time.Millisecond)))
	}
	return fr
}

// zoneLocalKept returns how long a forwarded Produce says its forwarder
// keeps the objects after the answer (TagZoneLocalKeep; 0: not kept).
func zoneLocalKept(req *kmsg.ProduceRequest) time.Duration {
	v := unknownTag(&req.UnknownTags, TagZoneLocalKeep)
	ms, l := binary.Uvarint(v)
	if l <= 0 || l != len(v) || ms > uint64(time.Hour/time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// zoneLocalOrder returns the channel closed once the connection's
// previous forwarded produce was sent to its leaders (nil: none pending)
// and this one's, to pass to zoneLocalSent.
func (e *Env) zoneLocalOrder(conn uint64) (prev <-chan struct{}, mine chan struct{}) {
	e.zlMu.Lock()
	defer e.zlMu.Unlock()
	if e.zlLast == nil {
		e.zlLast = map[uint64]chan struct{}{}
	}
	mine = make(chan struct{})
	if p, ok := e.zlLast[conn]; ok {
		prev = p
	}
	e.zlLast[conn] = mine
	return prev, mine
}

// zoneLocalSent tells the connection's next forwarded produce that this
// one was sent (or failed).
func (e *Env) zoneLocalSent(conn uint64, mine chan struct{}) {
	e.zlMu.Lock()
	if e.zlLast[conn] == mine {
		delete(e.zlLast, conn)
	}
	e.zlMu.Unlock()
	close(mine)
}

// zlRemote is a partition of a zone-local client's request that another
// broker leads: its topic and partition index in the request (and in the
// response, built in the same order) and the leader.
type zlRemote struct {
	ti, pi int
	leader int32
}

// zoneLocalRemote returns, for a zone-local client's request, the leader
// to forward a partition to (-1: serve here); nil for other clients.
func zoneLocalRemote(r *Request) func(topic string, partition int32) int32 {
	if zoneLocalClient(r) == "" {
		return nil
	}
	b := r.Env.Broker
	return func(topic string, partition int32) int32 {
		if broker.ValidateTopicName(topic) != nil {
			return -1
		}
		return zoneLocalForwardTarget(b, topic, partition)
	}
}

// zlLeader is remote(topic, partition), -1 when remote is nil.
func zlLeader(remote func(string, int32) int32, topic string, partition int32) int32 {
	if remote == nil {
		return -1
	}
	return remote(topic, partition)
}

// forwardByLeader sends build(leader's partitions) to each leader at once
// and hands every answer (or error) to apply.
func forwardByLeader(ctx context.Context, r *Request, remotes []zlRemote, build func([]zlRemote) kmsg.Request, apply func([]zlRemote, kmsg.Response, error)) {
	byLeader := map[int32][]zlRemote{}
	for _, rm := range remotes {
		byLeader[rm.leader] = append(byLeader[rm.leader], rm)
	}
	ctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	type answer struct {
		parts []zlRemote
		resp  kmsg.Response
		err   error
	}
	answers := make(chan answer, len(byLeader))
	for leader, parts := range byLeader {
		go func() {
			resp, err := r.Env.ZoneLocal.Forward(ctx, leader, build(parts))
			answers <- answer{parts, resp, err}
		}()
	}
	for range byLeader {
		a := <-answers
		apply(a.parts, a.resp, a.err)
	}
}

// forwardTimeout bounds a forwarded ListOffsets, OffsetForLeaderEpoch or
// DeleteRecords.
const forwardTimeout = 10 * time.Second

// forwardListOffsets answers the remotes of a ListOffsets from their leaders.
func forwardListOffsets(ctx context.Context, r *Request, req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse, remotes []zlRemote) {
	forwardByLeader(ctx, r, remotes, func(parts []zlRemote) kmsg.Request {
		fr := kmsg.NewPtrListOffsetsRequest()
		fr.SetVersion(req.Version)
		fr.ReplicaID, fr.IsolationLevel = req.ReplicaID, req.IsolationLevel
		for _, p := range parts {
			rt := req.Topics[p.ti]
			if n := len(fr.Topics); n == 0 || fr.Topics[n-1].Topic != rt.Topic {
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = rt.Topic
				fr.Topics = append(fr.Topics, t)
			}
			fr.Topics[len(fr.Topics)-1].Partitions = append(fr.Topics[len(fr.Topics)-1].Partitions, rt.Partitions[p.pi])
		}
		return fr
	}, func(parts []zlRemote, kresp kmsg.Response, err error) {
		for _, p := range parts {
			sp := &resp.Topics[p.ti].Partitions[p.pi]
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			if err != nil {
				continue
			}
			for _, rt := range kresp.(*kmsg.ListOffsetsResponse).Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == resp.Topics[p.ti].Topic && rp.Partition == sp.Partition {
						*sp = rp
					}
				}
			}
		}
	})
}

// forwardOffsetForLeaderEpoch answers the remotes of an
// OffsetForLeaderEpoch from their leaders.
func forwardOffsetForLeaderEpoch(ctx context.Context, r *Request, req *kmsg.OffsetForLeaderEpochRequest, resp *kmsg.OffsetForLeaderEpochResponse, remotes []zlRemote) {
	forwardByLeader(ctx, r, remotes, func(parts []zlRemote) kmsg.Request {
		fr := kmsg.NewPtrOffsetForLeaderEpochRequest()
		fr.SetVersion(req.Version)
		fr.ReplicaID = req.ReplicaID
		for _, p := range parts {
			rt := req.Topics[p.ti]
			if n := len(fr.Topics); n == 0 || fr.Topics[n-1].Topic != rt.Topic {
				t := kmsg.NewOffsetForLeaderEpochRequestTopic()
				t.Topic = rt.Topic
				fr.Topics = append(fr.Topics, t)
			}
			fr.Topics[len(fr.Topics)-1].Partitions = append(fr.Topics[len(fr.Topics)-1].Partitions, rt.Partitions[p.pi])
		}
		return fr
	}, func(parts []zlRemote, kresp kmsg.Response, err error) {
		for _, p := range parts {
			sp := &resp.Topics[p.ti].Partitions[p.pi]
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			if err != nil {
				continue
			}
			for _, rt := range kresp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == resp.Topics[p.ti].Topic && rp.Partition == sp.Partition {
						*sp = rp
					}
				}
			}
		}
	})
}

// forwardDeleteRecords answers the remotes of a DeleteRecords from their
// leaders.
func forwardDeleteRecords(ctx context.Context, r *Request, req *kmsg.DeleteRecordsRequest, resp *kmsg.DeleteRecordsResponse, remotes []zlRemote) {
	forwardByLeader(ctx, r, remotes, func(parts []zlRemote) kmsg.Request {
		fr := kmsg.NewPtrDeleteRecordsRequest()
		fr.SetVersion(req.Version)
		fr.TimeoutMillis = req.TimeoutMillis
		for _, p := range parts {
			rt := req.Topics[p.ti]
			if n := len(fr.Topics); n == 0 || fr.Topics[n-1].Topic != rt.Topic {
				t := kmsg.NewDeleteRecordsRequestTopic()
				t.Topic = rt.Topic
				fr.Topics = append(fr.Topics, t)
			}
			fr.Topics[len(fr.Topics)-1].Partitions = append(fr.Topics[len(fr.Topics)-1].Partitions, rt.Partitions[p.pi])
		}
		return fr
	}, func(parts []zlRemote, kresp kmsg.Response, err error) {
		for _, p := range parts {
			sp := &resp.Topics[p.ti].Partitions[p.pi]
			sp.ErrorCode = kerr.NotLeaderForPartition.Code
			if err != nil {
				continue
			}
			for _, rt := range kresp.(*kmsg.DeleteRecordsResponse).Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == resp.Topics[p.ti].Topic && rp.Partition == sp.Partition {
						*sp = rp
					}
				}
			}
		}
	})
}
