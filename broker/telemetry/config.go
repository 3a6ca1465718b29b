package telemetry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SettingKeys are the broker config keys Config.Set understands.
var SettingKeys = []string{
	"telemetry.requested.metrics",
	"telemetry.push.interval.ms",
	"telemetry.max.bytes",
}

// Config is the telemetry subscription every client gets and the bounds
// of what the broker keeps of their pushes.
type Config struct {
	// RequestedMetrics are the metric name prefixes clients should push
	// (telemetry.requested.metrics); an empty prefix asks for every
	// metric; none asks for nothing (the default).
	RequestedMetrics []string
	// PushInterval is how often clients push (telemetry.push.interval.ms,
	// default 5 minutes, Kafka's interval.ms default).
	PushInterval time.Duration
	// MaxBytes bounds one push's payload as sent (telemetry.max.bytes,
	// default 1 MiB, as Kafka).
	MaxBytes int32
	// MaxClients bounds the client instances remembered (default 16384,
	// the size of Kafka's instance cache).
	MaxClients int
	// MaxSeries bounds the series of all clients together (default
	// 10000), MaxSeriesPerClient those of one instance (default 256).
	MaxSeries          int
	MaxSeriesPerClient int
}

// Defaults of Config.
const (
	DefaultPushInterval       = 5 * time.Minute
	DefaultMaxBytes           = 1 << 20
	DefaultMaxClients         = 16384
	DefaultMaxSeries          = 10000
	DefaultMaxSeriesPerClient = 256
)

// DefaultConfig returns the defaults: no metrics requested.
func DefaultConfig() Config {
	return Config{PushInterval: DefaultPushInterval, MaxBytes: DefaultMaxBytes, MaxClients: DefaultMaxClients,
		MaxSeries: DefaultMaxSeries, MaxSeriesPerClient: DefaultMaxSeriesPerClient}
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.PushInterval <= 0 {
		c.PushInterval = d.PushInterval
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = d.MaxBytes
	}
	if c.MaxClients <= 0 {
		c.MaxClients = d.MaxClients
	}
	if c.MaxSeries <= 0 {
		c.MaxSeries = d.MaxSeries
	}
	if c.MaxSeriesPerClient <= 0 {
		c.MaxSeriesPerClient = d.MaxSeriesPerClient
	}
	return c
}

// Set applies one broker config key (SettingKeys) to c; known is false
// for any other key.
func (c *Config) Set(key, value string) (known bool, err error) {
	bad := func(why string) error { return fmt.Errorf("telemetry: %s=%q: %s", key, value, why) }
	switch key {
	case "telemetry.requested.metrics":
		c.RequestedMetrics = ParseRequestedMetrics(value)
		return true, nil
	case "telemetry.push.interval.ms":
		// Kafka's client-metrics interval.ms range.
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < 100 || n > 3600000 {
			return true, bad("want milliseconds from 100 to 3600000")
		}
		c.PushInterval = time.Duration(n) * time.Millisecond
		return true, nil
	case "telemetry.max.bytes":
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < 1 {
			return true, bad("want a positive int32 (bytes)")
		}
		c.MaxBytes = int32(n)
		return true, nil
	}
	return false, nil
}

// ParseRequestedMetrics reads telemetry.requested.metrics: comma-separated
// metric name prefixes; * (alone or among others) asks for every metric,
// which the protocol spells as one empty prefix.
func ParseRequestedMetrics(value string) []string {
	var out []string
	for _, p := range strings.Split(value, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "":
		case "*":
			return []string{""}
		default:
			out = append(out, p)
		}
	}
	return out
}
