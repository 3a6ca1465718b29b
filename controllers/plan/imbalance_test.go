package plan

import (
	"strings"
	"testing"
)

func TestImbalance(t *testing.T) {
	// Zone a has brokers 0 and 1, b has 100, c has 200.
	four := []Wanted{{Zone: "a", ID: 0}, {Zone: "a", Ordinal: 1, ID: 1}, {Zone: "b", ID: 100}, {Zone: "c", ID: 200}}
	const mib = 1 << 20
	for _, tt := range []struct {
		name     string
		loads    map[int32]Load
		hasBytes bool
		pct      int
		want     string // "" balanced, else a substring
	}{
		{"nothing anywhere", map[int32]Load{}, false, 10, ""},
		{"balanced counts, zones of different size ignored", map[int32]Load{0: {Replicas: 6}, 1: {Replicas: 6}, 100: {Replicas: 12}, 200: {Replicas: 12}}, false, 10, ""},
		{"within one replica", map[int32]Load{0: {Replicas: 7}, 1: {Replicas: 6}}, false, 10, ""},
		{"a broker holds nothing", map[int32]Load{0: {Replicas: 12}, 1: {}}, false, 10, "broker 1 (zone \"a\") holds no replica"},
		{"a topic on the new broker first: it holds one, the other twelve", map[int32]Load{0: {Replicas: 12}, 1: {Replicas: 1}}, false, 10, "holds 12 replicas, the zone's mean is 6.5"},
		{"an empty broker whatever the tolerance", map[int32]Load{0: {Replicas: 12}, 1: {}}, false, 1000, "broker 1 (zone \"a\") holds no replica while its zone holds 12"},
		{"too few replicas for both", map[int32]Load{0: {Replicas: 1}, 1: {}}, false, 10, ""},
		{"a wide tolerance keeps it", map[int32]Load{0: {Replicas: 12}, 1: {Replicas: 8}}, false, 50, ""},
		{"the same at 10%", map[int32]Load{0: {Replicas: 12}, 1: {Replicas: 8}}, false, 10, "broker 0"},
		{"bytes off, counts even", map[int32]Load{0: {Replicas: 6, Bytes: 900 * mib}, 1: {Replicas: 6, Bytes: 100 * mib}}, true, 10, "holds 943718400 bytes"},
		{"bytes off but unknown", map[int32]Load{0: {Replicas: 6, Bytes: 900 * mib}, 1: {Replicas: 6}}, false, 10, ""},
		{"bytes within the tolerance", map[int32]Load{0: {Replicas: 6, Bytes: 105 * mib}, 1: {Replicas: 6, Bytes: 100 * mib}}, true, 10, ""},
		{"small bytes below the minimum", map[int32]Load{0: {Replicas: 6, Bytes: 900 << 10}, 1: {Replicas: 6}}, true, 10, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Imbalance(four, tt.loads, tt.hasBytes, tt.pct)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("Imbalance = %q, want %q", got, tt.want)
			}
		})
	}
}
