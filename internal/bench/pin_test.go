package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPinLoadGeneratorPlacement: the header and the JSON say where the
// load generator ran: with the object store (the default) or, with
// --pin-load-generator=brokers, with the brokers.
func TestPinLoadGeneratorPlacement(t *testing.T) {
	for _, tc := range []struct {
		load     []int
		want     string
		wantJSON string
	}{
		{[]int{1}, "brokers on CPUs [0]; object store and load generator on CPUs [1]", `"load_generator_cpus":[1]`},
		{[]int{0}, "brokers and load generator on CPUs [0]; object store on CPUs [1]", `"load_generator_cpus":[0]`},
	} {
		p := PinSettings{Enabled: true, CPUPlan: CPUPlan{Brokers: []int{0}, Others: []int{1}, LoadGenerator: tc.load}}
		if got := p.describe(); got != tc.want {
			t.Errorf("load generator on %v: %q, want %q", tc.load, got, tc.want)
		}
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(js), tc.wantJSON) {
			t.Errorf("JSON %s lacks %s", js, tc.wantJSON)
		}
	}
}
