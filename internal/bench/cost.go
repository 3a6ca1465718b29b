package bench

// Metric names of the brokers' replication cost (broker/cost).
const (
	metricCostUSD        = "strata_replication_cost_usd_total" // {path: wal, inline, classic_equivalent}
	metricCostProduced   = "strata_replication_produced_bytes_total"
	metricPolicySwitches = "strata_wal_policy_switches_total" // {to, reason}
	metricPolicyInline   = "strata_wal_policy_inline"
	metricClientCostUSD  = "strata_client_cost_usd_total" // {path: produce, consume}
)

// CostFigures are a mode's replication cost over the window, priced by
// the brokers with their price table (cost.price.*, default S3 Express One
// Zone and $0.01/GB each way across zones): the fast tier's requests and
// the bytes sent across zones, per GB (1e9 bytes) the leaders appended.
type CostFigures struct {
	// USD is the replication cost of the window (paths wal and inline);
	// ClassicUSD what classic replication of the same appends costs.
	USD        *float64 `json:"usd"`
	ClassicUSD *float64 `json:"classic_equivalent_usd"`
	// ProducedBytes are the bytes the leaders appended.
	ProducedBytes *float64 `json:"produced_bytes"`
	// USDPerGBProduced = USD / ProducedBytes × 1e9.
	USDPerGBProduced        *float64 `json:"usd_per_gb_produced"`
	ClassicUSDPerGBProduced *float64 `json:"classic_usd_per_gb_produced"`
	// ClientUSD is the cross-zone transfer cost of the clients' traffic
	// (producers and consumers of another zone than their broker's; both
	// directions); ProducerUSD its producers' part. Per GB produced:
	// ClientUSDPerGBProduced, and TotalUSDPerGBProduced = (USD +
	// ClientUSD) per GB, the whole bill. Nil from brokers that do not
	// export strata_client_cost_usd_total.
	ClientUSD              *float64 `json:"client_usd"`
	ProducerUSD            *float64 `json:"producer_usd"`
	ClientUSDPerGBProduced *float64 `json:"client_usd_per_gb_produced"`
	TotalUSDPerGBProduced  *float64 `json:"total_usd_per_gb_produced"`
	// WALObjectBytes is the leader bytes per object PUT in the window
	// (produced bytes over PUT calls, all brokers): the object size S of
	// the cost model (docs/wal.md "Cost and wal.policy"), whose PUT term
	// is the bulk of the WAL cost. Nil without PUTs.
	WALObjectBytes *float64 `json:"wal_object_bytes,omitempty"`
	// PolicySwitches: wal.policy=auto path switches in the window, all
	// brokers; PolicyInlineBrokers: brokers replicating inline by policy
	// at the window's end (nil without WAL).
	PolicySwitches      *float64 `json:"wal_policy_switches,omitempty"`
	PolicyInlineBrokers *float64 `json:"wal_policy_inline_brokers,omitempty"`
}

// ComputeCost turns per-broker scrapes before and after the window into
// CostFigures; figures are nil unless every broker exports them.
func ComputeCost(before, after []Scrape) CostFigures {
	var cf CostFigures
	n := min(len(before), len(after))
	if n == 0 {
		return cf
	}
	delta := func(name string, match func(map[string]string) bool) *float64 {
		total := 0.0
		for i := range n {
			if before[i] == nil || after[i] == nil || !after[i].Has(name) {
				return nil
			}
			a, _ := after[i].Sum(name, match)
			b, _ := before[i].Sum(name, match)
			if a < b {
				return nil
			}
			total += a - b
		}
		return &total
	}
	path := func(p ...string) func(map[string]string) bool {
		return func(l map[string]string) bool {
			for _, x := range p {
				if l["path"] == x {
					return true
				}
			}
			return false
		}
	}
	cf.USD = delta(metricCostUSD, path("wal", "inline"))
	cf.ClassicUSD = delta(metricCostUSD, path("classic_equivalent"))
	cf.ProducedBytes = delta(metricCostProduced, nil)
	perGB := func(usd *float64) *float64 {
		if usd == nil || cf.ProducedBytes == nil || *cf.ProducedBytes <= 0 {
			return nil
		}
		return ptr(*usd / *cf.ProducedBytes * 1e9)
	}
	cf.USDPerGBProduced = perGB(cf.USD)
	cf.ClassicUSDPerGBProduced = perGB(cf.ClassicUSD)
	cf.ClientUSD = delta(metricClientCostUSD, nil)
	cf.ProducerUSD = delta(metricClientCostUSD, path("produce"))
	cf.ClientUSDPerGBProduced = perGB(cf.ClientUSD)
	if cf.USD != nil && cf.ClientUSD != nil {
		cf.TotalUSDPerGBProduced = perGB(ptr(*cf.USD + *cf.ClientUSD))
	}
	if puts := delta(metricObjRequests, func(l map[string]string) bool { return l["op"] == "put" }); puts != nil && *puts > 0 && cf.ProducedBytes != nil {
		cf.WALObjectBytes = ptr(*cf.ProducedBytes / *puts)
	}
	cf.PolicySwitches = delta(metricPolicySwitches, nil)
	inline := 0.0
	for i := range n {
		if after[i] == nil || !after[i].Has(metricPolicyInline) {
			return cf
		}
		v, _ := after[i].Sum(metricPolicyInline, nil)
		inline += v
	}
	cf.PolicyInlineBrokers = &inline
	return cf
}
