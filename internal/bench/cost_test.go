package bench

import (
	"math"
	"strconv"
	"testing"
)

func TestComputeCost(t *testing.T) {
	scrape := func(wal, inline, classic, produced, switches, policyInline float64) Scrape {
		return mustParse(t, `# TYPE strata_client_cost_usd_total counter
strata_client_cost_usd_total{path="produce"} `+ftoa(inline/2)+`
strata_client_cost_usd_total{path="consume"} `+ftoa(wal/4)+`
# TYPE strata_objstore_requests_total counter
strata_objstore_requests_total{bucket="wal-a",op="put",result="ok",zone="a"} `+ftoa(produced/250e3)+`
strata_objstore_requests_total{bucket="wal-a",op="get",result="ok",zone="a"} 7
# TYPE strata_replication_cost_usd_total counter
strata_replication_cost_usd_total{path="wal"} `+ftoa(wal)+`
strata_replication_cost_usd_total{path="inline"} `+ftoa(inline)+`
strata_replication_cost_usd_total{path="classic_equivalent"} `+ftoa(classic)+`
# TYPE strata_replication_produced_bytes_total counter
strata_replication_produced_bytes_total `+ftoa(produced)+`
# TYPE strata_wal_policy_switches_total counter
strata_wal_policy_switches_total{reason="below_break_even",to="inline"} `+ftoa(switches)+`
# TYPE strata_wal_policy_inline gauge
strata_wal_policy_inline `+ftoa(policyInline)+`
`)
	}
	before := []Scrape{scrape(1, 1, 10, 1e9, 0, 0), scrape(0, 0, 0, 0, 0, 0)}
	// Broker 0: 2 GB appended, $0.004 of objects, $0.001 inline; classic
	// would have cost $0.08. Broker 1: 1 GB, $0.04 inline (it switched
	// to inline), classic $0.04.
	after := []Scrape{scrape(1.004, 1.001, 10.08, 3e9, 0, 0), scrape(0, 0.04, 0.04, 1e9, 1, 1)}
	cf := ComputeCost(before, after)
	near := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, val(got), want)
		}
	}
	near("usd", cf.USD, 0.045)
	near("classic usd", cf.ClassicUSD, 0.12)
	near("usd per GB", cf.USDPerGBProduced, 0.015)
	near("classic usd per GB", cf.ClassicUSDPerGBProduced, 0.04)
	// Clients: produce inline/2 (0.0005 + 0.02), consume wal/4 (0.001).
	near("client usd", cf.ClientUSD, 0.0215)
	near("producer usd", cf.ProducerUSD, 0.0205)
	near("client usd per GB", cf.ClientUSDPerGBProduced, 0.0215/3)
	near("total usd per GB", cf.TotalUSDPerGBProduced, (0.045+0.0215)/3)
	near("switches", cf.PolicySwitches, 1)
	near("inline brokers", cf.PolicyInlineBrokers, 1)
	// One PUT per 250 KB produced on both brokers (GETs not counted).
	near("bytes per WAL object", cf.WALObjectBytes, 250e3)

	// A broker without the cost metrics (an older binary): n/a.
	old := mustParse(t, "# TYPE go_goroutines gauge\ngo_goroutines 7\n")
	if cf := ComputeCost([]Scrape{before[0], old}, []Scrape{after[0], old}); cf.USDPerGBProduced != nil || cf.PolicyInlineBrokers != nil {
		t.Errorf("cost with a broker lacking the metrics: %v per GB, %v inline; want n/a", val(cf.USDPerGBProduced), val(cf.PolicyInlineBrokers))
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
