package server

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/cost"
)

// ReadConfigFile reads a broker config file into flat key/value pairs. A
// file ending in .yaml, .yml or .json is YAML (nested maps are flattened
// with dots: {log: {retention.ms: 5}} is log.retention.ms); anything else is
// a Java properties file (key=value or key: value, # and ! comments).
func ReadConfigFile(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return parseYAMLConfig(raw)
	default:
		return parseProperties(raw)
	}
}

func parseYAMLConfig(raw []byte) (map[string]string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse YAML config: %w", err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any) error
	walk = func(prefix string, v any) error {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				if err := walk(key, sub); err != nil {
					return err
				}
			}
		case []any:
			parts := make([]string, 0, len(v))
			for _, item := range v {
				parts = append(parts, fmt.Sprint(item))
			}
			out[prefix] = strings.Join(parts, ",")
		case nil:
			out[prefix] = ""
		case float64:
			out[prefix] = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			out[prefix] = fmt.Sprint(v)
		}
		return nil
	}
	if err := walk("", doc); err != nil {
		return nil, err
	}
	return out, nil
}

// parseProperties reads a Java properties file: one key=value or
// key: value per line (spaces and tabs around the separator and at the
// start of a line are layout), # and ! comments, a backslash at the end of
// a line continues it, and the escapes \t \n \r \f \uXXXX and \<c> (c
// itself) as java.util.Properties decodes them, so a file the operator
// escaped reads back exactly. A key must be a run of printable characters
// without whitespace or backslash (CheckConfigKey): the parser does not
// trim a form feed, a vertical tab or a no-break space off a key, which
// would turn "node.id\f", a key the operator passes through as unknown,
// into node.id.
func parseProperties(raw []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		first := n
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continues(line) && sc.Scan() {
			n++
			line = line[:len(line)-1] + strings.TrimLeft(sc.Text(), " \t")
		}
		rawKey, rawValue, ok := splitProperty(line)
		if !ok || rawKey == "" {
			return nil, fmt.Errorf("config line %d: want key=value, got %q", first, line)
		}
		key, err := unescapeProperty(rawKey)
		if err != nil {
			return nil, fmt.Errorf("config line %d: key %q: %w", first, rawKey, err)
		}
		if err := CheckConfigKey(key); err != nil {
			return nil, fmt.Errorf("config line %d: %w", first, err)
		}
		value, err := unescapeProperty(trimValue(rawValue))
		if err != nil {
			return nil, fmt.Errorf("config line %d: value of %s: %w", first, key, err)
		}
		out[key] = value
	}
	return out, sc.Err()
}

// trimValue drops the spaces and tabs that end a value, except one a
// backslash escapes.
func trimValue(v string) string {
	t := strings.TrimRight(v, " \t")
	if len(t) < len(v) && continues(t) {
		return v[:len(t)+1]
	}
	return t
}

// continues reports whether a line ends in an odd number of backslashes,
// a line continuation.
func continues(line string) bool {
	n := len(line) - len(strings.TrimRight(line, "\\"))
	return n%2 == 1
}

// splitProperty splits a line at its first unescaped '=' or ':', trimming
// spaces and tabs around the separator.
func splitProperty(line string) (key, value string, ok bool) {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++ // the escaped character is part of the key
		case '=', ':':
			return strings.TrimRight(line[:i], " \t"), strings.TrimLeft(line[i+1:], " \t"), true
		}
	}
	return "", "", false
}

// unescapeProperty decodes the escapes of java.util.Properties.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, "\\") {
		return s, nil
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			sb.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("a backslash ends it")
		}
		switch s[i] {
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 'f':
			sb.WriteByte('\f')
		case 'u':
			r, size, err := unescapeUnicode(s[i+1:])
			if err != nil {
				return "", err
			}
			sb.WriteRune(r)
			i += size
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String(), nil
}

// unescapeUnicode decodes the XXXX of \uXXXX, and a low surrogate's
// \uXXXX after a high surrogate. It returns the rune and the bytes used.
func unescapeUnicode(s string) (rune, int, error) {
	hex4 := func(s string) (rune, error) {
		if len(s) < 4 {
			return 0, fmt.Errorf("\\u needs 4 hex digits")
		}
		v, err := strconv.ParseUint(s[:4], 16, 16)
		if err != nil {
			return 0, fmt.Errorf("\\u%s: not 4 hex digits", s[:4])
		}
		return rune(v), nil
	}
	r, err := hex4(s)
	if err != nil {
		return 0, 0, err
	}
	if utf16.IsSurrogate(r) && r < 0xdc00 && len(s) >= 10 && s[4:6] == "\\u" {
		if lo, err := hex4(s[6:]); err == nil {
			if c := utf16.DecodeRune(r, lo); c != unicode.ReplacementChar {
				return c, 10, nil
			}
		}
	}
	if utf16.IsSurrogate(r) {
		return 0, 0, fmt.Errorf("\\u%s: a lone surrogate", s[:4])
	}
	return r, 4, nil
}

// ErrConfigKey marks a configuration key the broker refuses.
var ErrConfigKey = errors.New("invalid config key")

// CheckConfigKey refuses a key with whitespace, control or other
// non-printable characters, a backslash, or invalid UTF-8. No key the
// broker reads has one; a parser that trimmed them off (as this one did)
// let a key the operator passes through as unknown ("node.id\f") set one
// it owns (node.id).
func CheckConfigKey(k string) error {
	if k == "" {
		return fmt.Errorf("%w: empty", ErrConfigKey)
	}
	if !utf8.ValidString(k) {
		return fmt.Errorf("%w %q: not UTF-8", ErrConfigKey, k)
	}
	for _, r := range k {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '\\' {
			return fmt.Errorf("%w %q: it contains %U (keys have no whitespace, control characters or backslashes)", ErrConfigKey, k, r)
		}
	}
	return nil
}

// keys read by ApplySettings besides the topic defaults.
var processKeys = map[string]bool{
	"broker.id": true, "node.id": true, "listen": true, "listeners": true,
	"advertised.address": true, "advertised.listeners": true,
	"log.dirs": true, "log.dir": true, "data.dir": true,
	"broker.rack": true, "zone": true, "metrics.listen": true, "metrics.pprof.enable": true,
	"metrics.auth.token.file": true, "metrics.ssl.certificate.location": true, "metrics.ssl.key.location": true, "metrics.ssl.ca.location": true,
	"socket.request.max.bytes": true, "log.retention.check.interval.ms": true, "connections.max.idle.ms": true,
	"producer.id.expiration.ms": true,
	"quota.window.num":          true, "quota.window.size.seconds": true,
	"log.cleaner.enable": true, "log.cleaner.threads": true, "log.cleaner.io.max.bytes.per.second": true,
	"log.cleaner.dedupe.buffer.size": true, "log.cleaner.backoff.ms": true,
	"max.partitions.per.topic": true, "max.partitions": true, "queued.max.request.bytes": true,
	"fetch.max.bytes": true, "max.incremental.fetch.session.cache.slots": true,
	"num.partitions": true, "auto.create.topics.enable": true,
	"log.retention.hours": true, "log.retention.minutes": true,
	"default.replication.factor": true,
	"offsets.topic.enable":       true, "offsets.topic.num.partitions": true, "offsets.topic.replication.factor": true,
	"transaction.state.log.enable": true, "transaction.state.log.num.partitions": true, "transaction.state.log.replication.factor": true,
	"broker.id.base": true, "metadata.etcd.endpoints": true, "metadata.etcd.prefix": true,
	"metadata.etcd.ssl.certificate.location": true, "metadata.etcd.ssl.key.location": true, "metadata.etcd.ssl.ca.location": true, "cluster.name": true,
	"broker.session.timeout.ms": true, "replica.lag.time.max.ms": true, "replica.fetch.wait.max.ms": true,
	"replica.fetch.max.bytes": true, "replica.fetch.response.max.bytes": true, "replica.fetch.backoff.ms": true, "replica.high.watermark.checkpoint.interval.ms": true,
	"auto.leader.rebalance.enable": true, "controlled.shutdown.enable": true, "controlled.shutdown.timeout.ms": true,
	"leader.placement.policy": true,
	"wal.enable":              true, "wal.bucket.name": true, "wal.bucket.region": true, "wal.bucket.endpoint": true,
	"wal.bucket.force.path.style": true, "wal.bucket.type": true, "wal.upload.interval.ms": true, "wal.object.max.bytes": true,
	"wal.retention.ms": true, "wal.download.timeout.ms": true, "wal.enabled": true,
	"wal.bucket.resource": true, "wal.bucket.credentials.source": true, "wal.bucket.credentials.secret": true,
	// wal.policy and the price table (broker/cost; docs/wal.md "Cost and wal.policy").
	"wal.policy": true, "wal.upload.max.interval.ms": true, "wal.policy.object.max.bytes": true, "wal.auto.max.latency.ms": true, "wal.auto.max.cost.ratio": true, "wal.download.hedge.ms": true, "wal.upload.hedge.ms": true,
	"wal.zonelocal.produce.enable": true, "wal.zonelocal.produce.inline.ms": true, "wal.zonelocal.produce.policy": true, "wal.zonelocal.put.concurrency": true, "wal.zonelocal.object.keep.ms": true,
}

func init() {
	for _, k := range cost.Keys() {
		processKeys[k] = true
	}
}

// ApplySettings applies flat key/value settings (from a config file or
// --set flags) to cfg. Consumer-group keys (group.SettingKeys) go to
// cfg.Group, share-group keys (group.ShareSettingKeys) to cfg.Share,
// transaction coordinator keys (txn.SettingKeys) to cfg.Txn. It returns the keys it does not know, which callers
// log as warnings: a config written for later features (wal.*, fast bucket
// settings) must still start the broker.
func ApplySettings(cfg *Config, kv map[string]string) (unknown []string, err error) {
	topicDefaults := map[string]bool{}
	for _, k := range broker.BrokerConfigKeys() {
		topicDefaults[k] = true
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := kv[k]
		if err := CheckConfigKey(k); err != nil {
			return nil, err
		}
		bad := func(err error) error { return fmt.Errorf("config %s=%q: %w", k, v, err) }
		if known, err := cfg.Group.Set(k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if known, err := cfg.Share.Set(k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if known, err := cfg.Txn.Set(k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if known, err := cfg.Telemetry.Set(k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if known, err := applyTierSetting(&cfg.Tier, k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if known, err := applyConnLimitSetting(&cfg.Connections, k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if known, err := applySecuritySetting(&cfg.Security, k, v); known {
			if err != nil {
				return nil, bad(err)
			}
			continue
		}
		if zone, field, ok := walZoneKey(k); ok {
			if known, err := applyWALZoneSetting(&cfg.Cluster.WAL, zone, field, v); known {
				if err != nil {
					return nil, bad(err)
				}
				continue
			}
		}
		switch {
		case topicDefaults[k]:
			if cfg.Broker.LogDefaults == nil {
				cfg.Broker.LogDefaults = map[string]string{}
			}
			cfg.Broker.LogDefaults[k] = v
		case !processKeys[k]:
			unknown = append(unknown, k)
		case k == "broker.id" || k == "node.id":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 {
				return nil, bad(fmt.Errorf("not a non-negative int32"))
			}
			cfg.Broker.NodeID = int32(n)
		case k == "listen":
			cfg.Listen = v
		case k == "listeners":
			addr, err := firstListener(v)
			if err != nil {
				return nil, bad(err)
			}
			if _, err := parseListenerList(k, v); err != nil {
				return nil, bad(err)
			}
			cfg.Listen = addr
			cfg.Security.Listeners = v
		case k == "advertised.address" || k == "advertised.listeners":
			addr, err := expandEnv(v)
			if err != nil {
				return nil, bad(err)
			}
			if k == "advertised.listeners" {
				if _, err := parseListenerList(k, addr); err != nil {
					return nil, bad(err)
				}
				cfg.Security.AdvertisedListeners = addr
				if addr, err = firstListener(addr); err != nil {
					return nil, bad(err)
				}
			}
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, bad(err)
			}
			p, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return nil, bad(err)
			}
			cfg.Broker.Host, cfg.Broker.Port = host, int32(p)
		case k == "log.dirs" || k == "log.dir" || k == "data.dir":
			cfg.Broker.DataDir = strings.Split(v, ",")[0]
		case k == "broker.rack":
			cfg.Broker.Rack = v
		case k == "zone":
			if _, ok := kv["broker.rack"]; !ok {
				cfg.Broker.Rack = v
			}
		case k == "metrics.listen":
			cfg.MetricsListen = v
		case k == "metrics.auth.token.file":
			cfg.MetricsAccess.TokenFile = v
		case k == "metrics.ssl.certificate.location":
			cfg.MetricsAccess.TLS.CertFile = v
		case k == "metrics.ssl.key.location":
			cfg.MetricsAccess.TLS.KeyFile = v
		case k == "metrics.ssl.ca.location":
			cfg.MetricsAccess.TLS.CAFile = v
		case k == "metrics.pprof.enable":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad(fmt.Errorf("want true or false"))
			}
			cfg.Pprof = on
		case k == "socket.request.max.bytes":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1024 {
				return nil, bad(fmt.Errorf("want an int32 of at least 1024"))
			}
			cfg.MaxRequestBytes = int32(n)
		case k == "fetch.max.bytes":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1024 {
				return nil, bad(fmt.Errorf("want an int32 of at least 1024"))
			}
			cfg.Limits.FetchMaxBytes = int32(n)
		case k == "max.incremental.fetch.session.cache.slots":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 {
				return nil, bad(fmt.Errorf("want an int32 >= 0 (0: no sessions)"))
			}
			cfg.Limits.FetchSessionSlots = int(n)
			if n == 0 {
				cfg.Limits.FetchSessionSlots = -1 // none; 0 would mean the default
			}
		case k == "queued.max.request.bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || (n < 1<<20 && n != -1) {
				return nil, bad(fmt.Errorf("want bytes >= 1048576, or -1 for the default"))
			}
			if n > 0 {
				cfg.MaxInflightRequestMemory = n
			}
		case k == "quota.window.num":
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 || n > 1000 {
				return nil, bad(fmt.Errorf("want a number of samples from 2 to 1000"))
			}
			cfg.QuotaSamples = n
		case k == "quota.window.size.seconds":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 3600 {
				return nil, bad(fmt.Errorf("want whole seconds from 1 to 3600"))
			}
			cfg.QuotaWindow = time.Duration(n) * time.Second
		case k == "producer.id.expiration.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of milliseconds"))
			}
			cfg.Broker.ProducerIDExpiration = time.Duration(n) * time.Millisecond
		case k == "connections.max.idle.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, bad(fmt.Errorf("want milliseconds >= 0 (0 disables)"))
			}
			cfg.ConnectionsMaxIdle = time.Duration(n) * time.Millisecond
		case k == "log.cleaner.enable":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad(fmt.Errorf("want true or false"))
			}
			cfg.LogCleaner.Disabled = !on
		case k == "log.cleaner.threads":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive int"))
			}
			cfg.LogCleaner.Threads = int(n)
		case k == "log.cleaner.io.max.bytes.per.second":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0) {
				return nil, bad(fmt.Errorf("want a positive number of bytes per second"))
			}
			cfg.LogCleaner.IOMaxBytesPerSecond = f
		case k == "log.cleaner.dedupe.buffer.size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1<<20 {
				return nil, bad(fmt.Errorf("want at least 1048576 bytes"))
			}
			cfg.LogCleaner.DedupeBufferSize = n
		case k == "log.cleaner.backoff.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of milliseconds"))
			}
			cfg.LogCleaner.Backoff = time.Duration(n) * time.Millisecond
		case k == "log.retention.check.interval.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of milliseconds"))
			}
			cfg.RetentionCheckInterval = time.Duration(n) * time.Millisecond
		case k == "num.partitions":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive int32"))
			}
			cfg.Broker.DefaultPartitions = int32(n)
		case k == "max.partitions.per.topic" || k == "max.partitions":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive int32"))
			}
			if k == "max.partitions" {
				cfg.Broker.MaxPartitions = int32(n)
			} else {
				cfg.Broker.MaxPartitionsPerTopic = int32(n)
			}
		case k == "auto.create.topics.enable":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad(err)
			}
			cfg.Broker.AutoCreateTopics = b
		case strings.HasPrefix(k, "offsets.topic."):
			if err := applyInternalTopicSetting(&cfg.OffsetsTopic, strings.TrimPrefix(k, "offsets.topic."), v); err != nil {
				return nil, bad(err)
			}
		case strings.HasPrefix(k, "transaction.state.log."):
			if err := applyInternalTopicSetting(&cfg.TxnStateTopic, strings.TrimPrefix(k, "transaction.state.log."), v); err != nil {
				return nil, bad(err)
			}
		case k == "default.replication.factor":
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive int16"))
			}
			cfg.Broker.DefaultReplicationFactor = int16(n)
		case k == "broker.id.base":
			// The operator's ConfigMap: one per zone, broker.id is the
			// zone's base plus the pod's ordinal (<cluster>-<zone>-<ordinal>).
			if _, ok := kv["broker.id"]; ok {
				continue
			}
			if _, ok := kv["node.id"]; ok {
				continue
			}
			base, err := strconv.ParseInt(v, 10, 32)
			if err != nil || base < 0 {
				return nil, bad(fmt.Errorf("not a non-negative int32"))
			}
			pod := os.Getenv("POD_NAME")
			i := strings.LastIndexByte(pod, '-')
			ord, err := strconv.ParseInt(pod[i+1:], 10, 32)
			if i < 0 || err != nil || ord < 0 {
				return nil, bad(fmt.Errorf("broker.id.base needs $POD_NAME ending in -<ordinal>, got %q", pod))
			}
			cfg.Broker.NodeID = int32(base + ord)
		case k == "metadata.etcd.endpoints":
			cfg.Cluster.EtcdEndpoints = nil
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e != "" {
					cfg.Cluster.EtcdEndpoints = append(cfg.Cluster.EtcdEndpoints, e)
				}
			}
		case k == "metadata.etcd.ssl.certificate.location":
			cfg.Cluster.EtcdTLS.CertFile = v
		case k == "metadata.etcd.ssl.key.location":
			cfg.Cluster.EtcdTLS.KeyFile = v
		case k == "metadata.etcd.ssl.ca.location":
			cfg.Cluster.EtcdTLS.CAFile = v
		case k == "metadata.etcd.prefix":
			name := strings.Trim(strings.TrimPrefix(v, "/strata/"), "/")
			if !strings.HasPrefix(v, "/strata/") || name == "" {
				return nil, bad(fmt.Errorf("want /strata/<cluster>/"))
			}
			cfg.Cluster.Name = name
		case k == "cluster.name":
			if _, ok := kv["metadata.etcd.prefix"]; !ok {
				cfg.Cluster.Name = v
			}
		case k == "broker.session.timeout.ms" || k == "replica.lag.time.max.ms" || k == "replica.fetch.wait.max.ms" || k == "replica.fetch.backoff.ms" ||
			k == "replica.high.watermark.checkpoint.interval.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of milliseconds"))
			}
			d := time.Duration(n) * time.Millisecond
			switch k {
			case "broker.session.timeout.ms":
				cfg.Cluster.SessionTimeout = d
			case "replica.lag.time.max.ms":
				cfg.Cluster.Replica.LagTimeMax = d
			case "replica.fetch.wait.max.ms":
				cfg.Cluster.Replica.FetchMaxWait = d
			case "replica.high.watermark.checkpoint.interval.ms":
				cfg.Cluster.Replica.HWMCheckpointInterval = d
			default:
				cfg.Cluster.Replica.Backoff = d
			}
		case k == "replica.fetch.max.bytes" || k == "replica.fetch.response.max.bytes":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1024 {
				return nil, bad(fmt.Errorf("want an int32 of at least 1024"))
			}
			if k == "replica.fetch.max.bytes" {
				cfg.Cluster.Replica.PartitionMaxBytes = int32(n)
			} else {
				cfg.Cluster.Replica.FetchMaxBytes = int32(n)
			}
		case k == "wal.enable" || k == "wal.enabled" || k == "wal.bucket.force.path.style" || k == "wal.zonelocal.produce.enable":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad(err)
			}
			switch k {
			case "wal.zonelocal.produce.enable":
				cfg.Cluster.WAL.ZoneLocalProduce = on
			case "wal.enable":
				cfg.Cluster.WAL.Enable = on
			case "wal.enabled":
				// Deprecated alias (operators before the zone map wrote it).
				if _, ok := kv["wal.enable"]; !ok {
					cfg.Cluster.WAL.Enable = on
				}
			default:
				cfg.Cluster.WAL.Bucket.ForcePathStyle = on
			}
		case k == "wal.zonelocal.produce.inline.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 3_600_000 {
				return nil, bad(fmt.Errorf("want milliseconds from 0 (never inline: a failed bucket path answers KAFKA_STORAGE_ERROR) to 3600000"))
			}
			cfg.Cluster.WAL.ZoneLocalInline = time.Duration(n) * time.Millisecond
			if n == 0 {
				cfg.Cluster.WAL.ZoneLocalInline = -1 // off
			}
		case k == "wal.zonelocal.produce.policy":
			if _, err := newZLRouter(v, cost.Default()); err != nil {
				return nil, bad(fmt.Errorf("want %s or %s", ZoneLocalPolicyBucket, ZoneLocalPolicyAuto))
			}
			cfg.Cluster.WAL.ZoneLocalPolicy = v
		case k == "wal.bucket.credentials.source":
			if err := checkCredentialsSource(v); err != nil {
				return nil, bad(err)
			}
		case k == "wal.bucket.resource" || k == "wal.bucket.credentials.secret":
			// Informational: the FastBucket and Secret the operator used.
		case k == "wal.bucket.name":
			cfg.Cluster.WAL.Bucket.Bucket = v
		case k == "wal.bucket.region":
			cfg.Cluster.WAL.Bucket.Region = v
		case k == "wal.bucket.endpoint":
			cfg.Cluster.WAL.Bucket.Endpoint = v
		case k == "wal.bucket.type":
			cfg.Cluster.WAL.Bucket.Type = v
		case k == "wal.upload.interval.ms" || k == "wal.retention.ms" || k == "wal.object.max.bytes" || k == "wal.download.timeout.ms":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number"))
			}
			switch k {
			case "wal.upload.interval.ms":
				cfg.Cluster.WAL.UploadInterval = time.Duration(n) * time.Millisecond
			case "wal.retention.ms":
				cfg.Cluster.WAL.Retention = time.Duration(n) * time.Millisecond
			case "wal.download.timeout.ms":
				cfg.Cluster.WAL.DownloadTimeout = time.Duration(n) * time.Millisecond
			default:
				cfg.Cluster.WAL.MaxObjectBytes = int(n)
			}
		case k == "wal.policy":
			p, err := cost.ParsePolicy(v)
			if err != nil || v == "" {
				return nil, bad(fmt.Errorf("want latency, cost or auto"))
			}
			cfg.Cluster.WAL.Policy = p
		case k == "wal.upload.max.interval.ms":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of milliseconds"))
			}
			cfg.Cluster.WAL.MaxUploadInterval = time.Duration(n) * time.Millisecond
		case k == "wal.download.hedge.ms" || k == "wal.upload.hedge.ms":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < -1 {
				return nil, bad(fmt.Errorf("want -1 (never), 0 (adaptive) or a number of milliseconds"))
			}
			hedge := &cfg.Cluster.WAL.DownloadHedge
			if k == "wal.upload.hedge.ms" {
				hedge = &cfg.Cluster.WAL.UploadHedge
			}
			*hedge = time.Duration(n) * time.Millisecond
		case k == "wal.zonelocal.object.keep.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 3_600_000 {
				return nil, bad(fmt.Errorf("want milliseconds from 0 (delete forwarded objects once the leader answered; followers never read them) to 3600000"))
			}
			cfg.Cluster.WAL.ZoneLocalKeep = time.Duration(n) * time.Millisecond
			if n == 0 {
				cfg.Cluster.WAL.ZoneLocalKeep = -1 // off
			}
		case k == "wal.zonelocal.put.concurrency":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 8 {
				return nil, bad(fmt.Errorf("want 1 to 8 PUTs in flight"))
			}
			cfg.Cluster.WAL.ZoneLocalPutConcurrency = n
		case k == "wal.policy.object.max.bytes":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of bytes"))
			}
			cfg.Cluster.WAL.PolicyMaxObjectBytes = int(n)
		case k == "wal.auto.max.latency.ms":
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 {
				return nil, bad(fmt.Errorf("want 0 (no bound but wal.upload.max.interval.ms) or a number of milliseconds"))
			}
			cfg.Cluster.WAL.AutoMaxLatency = time.Duration(n) * time.Millisecond
			if n == 0 {
				cfg.Cluster.WAL.AutoMaxLatency = -1 // no bound; unset is the default bound
			}
		case k == "wal.auto.max.cost.ratio":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 10) {
				return nil, bad(fmt.Errorf("want a fraction of classic's cost above 0 and at most 10 (1: never dearer than classic)"))
			}
			cfg.Cluster.WAL.AutoMaxCostRatio = f
		case strings.HasPrefix(k, "cost.price."):
			if cfg.Prices == (cost.Prices{}) {
				cfg.Prices = cost.Default()
			}
			if _, err := cfg.Prices.SetKey(k, v); err != nil {
				return nil, bad(err)
			}
		case k == "controlled.shutdown.enable":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad(err)
			}
			cfg.Cluster.DisableControlledShutdown = !on
		case k == "controlled.shutdown.timeout.ms":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, bad(fmt.Errorf("want a positive number of milliseconds"))
			}
			cfg.Cluster.ControlledShutdownTimeout = time.Duration(n) * time.Millisecond
		case k == "auto.leader.rebalance.enable":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return nil, bad(err)
			}
			cfg.Cluster.Controller.AutoLeaderRebalance = on
		case k == "leader.placement.policy":
			// Checked with leader.placement.zone when the broker opens.
			cfg.Broker.LeaderPlacementPolicy = v
		case k == "log.retention.hours" || k == "log.retention.minutes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, bad(err)
			}
			unit := int64(3600000)
			if k == "log.retention.minutes" {
				unit = 60000
			}
			if _, ok := kv["log.retention.ms"]; !ok {
				if cfg.Broker.LogDefaults == nil {
					cfg.Broker.LogDefaults = map[string]string{}
				}
				ms := n * unit
				if n < 0 {
					ms = -1
				}
				cfg.Broker.LogDefaults["log.retention.ms"] = strconv.FormatInt(ms, 10)
			}
		}
	}
	return unknown, nil
}

// firstListener returns host:port of the first entry of a Kafka listeners
// value such as "PLAINTEXT://0.0.0.0:9092,SASL_SSL://...".
func firstListener(v string) (string, error) {
	ls, err := parseListenerList("listeners", v)
	if err != nil {
		return "", err
	}
	if len(ls) == 0 {
		return "", fmt.Errorf("no listener in %q", v)
	}
	return ls[0].Bind, nil
}

// expandEnv replaces ${NAME} with the environment variable NAME: the
// operator advertises ${POD_NAME}.<headless service> so that every pod of
// a StatefulSet shares one ConfigMap. Only the braced form is expanded; an
// unset or empty variable is an error, not an empty host name.
func expandEnv(v string) (string, error) {
	var sb strings.Builder
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			sb.WriteString(v)
			return sb.String(), nil
		}
		j := strings.IndexByte(v[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", v)
		}
		name := v[i+2 : i+j]
		val := os.Getenv(name)
		if val == "" {
			return "", fmt.Errorf("environment variable %s (${%s}) is not set", name, name)
		}
		sb.WriteString(v[:i])
		sb.WriteString(val)
		v = v[i+j+1:]
	}
}

// applyInternalTopicSetting applies one of an internal topic's settings
// (offsets.topic.* or transaction.state.log.*, without the prefix:
// enable, num.partitions, replication.factor).
func applyInternalTopicSetting(c *InternalTopicConfig, k, v string) error {
	switch k {
	case "enable":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		c.Disabled = !b
	case "num.partitions":
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("want a positive int32")
		}
		c.Partitions = int32(n)
	case "replication.factor":
		n, err := strconv.ParseInt(v, 10, 16)
		if err != nil || n < 1 {
			return fmt.Errorf("want a positive int16")
		}
		c.ReplicationFactor = int16(n)
	}
	return nil
}
