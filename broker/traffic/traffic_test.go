package traffic

import (
	"maps"
	"testing"
)

func TestCounter(t *testing.T) {
	c := New("a")
	c.Add("b", ReplicationInline, Out, 100)
	c.Add("b", ReplicationInline, Out, 50)
	c.Add("a", ReplicationInline, Out, 7)
	c.Add("", Consume, Out, 3)
	c.Add("c", ReplicationInline, In, 0)
	tests := []struct {
		peer string
		path Path
		dir  Direction
		want float64
	}{
		{"b", ReplicationInline, Out, 150},
		{"a", ReplicationInline, Out, 7},
		{UnknownZone, Consume, Out, 3},
		{"c", ReplicationInline, In, 0},
		{"b", Produce, In, 0},
	}
	for _, tt := range tests {
		if got := c.Bytes(tt.peer, tt.path, tt.dir); got != tt.want {
			t.Errorf("Bytes(%s,%s,%s) = %v, want %v", tt.peer, tt.path, tt.dir, got, tt.want)
		}
	}
	if got := c.CrossZone(ReplicationInline, Out); got != 150 {
		t.Errorf("CrossZone = %v, want 150", got)
	}
	var nilC *Counter
	nilC.Add("b", Produce, In, 1) // no panic
}

// TestOnCrossZone: the cost meter's hook sees exactly the bytes exchanged
// with a known other zone, on every path and in both directions.
func TestOnCrossZone(t *testing.T) {
	c := New("a")
	c.KnownZone = func(z string) bool { return z == "a" || z == "b" }
	type pd struct {
		p Path
		d Direction
	}
	got := map[pd]int{}
	c.OnCrossZone = func(p Path, d Direction, n int) { got[pd{p, d}] += n }
	c.Add("b", ReplicationInline, Out, 100)     // counted
	c.Add("b", ReplicationWALMetadata, Out, 7)  // counted
	c.Add("b", ReplicationInline, In, 1000)     // counted as in
	c.Add("b", Produce, In, 50)                 // a producer of zone b
	c.Add("b", Consume, Out, 30)                // a consumer of zone b
	c.Add("a", ReplicationInline, Out, 1000)    // same zone
	c.Add("a", Produce, In, 1000)               // same zone
	c.Add("", Produce, In, 1000)                // unknown zone
	c.Add("mars", ReplicationInline, Out, 1000) // not a broker's zone: other
	want := map[pd]int{{ReplicationInline, Out}: 100, {ReplicationWALMetadata, Out}: 7, {ReplicationInline, In}: 1000, {Produce, In}: 50, {Consume, Out}: 30}
	if !maps.Equal(got, want) {
		t.Fatalf("cross-zone bytes seen %v, want %v", got, want)
	}
}
