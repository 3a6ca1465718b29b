package server

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/objstore"
)

// zoneMapSettings is an operator-style zone map of three zones, each on
// its own S3-compatible endpoint; zone c uses ambient credentials, zone b
// another Secret's variables.
func zoneMapSettings() map[string]string {
	return map[string]string{
		"wal.enable":                                    "true",
		"wal.bucket.name":                               "wal-a",
		"wal.bucket.region":                             "us-east-1",
		"wal.bucket.endpoint":                           "http://s3-a:9000",
		"wal.bucket.force.path.style":                   "true",
		"wal.bucket.resource":                           "fb-a",
		"wal.bucket.credentials.source":                 "Secret",
		"wal.bucket.credentials.secret":                 "keys-a",
		"wal.zone.a.bucket.name":                        "wal-a",
		"wal.zone.a.bucket.region":                      "us-east-1",
		"wal.zone.a.bucket.endpoint":                    "http://s3-a:9000",
		"wal.zone.a.bucket.type":                        "S3",
		"wal.zone.a.bucket.force.path.style":            "true",
		"wal.zone.a.bucket.credentials.source":          "Secret",
		"wal.zone.a.bucket.credentials.env":             "STRATA_WAL",
		"wal.zone.a.bucket.resource":                    "fb-a",
		"wal.zone.us-east-1b.bucket.name":               "wal-b",
		"wal.zone.us-east-1b.bucket.region":             "eu-west-1",
		"wal.zone.us-east-1b.bucket.endpoint":           "http://s3-b:9000",
		"wal.zone.us-east-1b.bucket.type":               "S3",
		"wal.zone.us-east-1b.bucket.force.path.style":   "true",
		"wal.zone.us-east-1b.bucket.credentials.source": "Secret",
		"wal.zone.us-east-1b.bucket.credentials.secret": "keys-b",
		"wal.zone.us-east-1b.bucket.credentials.env":    "STRATA_WAL_ZONE_US_EAST_1B",
		"wal.zone.c.bucket.name":                        "wal-c--use1-az6--x-s3",
		"wal.zone.c.bucket.region":                      "us-east-1",
		"wal.zone.c.bucket.endpoint":                    "",
		"wal.zone.c.bucket.type":                        "S3Express",
		"wal.zone.c.bucket.force.path.style":            "false",
		"wal.zone.c.bucket.credentials.source":          "Ambient",
	}
}

func TestApplySettingsWALZoneMap(t *testing.T) {
	cfg := DefaultConfig()
	unknown, err := ApplySettings(&cfg, zoneMapSettings())
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) > 0 {
		t.Fatalf("unknown keys %v", unknown)
	}
	w := cfg.Cluster.WAL
	if !w.Enable || w.Bucket.Bucket != "wal-a" || w.Bucket.Endpoint != "http://s3-a:9000" || !w.Bucket.ForcePathStyle {
		t.Fatalf("own bucket = %+v (enable %v)", w.Bucket, w.Enable)
	}
	want := map[string]WALZoneBucket{
		"a": {Bucket: "wal-a", Region: "us-east-1", Endpoint: "http://s3-a:9000", Type: "S3", ForcePathStyle: true,
			CredentialsSource: "Secret", CredentialsEnv: "STRATA_WAL"},
		"us-east-1b": {Bucket: "wal-b", Region: "eu-west-1", Endpoint: "http://s3-b:9000", Type: "S3", ForcePathStyle: true,
			CredentialsSource: "Secret", CredentialsEnv: "STRATA_WAL_ZONE_US_EAST_1B"},
		"c": {Bucket: "wal-c--use1-az6--x-s3", Region: "us-east-1", Type: "S3Express", CredentialsSource: "Ambient"},
	}
	if !reflect.DeepEqual(w.Zones, want) {
		t.Fatalf("zones = %+v\nwant    %+v", w.Zones, want)
	}
}

func TestApplySettingsWALKeys(t *testing.T) {
	tests := []struct {
		name        string
		kv          map[string]string
		wantEnable  bool
		wantUnknown []string
		wantErr     string
	}{
		{name: "wal.enable", kv: map[string]string{"wal.enable": "true"}, wantEnable: true},
		{name: "deprecated wal.enabled alone", kv: map[string]string{"wal.enabled": "true"}, wantEnable: true},
		{name: "wal.enable wins over wal.enabled", kv: map[string]string{"wal.enable": "false", "wal.enabled": "true"}},
		{name: "bad wal.enabled", kv: map[string]string{"wal.enabled": "yes please"}, wantErr: `wal.enabled="yes please"`},
		{name: "unknown zone field is a warning", kv: map[string]string{"wal.zone.a.bucket.nmae": "x", "wal.zone..bucket.name": "y", "wal.zone.a.name": "z"},
			wantUnknown: []string{"wal.zone..bucket.name", "wal.zone.a.bucket.nmae", "wal.zone.a.name"}},
		{name: "bad zone path style", kv: map[string]string{"wal.zone.a.bucket.force.path.style": "maybe"}, wantErr: "wal.zone.a.bucket.force.path.style"},
		{name: "bad zone credentials source", kv: map[string]string{"wal.zone.a.bucket.credentials.source": "Vault"}, wantErr: "want Secret or Ambient"},
		{name: "bad own credentials source", kv: map[string]string{"wal.bucket.credentials.source": "secret"}, wantErr: "want Secret or Ambient"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			unknown, err := ApplySettings(&cfg, tt.kv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Cluster.WAL.Enable != tt.wantEnable {
				t.Errorf("Enable = %v, want %v", cfg.Cluster.WAL.Enable, tt.wantEnable)
			}
			if !reflect.DeepEqual(unknown, tt.wantUnknown) {
				t.Errorf("unknown = %v, want %v", unknown, tt.wantUnknown)
			}
		})
	}
}

func TestResolveWALBuckets(t *testing.T) {
	parsed := func(t *testing.T, kv map[string]string) WALConfig {
		t.Helper()
		cfg := DefaultConfig()
		if _, err := ApplySettings(&cfg, kv); err != nil {
			t.Fatal(err)
		}
		return cfg.Cluster.WAL
	}
	t.Run("zone map: each bucket with its zone's endpoint and credentials", func(t *testing.T) {
		w := parsed(t, zoneMapSettings())
		w.Bucket.Credentials = &objstore.StaticCredentials{AccessKeyID: "own", SecretAccessKey: "own"}
		w.Bucket.MaxAttempts = 1
		b, err := w.ResolveBuckets("a")
		if err != nil {
			t.Fatal(err)
		}
		if !b.ZoneMap() || b.Own.Bucket != "wal-a" || b.Own.Zone != "a" || b.Own.Credentials == nil {
			t.Fatalf("own = %+v", b.Own)
		}
		tests := []struct {
			bucket, zone, endpoint, region, typ, env string
			pathStyle, ownCreds                      bool
		}{
			{"wal-a", "a", "http://s3-a:9000", "us-east-1", "", "", true, true},
			{"wal-b", "us-east-1b", "http://s3-b:9000", "eu-west-1", "S3", "STRATA_WAL_ZONE_US_EAST_1B", true, false},
			{"wal-c--use1-az6--x-s3", "c", "", "us-east-1", "S3Express", "", false, false},
		}
		for _, tt := range tests {
			c, err := b.Download(tt.bucket)
			if err != nil {
				t.Fatalf("Download(%s): %v", tt.bucket, err)
			}
			if c.Bucket != tt.bucket || c.Zone != tt.zone || c.Endpoint != tt.endpoint || c.Region != tt.region ||
				c.Type != tt.typ || c.EnvPrefix != tt.env || c.ForcePathStyle != tt.pathStyle || (c.Credentials != nil) != tt.ownCreds {
				t.Errorf("Download(%s) = %+v", tt.bucket, c)
			}
			if c.MaxAttempts != 1 {
				t.Errorf("Download(%s) did not keep the own bucket's retry settings: %+v", tt.bucket, c)
			}
		}
		_, err = b.Download("wal-d")
		if !errors.Is(err, ErrUnknownWALBucket) || !strings.Contains(err.Error(), `"wal-d"`) {
			t.Fatalf("unknown bucket: err = %v", err)
		}
	})
	t.Run("no zone map: today's behaviour", func(t *testing.T) {
		w := parsed(t, map[string]string{"wal.enable": "true", "wal.bucket.name": "wal-a", "wal.bucket.region": "r", "wal.bucket.endpoint": "http://one:9000"})
		b, err := w.ResolveBuckets("a")
		if err != nil {
			t.Fatal(err)
		}
		if b.ZoneMap() || b.Own.EnvPrefix != DefaultWALEnvPrefix {
			t.Fatalf("own = %+v", b.Own)
		}
		c, err := b.Download("wal-b")
		if err != nil {
			t.Fatal(err)
		}
		if c.Bucket != "wal-b" || c.Zone != "b" || c.Endpoint != "http://one:9000" || c.EnvPrefix != DefaultWALEnvPrefix {
			t.Fatalf("Download(wal-b) = %+v", c)
		}
	})
	t.Run("own bucket from the zone map", func(t *testing.T) {
		kv := zoneMapSettings()
		for k := range kv {
			if strings.HasPrefix(k, "wal.bucket.") {
				delete(kv, k)
			}
		}
		b, err := parsed(t, kv).ResolveBuckets("us-east-1b")
		if err != nil {
			t.Fatal(err)
		}
		if b.Own.Bucket != "wal-b" || b.Own.Endpoint != "http://s3-b:9000" || b.Own.Region != "eu-west-1" || b.Own.Zone != "us-east-1b" {
			t.Fatalf("own = %+v", b.Own)
		}
	})
	for _, bad := range []struct {
		name, rack, want string
		kv               map[string]string
	}{
		{"own bucket differs from its zone's", "a", `wal.bucket.name="wal-x"`, map[string]string{"wal.bucket.name": "wal-x"}},
		{"zone without a name", "a", "wal.zone.d.bucket.name is not set", map[string]string{"wal.zone.d.bucket.region": "r"}},
		{"zone without a region", "a", "wal.zone.d.bucket: objstore: region is required", map[string]string{"wal.zone.d.bucket.name": "wal-d", "wal.zone.d.bucket.region": ""}},
		{"two zones, one bucket", "a", `bucket "wal-b" is the WAL bucket of zones`, map[string]string{"wal.zone.d.bucket.name": "wal-b", "wal.zone.d.bucket.region": "r"}},
		{"bad type", "a", "unknown bucket type", map[string]string{"wal.zone.us-east-1b.bucket.type": "GCS"}},
	} {
		t.Run(bad.name, func(t *testing.T) {
			kv := zoneMapSettings()
			for k, v := range bad.kv {
				kv[k] = v
			}
			_, err := parsed(t, kv).ResolveBuckets(bad.rack)
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err = %v, want one containing %q", err, bad.want)
			}
		})
	}
}

func TestExpandEnv(t *testing.T) {
	t.Setenv("POD_NAME", "demo-zone-a-2")
	t.Setenv("EMPTY_VAR", "")
	cfg := DefaultConfig()
	if _, err := ApplySettings(&cfg, map[string]string{"advertised.listeners": "PLAINTEXT://${POD_NAME}.demo-brokers.kafka.svc:9092"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Broker.Host != "demo-zone-a-2.demo-brokers.kafka.svc" || cfg.Broker.Port != 9092 {
		t.Fatalf("advertised %s:%d", cfg.Broker.Host, cfg.Broker.Port)
	}
	for _, bad := range []string{"PLAINTEXT://${NOT_SET_ANYWHERE_4711}.x:9092", "PLAINTEXT://${EMPTY_VAR}.x:9092", "PLAINTEXT://${POD_NAME.x:9092"} {
		c := DefaultConfig()
		if _, err := ApplySettings(&c, map[string]string{"advertised.listeners": bad}); err == nil {
			t.Errorf("advertised.listeners=%s accepted", bad)
		}
	}
}
