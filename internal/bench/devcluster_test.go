package bench

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseReadyLine(t *testing.T) {
	tests := []struct {
		line      string
		ok        bool
		err       bool
		bootstrap []string
		metrics   []string
	}{
		{line: "strata dev ready: bootstrap=127.0.0.1:9092", ok: true, bootstrap: []string{"127.0.0.1:9092"}},
		{
			line:      "strata dev ready: bootstrap=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3 metrics=http://127.0.0.1:4/metrics,127.0.0.1:5,http://127.0.0.1:6/metrics zones=a,b,c",
			ok:        true,
			bootstrap: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"},
			metrics:   []string{"http://127.0.0.1:4/metrics", "http://127.0.0.1:5/metrics", "http://127.0.0.1:6/metrics"},
		},
		{line: "2026-01-01 INFO broker started", ok: false},
		{line: "strata dev ready: zones=a", ok: true, err: true},
	}
	for _, tt := range tests {
		rl, ok, err := ParseReadyLine(tt.line)
		if ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("%q: ok %v err %v, want ok %v err %v", tt.line, ok, err, tt.ok, tt.err)
			continue
		}
		if !reflect.DeepEqual(rl.Bootstrap, tt.bootstrap) || !reflect.DeepEqual(rl.Metrics, tt.metrics) {
			t.Errorf("%q: bootstrap %v metrics %v, want %v %v", tt.line, rl.Bootstrap, rl.Metrics, tt.bootstrap, tt.metrics)
		}
	}
}

const helpClassicOnly = `Flags:
      --brokers-per-zone int        brokers in each zone (default 1)
      --listen string               Kafka listener address host:port
      --metrics-listen string       HTTP address for /metrics
      --zones strings               zones (default [a,b,c])
`

const helpWithWAL = helpClassicOnly + `      --replication string   classic or wal
      --s3-put-latency duration   injected PUT latency
      --s3-get-latency duration   injected GET latency
`

const helpWithZoneLatency = helpWithWAL + `      --zone-latency duration   one-way delay on each direction of replica connections between zones
`

const helpWithSecurity = helpWithZoneLatency + `      --security                 serve SASL_SSL with SCRAM only
`

func TestDevArgs(t *testing.T) {
	opts := ClusterOptions{S3PutLatency: 5 * time.Millisecond, S3GetLatency: 3 * time.Millisecond, ZoneLatency: time.Millisecond}
	tests := []struct {
		name      string
		mode      string
		help      string
		opts      ClusterOptions
		wantArgs  string
		wantNotes int
		wantErr   string
	}{
		{name: "classic today", mode: ModeClassic, help: helpClassicOnly, opts: ClusterOptions{},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console"},
		{name: "classic today, zone latency requested", mode: ModeClassic, help: helpClassicOnly, opts: opts,
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console", wantNotes: 1},
		{name: "wal today", mode: ModeWAL, help: helpClassicOnly, opts: opts,
			wantErr: "wal mode needs `strata dev --replication wal` (the 3-zone cluster with WAL replication), not available yet"},
		{name: "wal later", mode: ModeWAL, help: helpWithWAL, opts: opts,
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --s3-put-latency 5ms --s3-get-latency 3ms", wantNotes: 1},
		{name: "classic later: no S3 latency flags", mode: ModeClassic, help: helpWithWAL, opts: opts,
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication classic", wantNotes: 1},
		{name: "wal with zone latency", mode: ModeWAL, help: helpWithZoneLatency, opts: opts,
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --s3-put-latency 5ms --s3-get-latency 3ms --zone-latency 1ms"},
		{name: "classic with zone latency", mode: ModeClassic, help: helpWithZoneLatency, opts: opts,
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication classic --zone-latency 1ms"},
		{name: "broker config before the mode's policy", mode: ModeWAL + "+latency", help: helpWithSecurity + "      --set stringArray   extra config key=value\n",
			opts:     ClusterOptions{BrokerConfig: []string{"wal.upload.interval.ms=5", "wal.policy=cost"}},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --set wal.upload.interval.ms=5 --set wal.policy=cost --replication wal --set wal.policy=latency"},
		{name: "broker config without dev --set", mode: ModeClassic, help: helpWithSecurity, opts: ClusterOptions{BrokerConfig: []string{"a=b"}}, wantErr: "--broker-config needs `strata dev --set`"},
		{name: "wal with its store on a tmpfs", mode: ModeWAL + "+latency", help: helpWithSecurity + "      --set stringArray   extra config key=value\n      --s3-dir string   the gateway's directory\n",
			opts:     ClusterOptions{StoreDir: "/dev/shm/x"},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --set wal.policy=latency --s3-dir /dev/shm/x"},
		{name: "classic: no store directory", mode: ModeClassic, help: helpWithSecurity + "      --s3-dir string   the gateway's directory\n",
			opts: ClusterOptions{StoreDir: "/dev/shm/x"}, wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication classic"},
		{name: "store directory, dev without --s3-dir", mode: ModeWAL + "+latency", help: helpWithSecurity + "      --set stringArray   extra config key=value\n",
			opts:     ClusterOptions{StoreDir: "/dev/shm/x"},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --set wal.policy=latency", wantNotes: 1},
		{name: "unknown mode", mode: "raft", help: helpWithWAL, wantErr: "unknown mode"},
		{name: "classic over SASL_SSL", mode: ModeClassic + SecuritySuffix, help: helpWithSecurity, opts: ClusterOptions{},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --security --replication classic"},
		{name: "SASL_SSL without dev --security", mode: ModeWAL + SecuritySuffix, help: helpWithZoneLatency, wantErr: "needs `strata dev --security`"},
		{name: "SASL_SSL with zone latency", mode: ModeClassic + SecuritySuffix, help: helpWithSecurity, opts: opts, wantErr: "--zone-latency"},
		{name: "wal with a policy", mode: ModeWAL + "+latency", help: helpWithSecurity + "      --set stringArray   extra config key=value\n", opts: ClusterOptions{},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --set wal.policy=latency"},
		{name: "wal with a policy, dev without --set", mode: ModeWAL + "+cost", help: helpWithSecurity, wantErr: "needs `strata dev --set`"},
		{name: "wal with zone-local produce", mode: ModeWAL + ZoneLocalSuffix, help: helpWithSecurity + "      --set stringArray   extra config key=value\n", opts: ClusterOptions{},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --set wal.policy=auto --set wal.zonelocal.produce.enable=true"},
		{name: "wal with a policy and zone-local produce", mode: ModeWAL + "+latency" + ZoneLocalSuffix, help: helpWithSecurity + "      --set stringArray   extra config key=value\n", opts: ClusterOptions{},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --set wal.policy=latency --set wal.zonelocal.produce.enable=true"},
		{name: "zone-local produce, dev without --set", mode: ModeWAL + ZoneLocalSuffix, help: helpWithSecurity, wantErr: "needs `strata dev --set`"},
		{name: "plain wal runs the broker default, auto (dev's own is latency)", mode: ModeWAL, help: helpWithSecurity + "      --set stringArray   extra config key=value\n", opts: ClusterOptions{},
			wantArgs: "dev --listen 127.0.0.1:0 --log-format console --replication wal --set wal.policy=auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, notes, err := DevArgs(tt.mode, tt.opts, ParseDevHelp(tt.help))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrModeUnsupported) {
					t.Fatalf("err %v, want ErrModeUnsupported containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(args, " "); got != tt.wantArgs {
				t.Errorf("args %q, want %q", got, tt.wantArgs)
			}
			if len(notes) != tt.wantNotes {
				t.Errorf("notes %q, want %d", notes, tt.wantNotes)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	good := DefaultLoadOptions()
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*LoadOptions)
		want   string
	}{
		{"acks", func(o *LoadOptions) { o.Acks = "2" }, `acks "2"`},
		{"record size", func(o *LoadOptions) { o.RecordSize = 4 }, "record size 4"},
		{"partitions", func(o *LoadOptions) { o.Partitions = 0 }, "partitions 0"},
		{"producers", func(o *LoadOptions) { o.Producers = 0 }, "producers 0"},
		{"duration", func(o *LoadOptions) { o.Duration = 0 }, "duration 0s"},
		{"rate", func(o *LoadOptions) { o.Rate = -1 }, "rate -1"},
		{"compression", func(o *LoadOptions) { o.Compression = "brotli" }, `compression "brotli"`},
		{"zone latency", func(o *LoadOptions) { o.ZoneLatency = -time.Millisecond }, "zone latency -1ms"},
	}
	for _, tt := range tests {
		o := DefaultLoadOptions()
		tt.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
	for _, modes := range [][]string{nil, {"classic", "classic"}, {"kraft"}, {"classic+zonelocal"}} {
		if err := ValidateModes(modes); err == nil {
			t.Errorf("modes %v accepted", modes)
		}
	}
	if err := ValidateModes([]string{"wal", "classic"}); err != nil {
		t.Errorf("wal,classic: %v", err)
	}
	if err := ValidateModes([]string{"classic", "wal", "wal+zonelocal", "wal+auto+zonelocal"}); err != nil {
		t.Errorf("zone-local modes: %v", err)
	}
}
