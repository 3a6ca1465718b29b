package cost

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Prices is the price table, in US dollars. Per-GB prices use decimal
// gigabytes (1e9 bytes), as cloud bills do.
type Prices struct {
	// PutPer1000 and GetPer1000 are the request prices of the fast tier
	// (per 1,000 requests).
	PutPer1000 float64
	GetPer1000 float64
	// UploadPerGB and RetrievalPerGB are charged for the bytes of one
	// request beyond IncludedBytesPerRequest (S3 Express One Zone charges
	// data transfer only for the part of a request above 512 KB).
	UploadPerGB             float64
	RetrievalPerGB          float64
	IncludedBytesPerRequest int64
	// CrossZoneOutPerGB and CrossZoneInPerGB: a byte crossing a zone
	// boundary is charged out in the sending zone and in in the receiving
	// one.
	CrossZoneOutPerGB float64
	CrossZoneInPerGB  float64
	// FastCrossZoneReadPerGB is charged per GB a GET returns from a fast
	// bucket in another zone, on top of the GET's own price: a follower's
	// download of a leader's object, a leader's read of a zone-local
	// produce object (docs/wal.md "Zone-local produce"). 0 by default:
	// AWS bills no data transfer between S3 and EC2 in the same Region,
	// S3 Express One Zone directory buckets read from another Availability
	// Zone included (Amazon S3 pricing, "Data transfer": "Data transferred
	// ... from an Amazon S3 bucket to any AWS service(s) within the same
	// AWS Region as the S3 bucket" is free; S3 Express One Zone bills its
	// request and per-GB upload/retrieval charges only, which are
	// PutPer1000/GetPer1000/UploadPerGB/RetrievalPerGB). Set it for a store
	// whose cross-zone reads are billed as transfer (a self-hosted S3 in
	// one zone, another cloud's zonal storage).
	FastCrossZoneReadPerGB float64
}

// Default is the price table of issue #15: S3 Express One Zone (PUT
// $0.00113/1k, GET $0.00003/1k, upload $0.0032/GB and retrieval
// $0.0006/GB beyond 512 KB per request) and AWS cross-AZ transfer ($0.01/GB
// each direction).
func Default() Prices {
	return Prices{
		PutPer1000: 0.00113, GetPer1000: 0.00003,
		UploadPerGB: 0.0032, RetrievalPerGB: 0.0006, IncludedBytesPerRequest: 512 << 10,
		CrossZoneOutPerGB: 0.01, CrossZoneInPerGB: 0.01,
	}
}

const gb = 1e9

// Put is the price of one PUT of n bytes.
func (p Prices) Put(n int64) float64 {
	return p.PutPer1000/1000 + float64(max(n-p.IncludedBytesPerRequest, 0))*p.UploadPerGB/gb
}

// Get is the price of one GET returning n bytes.
func (p Prices) Get(n int64) float64 {
	return p.GetPer1000/1000 + float64(max(n-p.IncludedBytesPerRequest, 0))*p.RetrievalPerGB/gb
}

// FastCrossZoneRead is the transfer price of n bytes a GET returns from a
// fast bucket in another zone (besides Get).
func (p Prices) FastCrossZoneRead(n int64) float64 {
	return float64(n) * p.FastCrossZoneReadPerGB / gb
}

// CrossZone is the price of n bytes sent from one zone to another (out
// plus in).
func (p Prices) CrossZone(n int64) float64 {
	return float64(n) * (p.CrossZoneOutPerGB + p.CrossZoneInPerGB) / gb
}

// NoticeBytes is what one WAL object sends across zones per reader
// besides its GET: the replica fetch that carries the object's pointers to
// a follower in another zone and the follower's request (its framing, a
// pointer of ~100 B per partition in the object). Measured by make
// bench-wal (RF 3, 12 partitions, 4 per object): 290 B per GET at 2 MB/s,
// 580 B at 10 MB/s (the WAL path's cross-zone bytes over the GETs);
// priced here at the larger figure, rounded up.
const NoticeBytes = 600

// Object is the price of replicating one WAL object of size bytes to
// readers followers in other zones: one PUT, one GET per reader of its
// share of the object (a follower's chunks are adjacent: one ranged GET),
// and per reader the replica fetch that tells it the pointers across the
// zone boundary (NoticeBytes). copies is the number of cross-zone copies
// classic replication would send of the object's bytes (the follower
// replicas in other zones, summed over its partitions); each reader GETs
// copies/readers of the size.
func (p Prices) Object(size int64, readers int, copies float64) float64 {
	c := p.Put(size)
	if readers > 0 {
		share := int64(float64(size) * copies / float64(readers))
		c += float64(readers) * (p.Get(share) + p.FastCrossZoneRead(share) + p.CrossZone(NoticeBytes))
	}
	return c
}

// ObjectTerms are the parts of Object's price, for docs and tests.
type ObjectTerms struct {
	// Put: the PUT and its bytes beyond the included ones; Gets: the
	// readers' GETs and their bytes beyond the included ones; Notices:
	// the pointer-carrying replica fetches across zones.
	Put, Gets, Notices float64
}

// Terms splits Object(size, readers, copies) into its parts.
func (p Prices) Terms(size int64, readers int, copies float64) ObjectTerms {
	t := ObjectTerms{Put: p.Put(size)}
	if readers > 0 {
		share := int64(float64(size) * copies / float64(readers))
		t.Gets = float64(readers) * (p.Get(share) + p.FastCrossZoneRead(share))
		t.Notices = float64(readers) * p.CrossZone(NoticeBytes)
	}
	return t
}

// Readers is the number of GETs an object needs when each byte has copies
// follower copies in other zones: at least one per copy (rounded up).
func Readers(copies float64) int {
	return max(int(math.Ceil(copies-1e-9)), 0)
}

// BreakEvenBytes is the object size at which a WAL object costs what
// classic replication of its bytes costs, for copies cross-zone follower
// copies per byte (2 with RF 3 in 3 zones): smaller objects cost more than
// classic. math.MaxInt64 when no size breaks even (no follower in another
// zone, or transfer cheaper than the per-byte object charges).
func (p Prices) BreakEvenBytes(copies float64) int64 {
	readers := Readers(copies)
	perByteClassic := copies * (p.CrossZoneOutPerGB + p.CrossZoneInPerGB) / gb
	if readers == 0 || perByteClassic <= 0 {
		return math.MaxInt64
	}
	// Below the included bytes a request has only its fixed price.
	fixed := p.Object(0, readers, copies)
	s := fixed / perByteClassic
	if s <= float64(p.IncludedBytesPerRequest) {
		return int64(math.Ceil(s))
	}
	// Beyond them every byte pays the upload and retrieval rates too:
	// search the size (the cost difference grows monotonically with size).
	lo, hi := p.IncludedBytesPerRequest, int64(1)<<50
	if p.Object(hi, readers, copies) > p.CrossZone(hi)*copies {
		return math.MaxInt64
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if p.Object(mid, readers, copies) <= p.CrossZone(mid)*copies {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// ForwardNoticeBytes is what one forwarded object of zone-local produce
// sends across zones besides its bytes: the inter-broker Produce naming
// it (a reference of ~100 B per partition, framing) and its answer.
// Measured by strata bench (wal+latency+zonelocal, 12 partitions):
// 0.027 cross-zone bytes per produced byte at ~14 KB per forwarded
// request, ~380 B; priced here rounded up.
const ForwardNoticeBytes = 400

// Forward is the price of handing size bytes of zone-local produce to
// their leaders through one object of the forwarder's zone bucket: its
// PUT, the leaders' GET of it (one, covering their ranges), the GET's
// transfer when the leader is in another zone, and the reference sent
// across zones (ForwardNoticeBytes).
func (p Prices) Forward(size int64) float64 {
	return p.Put(size) + p.Get(size) + p.FastCrossZoneRead(size) + p.CrossZone(ForwardNoticeBytes)
}

// ForwardBreakEvenBytes is the forwarded object size at which the bucket
// path of zone-local produce costs what sending its bytes across zones
// (inline, as a plain produce does) costs: smaller objects cost more than
// the transfer they save. math.MaxInt64 when no size breaks even.
func (p Prices) ForwardBreakEvenBytes() int64 {
	if p.CrossZone(1<<50) <= p.Forward(1<<50) {
		return math.MaxInt64
	}
	lo, hi := int64(0), int64(1)<<50
	for lo < hi {
		mid := lo + (hi-lo)/2
		if p.Forward(mid) <= p.CrossZone(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Config keys of the price table (broker config, rendered by the operator
// from KafkaCluster.spec.cost.prices). Values are US dollars, except the
// included bytes.
const (
	KeyPutPer1000              = "cost.price.put.per.1000"
	KeyGetPer1000              = "cost.price.get.per.1000"
	KeyUploadPerGB             = "cost.price.upload.per.gb"
	KeyRetrievalPerGB          = "cost.price.retrieval.per.gb"
	KeyIncludedBytesPerRequest = "cost.price.request.included.bytes"
	KeyCrossZoneOutPerGB       = "cost.price.cross.zone.out.per.gb"
	KeyCrossZoneInPerGB        = "cost.price.cross.zone.in.per.gb"
	KeyFastCrossZoneReadPerGB  = "cost.price.fast.cross.zone.read.per.gb"
)

func (p *Prices) fields() map[string]*float64 {
	return map[string]*float64{
		KeyPutPer1000: &p.PutPer1000, KeyGetPer1000: &p.GetPer1000,
		KeyUploadPerGB: &p.UploadPerGB, KeyRetrievalPerGB: &p.RetrievalPerGB,
		KeyCrossZoneOutPerGB: &p.CrossZoneOutPerGB, KeyCrossZoneInPerGB: &p.CrossZoneInPerGB,
		KeyFastCrossZoneReadPerGB: &p.FastCrossZoneReadPerGB,
	}
}

// Keys lists the price table's config keys, sorted.
func Keys() []string {
	var p Prices
	out := []string{KeyIncludedBytesPerRequest}
	for k := range p.fields() {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SetKey sets the price a config key names. known is false for a key that
// is not a price key; a value that is not a finite number ≥ 0 is an error.
func (p *Prices) SetKey(key, value string) (known bool, err error) {
	if key == KeyIncludedBytesPerRequest {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 {
			return true, fmt.Errorf("want a number of bytes ≥ 0")
		}
		p.IncludedBytesPerRequest = n
		return true, nil
	}
	f, ok := p.fields()[key]
	if !ok {
		return false, nil
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return true, fmt.Errorf("want a price in US dollars ≥ 0 (e.g. 0.00113)")
	}
	*f = v
	return true, nil
}
