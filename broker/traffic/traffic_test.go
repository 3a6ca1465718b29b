package traffic

import "testing"

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
