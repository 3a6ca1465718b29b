package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Sweep is `strata bench --sweep key=v1,v2,...`: every WAL mode of the run
// is measured once per value, with key=value added to its broker config,
// and the report gives each of these operating points' latency and cost
// (the latency/cost frontier). Classic modes run once: the key is a WAL
// setting, so classic is the same cluster at every value and is the
// reference point.
type Sweep struct {
	Key    string
	Values []string
	// Default adds the default point: the plain wal mode once, without
	// the key (wal.policy and its bounds at the broker's defaults, with
	// the run's --broker-config), what a user gets who tunes nothing; the
	// report and the plot show where it sits on the frontier.
	Default bool
}

// ErrSweep is wrapped by every error about a --sweep specification.
var ErrSweep = errors.New("--sweep")

// sweepOwnedKeys are WAL settings a sweep may not vary: the modes set
// wal.policy, and strata dev sets up the WAL itself (its local buckets).
var sweepOwnedKeys = map[string]string{
	"wal.policy":  "the modes set wal.policy (wal+latency, wal+cost, wal+auto): compare policies with --modes",
	"wal.enable":  "strata dev sets it (--replication)",
	"wal.enabled": "strata dev sets it (--replication)",
}

// ParseSweep parses `key=v1,v2,...`. It checks the form and that key is a
// WAL setting a sweep may vary; whether the broker knows the key and
// accepts each value is for the caller to check against the broker's
// config parser (the cmd package does, before anything starts).
func ParseSweep(spec string) (*Sweep, error) {
	key, list, ok := strings.Cut(spec, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return nil, fmt.Errorf("%w %q: want key=v1,v2,... (e.g. wal.upload.interval.ms=5,10,20,40)", ErrSweep, spec)
	}
	sw := &Sweep{Key: key}
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("%w %q: no values for %s", ErrSweep, spec, key)
	}
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		switch {
		case v == "":
			return nil, fmt.Errorf("%w %q: an empty value in the list", ErrSweep, spec)
		case slices.Contains(sw.Values, v):
			return nil, fmt.Errorf("%w %q: value %s given twice", ErrSweep, spec, v)
		}
		sw.Values = append(sw.Values, v)
	}
	if err := checkSweepKey(key); err != nil {
		return nil, err
	}
	return sw, nil
}

func checkSweepKey(key string) error {
	if why, ok := sweepOwnedKeys[key]; ok {
		return fmt.Errorf("%w %s: not a sweep key: %s", ErrSweep, key, why)
	}
	if strings.HasPrefix(key, "wal.bucket.") || strings.HasPrefix(key, "wal.zone.") {
		return fmt.Errorf("%w %s: not a sweep key: strata dev sets the buckets of its local object store", ErrSweep, key)
	}
	if !strings.HasPrefix(key, "wal.") {
		return fmt.Errorf("%w %s: not a WAL setting (wal.*): a sweep varies the WAL modes and measures classic once as the reference; "+
			"for a setting that changes classic too, run bench once per value with --broker-config", ErrSweep, key)
	}
	return nil
}

// Validate checks the sweep against the run's modes and --broker-config:
// a known key class, values, at least one WAL mode to sweep, at most one
// classic mode (the reference), and no --broker-config for the same key
// (which of the two would win is not something to leave to flag order).
func (s *Sweep) Validate(modes, brokerConfig []string) error {
	if err := checkSweepKey(s.Key); err != nil {
		return err
	}
	if len(s.Values) == 0 {
		return fmt.Errorf("%w %s: no values", ErrSweep, s.Key)
	}
	var wal, classic []string
	for _, m := range modes {
		switch base, _ := BaseMode(m); base {
		case ModeWAL:
			wal = append(wal, m)
		case ModeClassic:
			classic = append(classic, m)
		}
	}
	if len(wal) == 0 {
		return fmt.Errorf("%w %s: --modes %s has no wal mode to sweep (e.g. --modes classic,wal+latency)", ErrSweep, s.Key, strings.Join(modes, ","))
	}
	if len(classic) > 1 {
		return fmt.Errorf("%w: one classic mode at most, the reference of every point (--modes has %s)", ErrSweep, strings.Join(classic, ", "))
	}
	for _, kv := range brokerConfig {
		if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == s.Key {
			return fmt.Errorf("%w %s and --broker-config %s: the sweep gives %s its values", ErrSweep, s.Key, kv, s.Key)
		}
	}
	return nil
}

// SweepSetting is the key=value a swept run added to its broker config.
type SweepSetting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (s SweepSetting) String() string { return s.Key + "=" + s.Value }

// plannedRun is one cluster of a run: a mode and, in a sweep, the
// setting its WAL mode got.
type plannedRun struct {
	mode    string
	setting *SweepSetting
	// defaultPoint: the sweep's default point (Sweep.Default).
	defaultPoint bool
}

// planRuns lists the clusters of a run in order: every mode of --modes in
// turn; with a sweep a WAL mode once per value (so a mode's points are
// measured back to back), a classic mode once, and last the default
// point if the sweep asks for it.
func planRuns(modes []string, sw *Sweep) []plannedRun {
	var runs []plannedRun
	for _, m := range modes {
		if base, _ := BaseMode(m); sw == nil || base != ModeWAL {
			runs = append(runs, plannedRun{mode: m})
			continue
		}
		for _, v := range sw.Values {
			runs = append(runs, plannedRun{mode: m, setting: &SweepSetting{Key: sw.Key, Value: v}})
		}
	}
	if sw != nil && sw.Default {
		runs = append(runs, plannedRun{mode: ModeWAL, defaultPoint: true})
	}
	return runs
}

// defaultLabel names the default point's run.
const defaultLabel = ModeWAL + " (defaults)"

// Label names a mode's run in the report: its mode, and in a sweep the
// setting it had.
func (m *ModeResult) Label() string {
	if m.SweepDefault {
		return defaultLabel
	}
	if m.SweepSetting == nil {
		return m.Mode
	}
	return m.Mode + " " + m.SweepSetting.String()
}

// SweepResult is the frontier of a --sweep run: one point per WAL mode and
// value, and classic's point, each a projection of its entry in modes[]
// (which has every figure of that run).
type SweepResult struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
	// Classic is the classic mode's point (nil: --modes had no classic
	// mode; the ratios are then n/a).
	Classic *SweepPoint  `json:"classic"`
	Points  []SweepPoint `json:"points"`
	// Default is the default point (nil: the sweep had none,
	// --default-point=false).
	Default *SweepPoint `json:"default,omitempty"`
	// Notes say where a mode's wal.policy does not cut objects by the key
	// as the sweep might suggest.
	Notes []string `json:"notes,omitempty"`
}

// SweepPoint is one operating point. Figures are null when n/a.
type SweepPoint struct {
	Mode string `json:"mode"`
	// ModeIndex is the point's entry in the report's modes[].
	ModeIndex int `json:"mode_index"`
	// WALPolicy is the wal.policy the mode ran (empty for classic).
	WALPolicy string `json:"wal_policy,omitempty"`
	// Value is the sweep key's value of the point (empty for classic and
	// the default point).
	Value string `json:"value,omitempty"`
	// Produce latency (at the run's --acks) and end-to-end latency
	// (consumers; null without them).
	ProduceP50Ms  *float64 `json:"produce_p50_ms"`
	ProduceP99Ms  *float64 `json:"produce_p99_ms"`
	EndToEndP99Ms *float64 `json:"e2e_p99_ms"`
	// PutsPerSecondPerBroker: object PUTs/s, mean over the brokers.
	PutsPerSecondPerBroker *float64 `json:"puts_per_s_per_broker"`
	// CostUSDPerGBProduced is the mode's cost.usd_per_gb_produced;
	// CostRatioToClassic its ratio to the classic point's.
	CostUSDPerGBProduced *float64 `json:"cost_usd_per_gb_produced"`
	CostRatioToClassic   *float64 `json:"cost_ratio_to_classic"`
	// WALObjectBytes: produced bytes per object PUT (null without PUTs).
	WALObjectBytes *float64 `json:"wal_object_bytes"`
	ThroughputMBps *float64 `json:"throughput_mb_per_s"`

	isDefault bool // SweepResult.Default (set by ComputeSweep and on reading)
}

// Label names the point as its run is named (ModeResult.Label).
func (p *SweepPoint) Label(key string) string {
	if p.isDefault {
		return defaultLabel
	}
	if p.Value == "" {
		return p.Mode
	}
	return p.Mode + " " + key + "=" + p.Value
}

// figureValue is the value of Figures' key for m.
func figureValue(key string, m *ModeResult) *float64 {
	for _, f := range Figures {
		if f.Key == key {
			return f.Value(m)
		}
	}
	panic("bench: no figure " + key)
}

// ComputeSweep fills r.Sweep from r.Modes: a point per run with a sweep
// setting, classic's from the classic run.
func (r *Report) ComputeSweep(sw *Sweep) {
	res := &SweepResult{Key: sw.Key, Values: sw.Values, Points: []SweepPoint{}}
	var modes []string
	for i := range r.Modes {
		m := &r.Modes[i]
		p := SweepPoint{
			Mode: m.Mode, ModeIndex: i,
			ProduceP50Ms:           figureValue("produce_p50_ms", m),
			ProduceP99Ms:           figureValue("produce_p99_ms", m),
			EndToEndP99Ms:          figureValue("e2e_p99_ms", m),
			PutsPerSecondPerBroker: figureValue("puts_per_s_per_broker", m),
			CostUSDPerGBProduced:   figureValue("cost_usd_per_gb_produced", m),
			WALObjectBytes:         figureValue("wal_object_bytes", m),
			ThroughputMBps:         figureValue("throughput_mb_per_s", m),
		}
		switch base, _ := BaseMode(m.Mode); {
		case base == ModeClassic && res.Classic == nil:
			res.Classic = &p
		case m.SweepSetting != nil:
			p.Value, p.WALPolicy = m.SweepSetting.Value, modePolicy(m.Mode)
			res.Points = append(res.Points, p)
			if !slices.Contains(modes, m.Mode) {
				modes = append(modes, m.Mode)
			}
		case m.SweepDefault && res.Default == nil:
			p.WALPolicy, p.isDefault = modePolicy(m.Mode), true
			res.Default = &p
		}
	}
	if res.Classic != nil {
		res.Classic.CostRatioToClassic = Ratio(res.Classic.CostUSDPerGBProduced, res.Classic.CostUSDPerGBProduced)
		for i := range res.Points {
			res.Points[i].CostRatioToClassic = Ratio(res.Points[i].CostUSDPerGBProduced, res.Classic.CostUSDPerGBProduced)
		}
		if res.Default != nil {
			res.Default.CostRatioToClassic = Ratio(res.Default.CostUSDPerGBProduced, res.Classic.CostUSDPerGBProduced)
		}
	}
	res.Notes = sweepNotes(sw.Key, modes)
	r.Sweep = res
}

// modePolicy is the wal.policy a WAL mode runs: its suffix, else the
// broker default (DevArgs passes it).
func modePolicy(mode string) string {
	if _, p := WALPolicy(strings.TrimSuffix(mode, SecuritySuffix)); p != "" {
		return p
	}
	return DefaultWALPolicy
}

// policyCutKeys are the settings each wal.policy cuts objects by
// (docs/wal.md "Cost and wal.policy"): latency every
// wal.upload.interval.ms or at wal.object.max.bytes; cost at its target
// size (bounded by wal.policy.object.max.bytes) or
// wal.upload.max.interval.ms; auto stretches its interval from
// wal.upload.interval.ms towards wal.upload.max.interval.ms, within its
// bounds wal.auto.max.latency.ms and wal.auto.max.cost.ratio.
var policyCutKeys = map[string][]string{
	"latency": {"wal.upload.interval.ms", "wal.object.max.bytes"},
	"cost":    {"wal.upload.max.interval.ms", "wal.policy.object.max.bytes"},
	"auto":    {"wal.upload.interval.ms", "wal.upload.max.interval.ms", "wal.policy.object.max.bytes", "wal.auto.max.latency.ms", "wal.auto.max.cost.ratio"},
}

// sweepNotes warn where a mode's policy makes the swept key mean less
// than it says: auto stretches the interval, and a policy that does not
// cut by a cut setting at all gives points that differ by noise.
func sweepNotes(key string, modes []string) []string {
	isCutKey := false
	for _, keys := range policyCutKeys {
		isCutKey = isCutKey || slices.Contains(keys, key)
	}
	var notes []string
	for _, m := range modes {
		p := modePolicy(m)
		switch {
		case p == "auto" && key == "wal.upload.interval.ms":
			notes = append(notes, fmt.Sprintf("%s (wal.policy=auto) stretches wal.upload.interval.ms towards wal.upload.max.interval.ms until objects reach its target size, "+
				"and replicates inline while objects would cost more than classic: each value is the interval's floor, the produced bytes per object show the cut auto made "+
				"(wal+latency cuts at the value itself)", m))
		case isCutKey && !slices.Contains(policyCutKeys[p], key):
			why := ""
			if key == "wal.upload.interval.ms" {
				why = " (a value above wal.upload.max.interval.ms raises that to it)"
			}
			notes = append(notes, fmt.Sprintf("%s (wal.policy=%s) does not cut objects by %s%s: it cuts by %s, so its points differ by noise",
				m, p, key, why, strings.Join(policyCutKeys[p], " and ")))
		}
	}
	return notes
}

// writeSweepText writes the frontier table: one row per point, classic's
// first, then the sweep's notes.
func (r *Report) writeSweepText(w io.Writer) error {
	sw := r.Sweep
	fmt.Fprintf(w, "sweep: %s = %s\n\n", sw.Key, strings.Join(sw.Values, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	acks := "acks=" + r.Settings.Acks
	fmt.Fprintln(tw, strings.Join([]string{"mode", "wal.policy", sw.Key,
		acks + " p50 (ms)", acks + " p99 (ms)", "e2e p99 (ms)", "PUTs/s per broker",
		"USD/GB produced", "cost/classic", "B per object", "MB/s"}, "\t"))
	row := func(p *SweepPoint) {
		policy, value := p.WALPolicy, p.Value
		if policy == "" {
			policy = "-"
		}
		switch {
		case p.isDefault:
			value = "(defaults)"
		case value == "":
			value = "(reference)"
		}
		fmt.Fprintln(tw, strings.Join([]string{p.Mode, policy, value,
			FormatValue(p.ProduceP50Ms), FormatValue(p.ProduceP99Ms), FormatValue(p.EndToEndP99Ms),
			FormatValue(p.PutsPerSecondPerBroker), FormatValue(p.CostUSDPerGBProduced), FormatRatio(p.CostRatioToClassic),
			formatCount(p.WALObjectBytes), FormatValue(p.ThroughputMBps)}, "\t"))
	}
	if sw.Classic != nil {
		row(sw.Classic)
	}
	for i := range sw.Points {
		row(&sw.Points[i])
	}
	if sw.Default != nil {
		row(sw.Default)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(sw.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range sw.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	return nil
}
