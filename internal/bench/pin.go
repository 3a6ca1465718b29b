package bench

import (
	"fmt"
	"slices"
	"time"
)

// Fair bench (issue #18 item 1): with two CPUs or more, the broker
// processes run on one CPU set and the object store (Versity, dev's
// child process) and the load generator (this process) on the other, the
// same in every mode, so that the S3 server's CPU — which a real
// deployment does not pay on the brokers — does not count against WAL
// mode, and the load generator does not take the brokers' CPU.

// CPUPlan is how a run pins processes: Brokers for the brokers (strata
// dev: brokers and its embedded etcd), Others for the object store, and
// LoadGenerator for the load generator (this process): Others by
// default; Brokers with --pin-load-generator=brokers, which keeps the
// object store's CPU (WAL mode only) off the clients' CPU too, at the
// price of the load generator sharing the brokers' CPU in every mode.
type CPUPlan struct {
	Brokers       []int `json:"broker_cpus"`
	Others        []int `json:"other_cpus"`
	LoadGenerator []int `json:"load_generator_cpus,omitempty"`
}

// describe is the pinning in words, for the text header and progress.
func (p PinSettings) describe() string {
	if slices.Equal(p.LoadGenerator, p.Brokers) && len(p.Brokers) > 0 {
		return fmt.Sprintf("brokers and load generator on CPUs %v; object store on CPUs %v", p.Brokers, p.Others)
	}
	return fmt.Sprintf("brokers on CPUs %v; object store and load generator on CPUs %v", p.Brokers, p.Others)
}

// PlanCPUs splits the CPUs this process may use: the first half (at
// least one) for the brokers, the rest for everything else. ok is false
// with fewer than two CPUs (nothing to split).
func PlanCPUs(available []int) (CPUPlan, bool) {
	if len(available) < 2 {
		return CPUPlan{}, false
	}
	half := len(available) / 2
	return CPUPlan{Brokers: append([]int(nil), available[:half]...), Others: append([]int(nil), available[half:]...)}, true
}

// PinSettings is the pinning of a run, in the JSON settings.
type PinSettings struct {
	Enabled bool `json:"enabled"`
	CPUPlan
	// Reason says why pinning is off (--pin=false, one CPU, not Linux,
	// an external cluster) or what failed.
	Reason string `json:"reason,omitempty"`
}

// BrokerCPU is the CPU time (user + system, from the processes' own
// accounting: /proc/<pid>/stat) the broker processes used in the
// measured window, and per GB (1e9 bytes) of record bytes produced.
type BrokerCPU struct {
	Seconds             float64 `json:"seconds"`
	SecondsPerGBProduce float64 `json:"seconds_per_gb_produced"`
}

// cpuReader reads the CPU time of the broker processes; nil when unknown.
func brokerCPUTime(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		d, err := processCPUTime(pid)
		if err != nil {
			return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
		}
		total += d
	}
	return total, nil
}
