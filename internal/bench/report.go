package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// SchemaVersion is the version of the JSON report; it changes when a
// field is renamed or its meaning changes (new fields do not change it).
const SchemaVersion = 1

// Report is the result of one `strata bench` run: every mode measured
// with the same load, side by side.
type Report struct {
	Schema   int          `json:"schema"`
	Started  time.Time    `json:"started"`
	Settings Settings     `json:"settings"`
	Modes    []ModeResult `json:"modes"`
	// Ratios compare each mode after the first with the first, e.g.
	// "wal/classic": {"produce_p99_ms": 0.8, ...}; null when either side
	// is n/a or the base is 0.
	Ratios map[string]map[string]*float64 `json:"ratios,omitempty"`
	// Sweep is the latency/cost frontier of a --sweep run (nil
	// otherwise); its points are projections of modes[], which holds one
	// entry per cluster run, and Ratios is empty.
	Sweep *SweepResult `json:"sweep,omitempty"`
}

// Settings echo the run's options.
type Settings struct {
	Acks              string        `json:"acks"`
	RecordSize        int           `json:"record_size"`
	Partitions        int32         `json:"partitions"`
	ReplicationFactor int16         `json:"replication_factor"`
	Rate              int           `json:"rate"`
	Producers         int           `json:"producers"`
	Consumers         int           `json:"consumers"`
	MaxInFlight       int           `json:"max_in_flight"`
	Compression       string        `json:"compression"`
	Linger            time.Duration `json:"linger_ns"`
	// PrimePartitions: every producer had an answer from every partition
	// before the load started (LoadOptions.PrimePartitions).
	PrimePartitions bool          `json:"prime_partitions"`
	Warmup          time.Duration `json:"warmup_ns"`
	Duration        time.Duration `json:"duration_ns"`
	S3PutLatency    time.Duration `json:"s3_put_latency_ns"`
	S3GetLatency    time.Duration `json:"s3_get_latency_ns"`
	// S3LatencyMode is "floor" when S3 latencies are set: each PUT / GET
	// takes at least that long, the local server's own time included.
	S3LatencyMode string `json:"s3_latency_mode,omitempty"`
	// ZoneLatency is the one-way delay per direction on cross-zone
	// connections; ZoneRoundTrip what a cross-zone request/response pays
	// (2 ×); ZoneLatencyAppliesTo says which connections pay it.
	ZoneLatency          time.Duration `json:"zone_latency_ns"`
	ZoneRoundTrip        time.Duration `json:"zone_round_trip_ns"`
	ZoneLatencyAppliesTo []string      `json:"zone_latency_applies_to,omitempty"`
	// Pin is the CPU pinning of the run (the same for every mode).
	Pin *PinSettings `json:"pin,omitempty"`
	// BrokerConfig is --broker-config: key=value every embedded cluster
	// got (none: the brokers' defaults).
	BrokerConfig []string `json:"broker_config,omitempty"`
	// ObjectStoreData is where the wal modes' local object store kept its
	// data: "tmpfs" (--store-tmpfs, the default, where /dev/shm is one)
	// or "disk" (in the cluster's data directory); ObjectStoreNote says
	// why it is on disk when tmpfs was asked for.
	ObjectStoreData string `json:"object_store_data,omitempty"`
	// BrokerGoMaxProcs is the embedded cluster process's GOMAXPROCS: one
	// per broker and broker CPU, as separate broker processes would have.
	BrokerGoMaxProcs string `json:"broker_gomaxprocs,omitempty"`
	ObjectStoreNote  string `json:"object_store_note,omitempty"`
}

// ZoneLatencyScope is where --zone-latency applies (Settings).
var ZoneLatencyScope = []string{
	"replica fetch connections between brokers of different zones (classic and wal)",
	"GETs from another zone's WAL bucket: one round trip each (wal)",
	"client connections to brokers of another zone: producers and consumers in their --client-racks zone, else zones round-robin",
}

// ZoneLatencyResult is what the injected inter-zone latency delayed in a
// mode. The replica bytes and GETs are deltas over the measured window
// from the brokers' strata_dev_zone_latency_* metrics, the replica
// connections the total opened since the cluster started (nil: not
// exported); the client figures cover the whole load.
type ZoneLatencyResult struct {
	OneWay              time.Duration `json:"one_way_ns"`
	ReplicaConnections  *float64      `json:"replica_connections"`
	ReplicaBytesDelayed *float64      `json:"replica_bytes_delayed"`
	CrossZoneObjectGets *float64      `json:"cross_zone_object_gets_delayed"`
	ClientConnections   int64         `json:"client_connections"`
	ClientBytesDelayed  int64         `json:"client_bytes_delayed"`
	ProducerZones       []string      `json:"producer_zones"`
	ConsumerZones       []string      `json:"consumer_zones"`
}

// ModeResult is what one mode measured.
type ModeResult struct {
	Mode string `json:"mode"`
	// SweepSetting is the --sweep key=value this run added to its broker
	// config (nil: not swept, e.g. classic, or no --sweep).
	SweepSetting *SweepSetting `json:"sweep_setting,omitempty"`
	// SweepDefault: this run is the sweep's default point (Sweep.Default).
	SweepDefault      bool     `json:"sweep_default,omitempty"`
	Bootstrap         []string `json:"bootstrap"`
	MetricsURLs       []string `json:"metrics_urls"`
	Topic             string   `json:"topic"`
	Brokers           int      `json:"brokers"`
	ReplicationFactor int16    `json:"replication_factor"`
	WindowSeconds     float64  `json:"window_seconds"`

	ProduceLatency LatencySummary `json:"produce_latency"`
	// ProduceRequestLatency: Produce requests, written → answer read (the
	// broker's time and the wire's); ProduceWriteWait: their wait in the
	// producer before being written. With ProduceLatency they say what
	// of a record's latency is the broker's and what the client's.
	ProduceRequestLatency LatencySummary `json:"produce_request_latency,omitzero"`
	ProduceWriteWait      LatencySummary `json:"produce_request_write_wait,omitzero"`

	// RequestsInFlightMax: the most Produce requests one producer had
	// unanswered at one broker (5 at most with acks=all, idempotent).
	RequestsInFlightMax int64 `json:"produce_requests_in_flight_max,omitempty"`

	// ProduceStages: where the window records' produce latency went
	// (acks=all, plaintext): in the producer until their request was
	// written, the request until its answer was read, then to the promise;
	// and the latency of the records produced before their producer had
	// a first answer from their partition ("cold") against the others.
	ProduceStages *ProduceStagesSummary `json:"produce_stages,omitempty"`

	EndToEndLatency LatencySummary `json:"end_to_end_latency"`
	ThroughputMBps  float64        `json:"throughput_mb_per_s"`
	RecordsPerSec   float64        `json:"records_per_s"`

	Produced      int64  `json:"records_produced"`
	Consumed      int64  `json:"records_consumed"`
	ProduceErrors int64  `json:"produce_errors"`
	FirstError    string `json:"first_error,omitempty"`
	Late          int64  `json:"records_late"`
	DrainComplete bool   `json:"drain_complete"`

	Traffic     TrafficFigures     `json:"traffic"`
	Cost        CostFigures        `json:"cost"`
	ZoneLatency *ZoneLatencyResult `json:"zone_latency,omitempty"`
	// BrokerCPU: the broker processes' CPU in the window (nil: external
	// cluster, or /proc not readable).
	BrokerCPU *BrokerCPU `json:"broker_cpu,omitempty"`
	// Stages is the WAL path's per-stage latency in the window, in
	// data-path order (strata_wal_stage_seconds; empty in classic mode);
	// SlowestStageP99 names the stage with the largest p99.
	Stages []StageFigure `json:"wal_stages,omitempty"`
	// SchedLatency is the broker processes' Go scheduler latency in the
	// window (nil: not exported).
	SchedLatency    *SchedLatency `json:"go_sched_latency,omitempty"`
	SlowestStageP99 string        `json:"wal_slowest_stage_p99,omitempty"`
	Notes           []string      `json:"notes,omitempty"`
}

// Figure is one row of the report.
type Figure struct {
	Key   string
	Label string
	Value func(*ModeResult) *float64
}

func ptr(v float64) *float64 { return &v }

// Figures are the rows of the table and the keys of the ratios.
var Figures = []Figure{
	{"produce_p50_ms", "produce latency p50 (ms)", func(m *ModeResult) *float64 { return latency(m.ProduceLatency, m.ProduceLatency.P50Ms) }},
	{"produce_p99_ms", "produce latency p99 (ms)", func(m *ModeResult) *float64 { return latency(m.ProduceLatency, m.ProduceLatency.P99Ms) }},
	{"produce_p999_ms", "produce latency p99.9 (ms)", func(m *ModeResult) *float64 { return latency(m.ProduceLatency, m.ProduceLatency.P999Ms) }},
	{"produce_request_p50_ms", "Produce request round trip p50 (ms)", func(m *ModeResult) *float64 {
		return latency(m.ProduceRequestLatency, m.ProduceRequestLatency.P50Ms)
	}},
	{"produce_request_p99_ms", "Produce request round trip p99 (ms)", func(m *ModeResult) *float64 {
		return latency(m.ProduceRequestLatency, m.ProduceRequestLatency.P99Ms)
	}},
	{"produce_write_wait_p99_ms", "Produce request wait to be written p99 (ms)", func(m *ModeResult) *float64 {
		return latency(m.ProduceWriteWait, m.ProduceWriteWait.P99Ms)
	}},
	{"produce_late_p99_ms", "record's send behind its schedule p99 (ms)", func(m *ModeResult) *float64 {
		if m.ProduceStages == nil {
			return nil
		}
		return latency(m.ProduceStages.Late, m.ProduceStages.Late.P99Ms)
	}},
	{"produce_in_producer_p99_ms", "record's wait in the producer until written p99 (ms)", func(m *ModeResult) *float64 {
		if m.ProduceStages == nil {
			return nil
		}
		return latency(m.ProduceStages.InProducer, m.ProduceStages.InProducer.P99Ms)
	}},
	{"produce_cold_records", "records sent before their partition's first answer", func(m *ModeResult) *float64 {
		if m.ProduceStages == nil {
			return nil
		}
		return ptr(float64(m.ProduceStages.ColdRecords))
	}},
	{"go_sched_latency_p99_ms", "brokers' Go scheduler latency p99 (ms)", func(m *ModeResult) *float64 {
		if m.SchedLatency == nil {
			return nil
		}
		return m.SchedLatency.P99Ms
	}},
	{"e2e_p50_ms", "end-to-end latency p50 (ms)", func(m *ModeResult) *float64 { return latency(m.EndToEndLatency, m.EndToEndLatency.P50Ms) }},
	{"e2e_p99_ms", "end-to-end latency p99 (ms)", func(m *ModeResult) *float64 { return latency(m.EndToEndLatency, m.EndToEndLatency.P99Ms) }},
	{"throughput_mb_per_s", "throughput (MB/s)", func(m *ModeResult) *float64 { return ptr(m.ThroughputMBps) }},
	{"records_per_s", "throughput (records/s)", func(m *ModeResult) *float64 { return ptr(m.RecordsPerSec) }},
	{"cross_zone_bytes_per_produced_byte", "inter-broker cross-zone B per produced B", func(m *ModeResult) *float64 { return m.Traffic.CrossZonePerProducedByte }},
	{"cross_zone_produce_bytes", "produce B from clients of another zone", func(m *ModeResult) *float64 { return m.Traffic.CrossZoneProduceBytesIn }},
	{"total_cross_zone_bytes_per_produced_byte", "all cross-zone B (clients + brokers) per produced B", func(m *ModeResult) *float64 { return m.Traffic.TotalCrossZonePerProducedByte }},
	{"puts_per_s_per_broker", "object PUTs/s per broker", func(m *ModeResult) *float64 { return m.Traffic.PutsPerSecondPerBroker }},
	{"gets_per_s", "object GETs/s", func(m *ModeResult) *float64 { return m.Traffic.GetsPerSecond }},
	{"hedged_puts_per_s", "hedged PUTs/s (twins, all brokers)", func(m *ModeResult) *float64 { return m.Traffic.HedgedPutsPerSecond }},
	{"hedged_gets_per_s", "hedged GETs/s (twins)", func(m *ModeResult) *float64 { return m.Traffic.HedgedGetsPerSecond }},
	{"cost_usd_per_gb_produced", "replication cost (USD/GB produced)", func(m *ModeResult) *float64 { return m.Cost.USDPerGBProduced }},
	{"classic_cost_usd_per_gb_produced", "classic replication of it (USD/GB)", func(m *ModeResult) *float64 { return m.Cost.ClassicUSDPerGBProduced }},
	{"client_cost_usd_per_gb_produced", "clients' cross-zone transfer (USD/GB produced)", func(m *ModeResult) *float64 { return m.Cost.ClientUSDPerGBProduced }},
	{"total_cost_usd_per_gb_produced", "whole bill: replication + clients (USD/GB)", func(m *ModeResult) *float64 { return m.Cost.TotalUSDPerGBProduced }},
	{"wal_object_bytes", "produced bytes per WAL object", func(m *ModeResult) *float64 { return m.Cost.WALObjectBytes }},
	{"wal_policy_switches", "wal.policy switches", func(m *ModeResult) *float64 { return m.Cost.PolicySwitches }},
	{"wal_policy_inline_brokers", "brokers inline by wal.policy at the end", func(m *ModeResult) *float64 { return m.Cost.PolicyInlineBrokers }},
	{"broker_cpu_s_per_gb", "broker CPU seconds per GB produced", func(m *ModeResult) *float64 {
		if m.BrokerCPU == nil {
			return nil
		}
		return ptr(m.BrokerCPU.SecondsPerGBProduce)
	}},
}

func latency(s LatencySummary, v float64) *float64 {
	if s.Count == 0 {
		return nil
	}
	return &v
}

// Ratio returns a/b, or nil when either is n/a or b is 0.
func Ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 || math.IsNaN(*a) || math.IsNaN(*b) {
		return nil
	}
	r := *a / *b
	return &r
}

// FormatValue prints a figure with about 3 significant digits, "n/a" for nil.
func FormatValue(v *float64) string {
	if v == nil {
		return "n/a"
	}
	x := *v
	switch a := math.Abs(x); {
	case x == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", x)
	case a >= 100:
		return fmt.Sprintf("%.1f", x)
	case a >= 10:
		return fmt.Sprintf("%.2f", x)
	case a >= 0.001:
		return fmt.Sprintf("%.3f", x)
	default:
		return fmt.Sprintf("%.2g", x)
	}
}

func megabytes(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return FormatValue(ptr(*v / 1e6))
}

func formatCount(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", *v)
}

// FormatRatio prints a ratio as "0.82x", "n/a" for nil.
func FormatRatio(r *float64) string {
	if r == nil {
		return "n/a"
	}
	return FormatValue(r) + "x"
}

// ComputeRatios fills r.Ratios: every mode after the first against the first.
func (r *Report) ComputeRatios() {
	r.Ratios = nil
	if len(r.Modes) < 2 {
		return
	}
	r.Ratios = map[string]map[string]*float64{}
	base := &r.Modes[0]
	for i := 1; i < len(r.Modes); i++ {
		m := &r.Modes[i]
		row := map[string]*float64{}
		for _, f := range Figures {
			row[f.Key] = Ratio(f.Value(m), f.Value(base))
		}
		r.Ratios[m.Mode+"/"+base.Mode] = row
	}
}

// ReadJSON reads a report WriteJSON wrote (to print or plot it again).
func ReadJSON(r io.Reader) (*Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("read bench report: %w", err)
	}
	if rep.Schema != SchemaVersion {
		return nil, fmt.Errorf("read bench report: schema %d, this binary reads %d", rep.Schema, SchemaVersion)
	}
	if rep.Sweep != nil && rep.Sweep.Default != nil {
		rep.Sweep.Default.isDefault = true
	}
	return &rep, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the human-readable table.
func (r *Report) WriteText(w io.Writer) error {
	s := r.Settings
	rate := "max"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%d rec/s", s.Rate)
	}
	fmt.Fprintf(w, "strata bench: acks=%s, %d B records, %d partitions, rate %s, %d producers, %d consumers, %v window after %v warmup\n",
		s.Acks, s.RecordSize, s.Partitions, rate, s.Producers, s.Consumers, s.Duration, s.Warmup)
	var injected []string
	if s.ZoneLatency > 0 {
		injected = append(injected, fmt.Sprintf("zone latency %v one-way (+%v per cross-zone round trip)", s.ZoneLatency, s.ZoneRoundTrip))
	}
	if s.S3PutLatency > 0 || s.S3GetLatency > 0 {
		injected = append(injected, fmt.Sprintf("wal: S3 PUT %v, GET %v (%s: at least that long, the local server's time included)", s.S3PutLatency, s.S3GetLatency, s.S3LatencyMode))
	}
	if len(injected) > 0 {
		fmt.Fprintf(w, "injected: %s\n", strings.Join(injected, "; "))
	}
	if s.ObjectStoreData != "" {
		line := "object store data (wal modes): " + s.ObjectStoreData
		if s.ObjectStoreNote != "" {
			line += " (" + s.ObjectStoreNote + ")"
		}
		fmt.Fprintln(w, line)
	}
	if s.BrokerGoMaxProcs != "" {
		fmt.Fprintf(w, "brokers' process: GOMAXPROCS=%s\n", s.BrokerGoMaxProcs)
	}
	if !s.PrimePartitions {
		fmt.Fprintln(w, "producers not primed (--prime-partitions=false, or a report from before it): at many partitions the window holds records sent before their partition's first answer")
	}
	if len(s.BrokerConfig) > 0 {
		fmt.Fprintf(w, "broker config: %s\n", strings.Join(s.BrokerConfig, " "))
	}
	if p := s.Pin; p != nil {
		if p.Enabled {
			fmt.Fprintf(w, "pinned: %s\n", p.describe())
		} else {
			fmt.Fprintf(w, "not pinned: %s\n", p.Reason)
		}
	}
	for _, m := range r.Modes {
		fmt.Fprintf(w, "  %s: %d brokers, RF %d, topic %s, bootstrap %s\n", m.Label(), m.Brokers, m.ReplicationFactor, m.Topic, strings.Join(m.Bootstrap, ","))
		if z := m.ZoneLatency; z != nil {
			fmt.Fprintf(w, "    zone latency %v delayed: replica fetches %s MB on %s connections and %s GETs from other zones' buckets in the window; clients %s MB on %d connections (producers in %s, consumers in %s)\n",
				z.OneWay, megabytes(z.ReplicaBytesDelayed), formatCount(z.ReplicaConnections), formatCount(z.CrossZoneObjectGets),
				megabytes(ptr(float64(z.ClientBytesDelayed))), z.ClientConnections, strings.Join(z.ProducerZones, ","), strings.Join(z.ConsumerZones, ","))
		}
	}
	fmt.Fprintln(w)
	if r.Sweep != nil {
		// One column per run does not fit a sweep: the frontier table,
		// then the runs' notes (every figure is in the JSON's modes[]).
		if err := r.writeSweepText(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
		r.writeNotes(w)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"figure"}
	for _, m := range r.Modes {
		header = append(header, m.Mode)
	}
	var ratioKeys []string
	for i := 1; i < len(r.Modes); i++ {
		k := r.Modes[i].Mode + "/" + r.Modes[0].Mode
		ratioKeys = append(ratioKeys, k)
		header = append(header, k)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, f := range Figures {
		row := []string{f.Label}
		for i := range r.Modes {
			row = append(row, FormatValue(f.Value(&r.Modes[i])))
		}
		for _, k := range ratioKeys {
			row = append(row, FormatRatio(r.Ratios[k][f.Key]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	count := func(label string, v func(*ModeResult) string) {
		row := []string{label}
		for i := range r.Modes {
			row = append(row, v(&r.Modes[i]))
		}
		for range ratioKeys {
			row = append(row, "")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	count("records produced / consumed", func(m *ModeResult) string { return fmt.Sprintf("%d / %d", m.Produced, m.Consumed) })
	count("produce errors", func(m *ModeResult) string { return fmt.Sprint(m.ProduceErrors) })
	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeNotes(w)
	for _, m := range r.Modes {
		if len(m.Stages) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: WAL stages in the window, p50 / p99 (ms), all brokers; slowest at p99: %s\n", m.Mode, m.SlowestStageP99)
		stw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, st := range m.Stages {
			name := st.Stage
			if name == stageAcksAllWait {
				name += " (the whole round per partition)"
			}
			fmt.Fprintf(stw, "  %s\t%s / %s\t(%d)\n", name, FormatValue(st.P50Ms), FormatValue(st.P99Ms), st.Count)
		}
		if err := stw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeNotes writes every run's notes, each line prefixed with the run's
// label.
func (r *Report) writeNotes(w io.Writer) {
	for _, m := range r.Modes {
		var notes []string
		notes = append(notes, m.Notes...)
		notes = append(notes, m.Traffic.Problems...)
		if m.FirstError != "" {
			notes = append(notes, "first produce error: "+m.FirstError)
		}
		if !m.DrainComplete {
			notes = append(notes, fmt.Sprintf("consumers read %d of %d window records before the drain timeout", m.Consumed, m.Produced))
		}
		if m.Late > 0 {
			notes = append(notes, fmt.Sprintf("%d records sent more than 10 ms after their scheduled time (the load generator could not keep the rate)", m.Late))
		}
		if len(m.Traffic.PutsPerSecond) > 1 && m.Traffic.PutsPerSecondPerBroker != nil {
			var per []string
			for _, p := range m.Traffic.PutsPerSecond {
				per = append(per, FormatValue(p))
			}
			notes = append(notes, "PUTs/s by broker: "+strings.Join(per, ", "))
		}
		for _, n := range notes {
			fmt.Fprintf(w, "%s: %s\n", m.Label(), n)
		}
	}
}
