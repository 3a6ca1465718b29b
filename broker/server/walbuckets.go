package server

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-dev/strata/broker/objstore"
)

// WAL credentials settings: wal.zone.<zone>.bucket.credentials.source.
const (
	CredentialsSecret  = "Secret"
	CredentialsAmbient = "Ambient"
)

// DefaultWALEnvPrefix names the variables of this broker's own zone bucket
// keys: STRATA_WAL_ACCESS_KEY_ID, STRATA_WAL_SECRET_ACCESS_KEY,
// STRATA_WAL_SESSION_TOKEN.
const DefaultWALEnvPrefix = "STRATA_WAL"

// ErrUnknownWALBucket is returned for a bucket, named in a leader's WAL
// pointer, that no zone of the zone map holds. The follower fetches that
// range inline instead.
var ErrUnknownWALBucket = errors.New("WAL bucket is in no zone of the zone map")

// WALZoneBucket is one zone's entry of the zone→bucket map:
// wal.zone.<zone>.bucket.name, .region, .endpoint, .type,
// .force.path.style, .credentials.source and .credentials.env.
type WALZoneBucket struct {
	Bucket, Region, Endpoint, Type string
	ForcePathStyle                 bool
	// CredentialsSource is Secret, Ambient or "" (unset: as Secret).
	CredentialsSource string
	// CredentialsEnv is the prefix of the variables holding the zone's key
	// pair (<prefix>_ACCESS_KEY_ID, ...). Empty with a Secret source: the
	// own bucket's credentials.
	CredentialsEnv string
}

// walZoneKey splits wal.zone.<zone>.bucket.<field>.
func walZoneKey(k string) (zone, field string, ok bool) {
	rest, ok := strings.CutPrefix(k, "wal.zone.")
	if !ok {
		return "", "", false
	}
	zone, field, ok = strings.Cut(rest, ".bucket.")
	if !ok || zone == "" || field == "" {
		return "", "", false
	}
	return zone, field, true
}

// applyWALZoneSetting sets one field of a zone's entry; known is false for
// a field it does not know (reported as an unknown key).
func applyWALZoneSetting(w *WALConfig, zone, field, v string) (known bool, err error) {
	zb := w.Zones[zone]
	switch field {
	case "name":
		zb.Bucket = v
	case "region":
		zb.Region = v
	case "endpoint":
		zb.Endpoint = v
	case "type":
		zb.Type = v
	case "force.path.style":
		on, err := strconv.ParseBool(v)
		if err != nil {
			return true, err
		}
		zb.ForcePathStyle = on
	case "credentials.source":
		if err := checkCredentialsSource(v); err != nil {
			return true, err
		}
		zb.CredentialsSource = v
	case "credentials.env":
		zb.CredentialsEnv = v
	case "resource", "credentials.secret":
		// Informational: the FastBucket and Secret the operator used.
	default:
		return false, nil
	}
	if w.Zones == nil {
		w.Zones = map[string]WALZoneBucket{}
	}
	w.Zones[zone] = zb
	return true, nil
}

func checkCredentialsSource(v string) error {
	switch v {
	case CredentialsSecret, CredentialsAmbient, "":
		return nil
	}
	return fmt.Errorf("want %s or %s", CredentialsSecret, CredentialsAmbient)
}

// WALBuckets is the resolved bucket settings of WAL replication.
type WALBuckets struct {
	// Own is this broker's zone bucket; uploads go there.
	Own objstore.Config
	// byBucket holds every zone's bucket by name, the own one included;
	// nil without a zone map.
	byBucket map[string]objstore.Config
}

// ResolveBuckets resolves the own bucket and the zone map for a broker in
// zone rack. Without wal.bucket.name the own bucket is the rack's entry of
// the zone map. Every zone bucket starts from the own bucket's settings
// (timeouts, retries, observer) with the zone's location; its credentials
// are the zone's credentials.env variables, the SDK's default chain for
// credentials.source=Ambient, or else the own bucket's.
//
// With no zone map every bucket is reached with the own bucket's endpoint,
// region and credentials (one S3 endpoint for all zones).
func (w WALConfig) ResolveBuckets(rack string) (WALBuckets, error) {
	own := w.Bucket
	own.Zone = rack
	if own.EnvPrefix == "" && own.Credentials == nil && own.CredentialsDir == "" {
		own.EnvPrefix = DefaultWALEnvPrefix
	}
	if len(w.Zones) == 0 {
		return WALBuckets{Own: own}, nil
	}
	if self, ok := w.Zones[rack]; ok {
		switch {
		case own.Bucket == "":
			own = self.config(own, rack)
		case self.Bucket != own.Bucket:
			return WALBuckets{}, fmt.Errorf("wal.bucket.name=%q but this broker's zone %s has wal.zone.%s.bucket.name=%q", own.Bucket, rack, rack, self.Bucket)
		}
	}
	zones := make([]string, 0, len(w.Zones))
	for z := range w.Zones {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	byBucket := map[string]objstore.Config{}
	owner := map[string]string{}
	for _, z := range zones {
		zb := w.Zones[z]
		if zb.Bucket == "" {
			return WALBuckets{}, fmt.Errorf("wal.zone.%s.bucket.name is not set", z)
		}
		if other, dup := owner[zb.Bucket]; dup {
			return WALBuckets{}, fmt.Errorf("bucket %q is the WAL bucket of zones %s and %s; each zone needs its own", zb.Bucket, other, z)
		}
		owner[zb.Bucket] = z
		cfg := zb.config(own, z)
		if err := cfg.Validate(); err != nil {
			return WALBuckets{}, fmt.Errorf("wal.zone.%s.bucket: %w", z, err)
		}
		byBucket[zb.Bucket] = cfg
	}
	if own.Bucket != "" {
		byBucket[own.Bucket] = own
	}
	return WALBuckets{Own: own, byBucket: byBucket}, nil
}

// config is the zone's bucket settings on top of base (retries, timeouts,
// observer and, unless the entry names its own, credentials).
func (zb WALZoneBucket) config(base objstore.Config, zone string) objstore.Config {
	cfg := base
	cfg.Bucket, cfg.Region, cfg.Endpoint, cfg.Type, cfg.ForcePathStyle, cfg.Zone =
		zb.Bucket, zb.Region, zb.Endpoint, zb.Type, zb.ForcePathStyle, zone
	switch {
	case zb.CredentialsSource == CredentialsAmbient:
		cfg.Credentials, cfg.CredentialsDir, cfg.EnvPrefix = nil, "", ""
	case zb.CredentialsEnv != "":
		cfg.Credentials, cfg.CredentialsDir, cfg.EnvPrefix = nil, "", zb.CredentialsEnv
	}
	return cfg
}

// Download returns the settings to read a bucket named in a leader's
// pointer with: its zone's entry of the zone map (ErrUnknownWALBucket when
// no zone holds it), or without a zone map the own bucket's settings with
// the bucket name replaced.
func (b WALBuckets) Download(bucket string) (objstore.Config, error) {
	if bucket == b.Own.Bucket {
		return b.Own, nil
	}
	if b.byBucket == nil {
		cfg := b.Own
		cfg.Bucket, cfg.Zone = bucket, bucketZone(b.Own, bucket)
		return cfg, nil
	}
	cfg, ok := b.byBucket[bucket]
	if !ok {
		known := make([]string, 0, len(b.byBucket))
		for name := range b.byBucket {
			known = append(known, name)
		}
		sort.Strings(known)
		return objstore.Config{}, fmt.Errorf("%w: %q (known: %s; set wal.zone.<zone>.bucket.name)", ErrUnknownWALBucket, bucket, strings.Join(known, ", "))
	}
	return cfg, nil
}

// ZoneMap reports whether downloads resolve through a zone map.
func (b WALBuckets) ZoneMap() bool { return b.byBucket != nil }

// bucketZone guesses the zone of a bucket named in a pointer when there is
// no zone map: the dev cluster and the tests name buckets
// "<prefix>-<zone>"; otherwise unknown.
func bucketZone(own objstore.Config, bucket string) string {
	if i := strings.LastIndexByte(bucket, '-'); i >= 0 {
		if j := strings.LastIndexByte(own.Bucket, '-'); j >= 0 && own.Bucket[:j] == bucket[:i] {
			return bucket[i+1:]
		}
	}
	return ""
}
