package controllers

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

// The WAL retention sweeper's pure decisions. The FastBucket reconciler
// lists wal/ in the bucket, asks PlanSweep what to delete, and keeps the
// bucket's lifecycle rule as MergeLifecycleRules says.

const (
	// minSweepInterval and maxSweepInterval bound how often a bucket is
	// swept: half the shortest retention of the clusters using it.
	minSweepInterval = time.Second
	maxSweepInterval = time.Minute

	// LifecycleRuleID names the operator's rule in a bucket's lifecycle
	// configuration; rules with other IDs are never changed.
	LifecycleRuleID = "strata-wal-expiration"
)

// WALRetention returns the wal.retention.ms a cluster's brokers run with:
// spec.config's override when present, else spec.wal.retention (default
// 1h), exactly as RenderBrokerConfig writes it. ok is false when the
// override does not parse as a positive number of milliseconds; the
// sweeper then deletes nothing of the cluster.
func WALRetention(kc *strata.KafkaCluster) (d time.Duration, ok bool) {
	if v, set := kc.Spec.Config["wal.retention.ms"]; set {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	return durationOr(kc.Spec.WAL.Retention, time.Hour), true
}

// ClusterRetention is one cluster using a bucket and its WAL retention.
type ClusterRetention struct {
	// Name is the cluster's name in WAL object keys, WALClusterName:
	// <namespace>/<name>.
	Name string
	// Retention is meaningful only when Known.
	Retention time.Duration
	Known     bool
}

// ClustersUsingBucket returns, sorted by name, the clusters among kcs
// whose zones reference the FastBucket fb (same namespace), with their
// retention.
func ClustersUsingBucket(fb *strata.FastBucket, kcs []strata.KafkaCluster) []ClusterRetention {
	var out []ClusterRetention
	for i := range kcs {
		kc := &kcs[i]
		if kc.Namespace != fb.Namespace {
			continue
		}
		for _, z := range kc.Spec.Zones {
			if z.FastBucketRef != nil && z.FastBucketRef.Name == fb.Name {
				d, ok := WALRetention(kc)
				out = append(out, ClusterRetention{Name: WALClusterName(kc), Retention: d, Known: ok})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SweepInterval is how long to wait between sweeps of a bucket: half the
// shortest known retention, within [1s, 1m]; 1m when none is known.
func SweepInterval(clusters []ClusterRetention) time.Duration {
	d := maxSweepInterval
	for _, c := range clusters {
		if c.Known {
			d = min(d, c.Retention/2)
		}
	}
	return max(d, minSweepInterval)
}

// SweepPlan is what one sweep of a bucket decided.
type SweepPlan struct {
	// Delete are the WAL objects older than their cluster's retention, in
	// key order.
	Delete []objstore.ObjectInfo
	// NeedCreated are objects that would be candidates but have no
	// modification time in the listing: their age must come from their
	// header (wal.ReadHeader) before they can be judged.
	NeedCreated []objstore.ObjectInfo
	// Objects and Bytes count everything under wal/ that stays.
	Objects, Bytes int64
	// Clusters counts, per cluster using the bucket, its objects in the
	// bucket's zone that stay.
	Clusters []strata.FastBucketWALCluster
}

// PlanSweep decides a sweep of one zone's bucket. listing is everything
// under wal/; clusters are the clusters using the bucket. An object is
// deleted only when all of these hold:
//   - its key is a WAL object key (wal.ParseKey) wal/<cluster>/<zone>/...
//     with <zone> the bucket's zone and <cluster> one of clusters;
//   - that cluster's retention is known;
//   - its age at now — from the listing's modification time, else from
//     created (header created-at, by key) — is at least the retention.
//
// Objects without a modification time and without an entry in created
// are returned in NeedCreated and kept.
func PlanSweep(listing []objstore.ObjectInfo, zone string, clusters []ClusterRetention, created map[string]time.Time, now time.Time) SweepPlan {
	var plan SweepPlan
	idx := map[string]int{}
	for i, c := range clusters {
		idx[c.Name] = i
		cs := strata.FastBucketWALCluster{Name: c.Name}
		if c.Known {
			cs.Retention = &metav1.Duration{Duration: c.Retention}
		}
		plan.Clusters = append(plan.Clusters, cs)
	}
	for _, o := range listing {
		del := false
		ci := -1
		if k, err := wal.ParseKey(o.Key); err == nil && k.Zone == zone {
			if i, ok := idx[k.Cluster]; ok {
				ci = i
				c := clusters[i]
				if c.Known {
					t := o.LastModified
					if t.IsZero() {
						t = created[o.Key]
					}
					switch {
					case t.IsZero():
						plan.NeedCreated = append(plan.NeedCreated, o)
					case now.Sub(t) >= c.Retention:
						del = true
					}
				}
			}
		}
		if del {
			plan.Delete = append(plan.Delete, o)
			continue
		}
		plan.Objects++
		plan.Bytes += o.Size
		if ci >= 0 {
			plan.Clusters[ci].Objects++
			plan.Clusters[ci].Bytes += o.Size
		}
	}
	sort.Slice(plan.Delete, func(i, j int) bool { return plan.Delete[i].Key < plan.Delete[j].Key })
	return plan
}

// LifecycleDays is the expiration of the wal/ lifecycle rule:
// ceil(longest retention in days) + 1, at least 1. ok is false when no
// cluster uses the bucket or one's retention is unknown: then the rule is
// left as it is rather than set too short.
func LifecycleDays(clusters []ClusterRetention) (days int32, ok bool) {
	if len(clusters) == 0 {
		return 0, false
	}
	var longest time.Duration
	for _, c := range clusters {
		if !c.Known {
			return 0, false
		}
		longest = max(longest, c.Retention)
	}
	const day = 24 * time.Hour
	n := int64(longest / day)
	if longest%day != 0 {
		n++
	}
	n++
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return int32(max(n, 1)), true
}

// WALLifecycleRule is the operator's rule: expire objects under wal/
// after days. Directory buckets (S3 Express) accept it too: a prefix
// filter ending in '/', an expiration in days.
func WALLifecycleRule(days int32) s3types.LifecycleRule {
	return s3types.LifecycleRule{
		ID:         strPtr(LifecycleRuleID),
		Status:     s3types.ExpirationStatusEnabled,
		Filter:     &s3types.LifecycleRuleFilter{Prefix: strPtr(wal.KeyPrefix)},
		Expiration: &s3types.LifecycleExpiration{Days: &days},
	}
}

// MergeLifecycleRules returns the bucket's rules with the operator's rule
// set to expire wal/ after days (replacing a rule with its ID, keeping
// every other rule in order), and whether that changes anything.
func MergeLifecycleRules(existing []s3types.LifecycleRule, days int32) ([]s3types.LifecycleRule, bool) {
	want := WALLifecycleRule(days)
	out := make([]s3types.LifecycleRule, 0, len(existing)+1)
	found, changed := false, false
	for _, r := range existing {
		if r.ID != nil && *r.ID == LifecycleRuleID {
			if found {
				changed = true // a duplicate of ours: drop it
				continue
			}
			found = true
			if !isWALRule(r, days) {
				changed = true
			}
			out = append(out, want)
			continue
		}
		out = append(out, r)
	}
	if !found {
		out = append(out, want)
		changed = true
	}
	return out, changed
}

func isWALRule(r s3types.LifecycleRule, days int32) bool {
	return r.Status == s3types.ExpirationStatusEnabled &&
		r.Filter != nil && r.Filter.Prefix != nil && *r.Filter.Prefix == wal.KeyPrefix && r.Filter.And == nil &&
		r.Filter.Tag == nil && r.Filter.ObjectSizeGreaterThan == nil && r.Filter.ObjectSizeLessThan == nil &&
		r.Prefix == nil && r.Expiration != nil && r.Expiration.Days != nil && *r.Expiration.Days == days &&
		r.Expiration.Date == nil && r.Transitions == nil && r.NoncurrentVersionExpiration == nil &&
		r.NoncurrentVersionTransitions == nil && r.AbortIncompleteMultipartUpload == nil
}

func strPtr(s string) *string { return &s }

func describeClusters(clusters []ClusterRetention) string {
	s := ""
	for i, c := range clusters {
		if i > 0 {
			s += ", "
		}
		if c.Known {
			s += fmt.Sprintf("%s (%s)", c.Name, c.Retention)
		} else {
			s += c.Name + " (retention unknown)"
		}
	}
	return s
}
