package tier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
)

// Orphans are objects in the bucket that no manifest names: left by a
// crash between a data write and the manifest write, by a deposed
// leader's upload that its successor fenced, by a failed deletion after
// retention dropped a segment, or by a failed topic deletion. They are
// garbage, never data a reader can reach (a reader only follows the newest
// manifest), and are swept once older than a grace period:
//
//   - SweepOrphans, by the partition's leader: objects under segments/ that
//     the newest manifest does not name. The newest manifest must be the
//     sweeper's own epoch's (it writes an unchanged version first if not),
//     so no older leader can name anything any more (its versions sort
//     below); a newer leader fences the sweep before it deletes. What a
//     newer leader or an in-flight upload of this one has just written is
//     younger than the grace: every writer puts its objects and then, at
//     once, the manifest that names them (an upload is bounded by the
//     store's call timeouts, far below the grace), and segment keys carry
//     the uploader's epoch, so no later manifest names an object older
//     than the grace that no manifest named before.
//   - SweepDeletedTopics, by the cluster's controller: the prefixes of
//     topics the cluster's metadata no longer knows (by topic ID, so a
//     re-created topic is another prefix), once every object in one is
//     older than the grace.

// SweepResult says what a sweep did.
type SweepResult struct {
	// Deleted is the number of objects removed.
	Deleted int
	// Young counts the orphans kept because they are younger than the
	// grace period (possibly an upload in flight).
	Young int
	// More is true when the sweep stopped at its limit with orphans left.
	More bool
}

// SweepOrphans deletes at most limit objects under the partition's
// segments/ that the newest manifest does not name and that are older
// than grace, for the leader at epoch. It returns ErrFenced when a newer
// epoch owns the manifest. Objects whose store reports no modification
// time are kept (their age is unknown).
func (p *Partition) SweepOrphans(ctx context.Context, epoch int32, grace time.Duration, limit int) (SweepResult, error) {
	p.writeMu.Lock() // no upload or retention of this process in flight
	defer p.writeMu.Unlock()
	var res SweepResult
	if p.backoff(p.t.cfg.Clock()) {
		return res, nil
	}
	m, err := p.beginWrite(ctx, epoch)
	if err != nil {
		return res, err
	}
	objs, err := p.t.store.List(ctx, p.prefix+"segments/")
	if err != nil {
		return res, fmt.Errorf("tier: list segments of %s: %w", p.prefix, err)
	}
	named := map[string]bool{}
	for _, s := range m.Segments {
		for _, k := range s.objectKeys() {
			named[p.prefix+k] = true
		}
	}
	now := p.t.cfg.Clock()
	var doomed []string
	for _, o := range objs {
		if named[o.Key] {
			continue
		}
		if o.LastModified.IsZero() || now.Sub(o.LastModified) < grace {
			res.Young++
			continue
		}
		if len(doomed) == limit {
			res.More = true
			break
		}
		doomed = append(doomed, o.Key)
	}
	if len(doomed) == 0 {
		return res, nil
	}
	if m.LeaderEpoch < epoch {
		// An older leader wrote the newest version: write ours (the same
		// content) so that nothing it might still write counts.
		if err := p.commit(ctx, m, epoch); err != nil {
			return res, err
		}
	} else if newest, err := p.newestKey(ctx); err != nil {
		return res, err
	} else if e, _, ok := parseManifestKey(newest); ok && e > epoch {
		p.mu.Lock()
		p.writerLoaded = false
		p.mu.Unlock()
		return res, fmt.Errorf("%w: %s has a manifest of epoch %d, this leader has %d", ErrFenced, p.prefix, e, epoch)
	}
	for _, k := range doomed {
		p.t.cache.forget(k)
	}
	if err := objstore.DeleteAll(ctx, p.t.store, doomed); err != nil {
		return res, fmt.Errorf("tier: sweep %s: %w", p.prefix, err)
	}
	res.Deleted = len(doomed)
	p.t.sweptObjects.Add(int64(len(doomed)))
	p.t.log.Info("swept orphaned tier objects", "prefix", p.prefix, "objects", len(doomed), "epoch", epoch)
	return res, nil
}

// objectKeys are the keys of a segment's objects below the partition
// prefix.
func (s Segment) objectKeys() []string {
	keys := []string{s.Key, s.Key + ".index", s.Key + ".timeindex"}
	if s.TxnIndexSize > 0 {
		keys = append(keys, s.Key+txnIndexSuffix)
	}
	if s.ProducerSnapshotSize > 0 {
		keys = append(keys, s.Key+producerSnapshotSuffix)
	}
	return keys
}

// ClusterPrefix is where one cluster's tier objects live.
func ClusterPrefix(cluster string) string {
	return "tier/" + strings.Trim(cluster, "/") + "/"
}

// The owner records, outside the tier/ data prefix:
//
//	tier-owner/<cluster>.json            {"clusterId": ...}: the cluster (by ID)
//	                                     whose deleted topics may be swept
//	tier-owner/<cluster>.conflict.json   written by another cluster of the same
//	                                     name: no one sweeps deleted topics
//
// Two clusters of the same name sharing a bucket share tier/<cluster>/, and
// each would take the other's topics for deleted ones. The controller
// claims the name at its first round; a cluster that finds another ID
// there writes the conflict record, which stops the owner too. Objects a
// second cluster writes before its first round are younger than the
// grace, so the owner never gets to them.
const ownerPrefix = "tier-owner/"

type owner struct {
	ClusterID string `json:"clusterId"`
	// Other is the conflicting cluster's ID (conflict record only).
	Other string `json:"otherClusterId,omitempty"`
}

// ErrNotOwner is returned by SweepDeletedTopics when another cluster of
// the same name uses the bucket.
var ErrNotOwner = errors.New("tier: another cluster of the same name uses the tier bucket")

// topicDir matches "<topic>-<32 hex digits>/", a topic's directory.
var topicDir = regexp.MustCompile(`^(.+)-([0-9a-f]{32})/$`)

// SweepDeletedTopics removes the objects of topics that no longer exist:
// the prefixes below the cluster's whose topic ID live does not contain,
// and only when every object in one is older than grace (manifests first,
// as DeleteAll). At most limit objects are deleted per call (More says
// some are left). The first call records clusterID as the owner of the
// cluster name in the bucket (checkOwner); while another cluster of the
// same name uses the bucket, nothing is swept (ErrNotOwner).
// Called by one broker of the cluster (the controller), with live taken
// from metadata that has been loaded.
func (t *Tier) SweepDeletedTopics(ctx context.Context, clusterID string, live map[string]bool, grace time.Duration, limit int) (SweepResult, error) {
	var res SweepResult
	root := ClusterPrefix(t.cfg.Cluster)
	if err := t.checkOwner(ctx, clusterID); err != nil {
		return res, err
	}
	dirs, err := objstore.ListPrefixes(ctx, t.store, root)
	if err != nil {
		return res, fmt.Errorf("tier: list topics below %s: %w", root, err)
	}
	now := t.cfg.Clock()
	var errs []error
	for _, dir := range dirs {
		mt := topicDir.FindStringSubmatch(dir[len(root):])
		if mt == nil || live[mt[2]] {
			continue
		}
		if res.Deleted >= limit {
			res.More = true
			break
		}
		objs, err := t.store.List(ctx, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("tier: list %s: %w", dir, err))
			continue
		}
		young := false
		for _, o := range objs {
			if o.LastModified.IsZero() || now.Sub(o.LastModified) < grace {
				young = true
				break
			}
		}
		if young {
			res.Young++
			continue
		}
		var manifests, rest []string
		for _, o := range objs {
			if strings.Contains(o.Key[len(dir):], "/manifest/") {
				manifests = append(manifests, o.Key)
			} else {
				rest = append(rest, o.Key)
			}
		}
		sort.Strings(manifests)
		keys := append(manifests, rest...)
		if n := limit - res.Deleted; len(keys) > n {
			keys, res.More = keys[:n], true
		}
		for _, k := range keys {
			t.cache.forget(k)
		}
		if err := objstore.DeleteAll(ctx, t.store, keys); err != nil {
			errs = append(errs, fmt.Errorf("tier: sweep deleted topic %s: %w", dir, err))
			continue
		}
		res.Deleted += len(keys)
		t.sweptObjects.Add(int64(len(keys)))
		t.log.Info("swept a deleted topic's tier objects", "topic", mt[1], "topicId", mt[2], "objects", len(keys))
	}
	return res, errors.Join(errs...)
}

// checkOwner claims the cluster name for clusterID, or checks that it
// holds it and that no other cluster of the name showed up since.
func (t *Tier) checkOwner(ctx context.Context, clusterID string) error {
	if clusterID == "" {
		return fmt.Errorf("tier: no cluster ID yet")
	}
	name := strings.Trim(t.cfg.Cluster, "/")
	key, conflict := ownerPrefix+name+".json", ownerPrefix+name+".conflict.json"
	if !t.owner.Load() {
		got, err := t.store.Get(ctx, key, 0, -1)
		if errors.Is(err, objstore.ErrNotFound) {
			raw, err := json.Marshal(owner{ClusterID: clusterID})
			if err != nil {
				return err
			}
			if err = objstore.PutIfAbsent(ctx, t.store, key, raw); err != nil && !errors.Is(err, objstore.ErrExists) {
				return fmt.Errorf("tier: record the owner of cluster name %q: %w", name, err)
			}
			got, err = t.store.Get(ctx, key, 0, -1) // ours, or another broker's that was first
			if err != nil {
				return fmt.Errorf("tier: read %s: %w", key, err)
			}
		} else if err != nil {
			return fmt.Errorf("tier: read %s: %w", key, err)
		}
		var o owner
		if err := json.Unmarshal(got, &o); err != nil {
			return fmt.Errorf("tier: %s: %w", key, err)
		}
		if o.ClusterID != clusterID {
			raw, _ := json.Marshal(owner{ClusterID: o.ClusterID, Other: clusterID})
			if err := t.store.Put(ctx, conflict, raw); err != nil {
				return fmt.Errorf("tier: record the conflict on cluster name %q: %w", name, err)
			}
			return fmt.Errorf("%w: %s names cluster %s, this is %s (give the clusters different names)", ErrNotOwner, key, o.ClusterID, clusterID)
		}
		t.owner.Store(true)
	}
	if got, err := t.store.Get(ctx, conflict, 0, -1); err == nil {
		var o owner
		_ = json.Unmarshal(got, &o)
		return fmt.Errorf("%w: %s: cluster %s uses the name %q too (give the clusters different names, then delete %s)", ErrNotOwner, conflict, o.Other, name, conflict)
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("tier: read %s: %w", conflict, err)
	}
	return nil
}
