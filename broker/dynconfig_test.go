package broker

import "testing"

func TestThrottledReplicaLists(t *testing.T) {
	for _, tc := range []struct {
		list      string
		valid     bool
		partition int32
		broker    int32
		on        bool
	}{
		{"", true, 0, 1, false},
		{"*", true, 7, 9, true},
		{" * ", true, 7, 9, true},
		{"0:1,1:2", true, 1, 2, true},
		{"0:1,1:2", true, 1, 1, false},
		{"0:1, 1:2 ,", true, 1, 2, true},
		{"10:1", true, 1, 1, false},
		{"0-1", false, 0, 1, false},
		{"0:1:2", false, 0, 1, false},
		{"*,0:1", false, 0, 1, false},
		{"0:-1", false, 0, 1, false},
		{"0:+1", false, 0, 1, false},
		{"99999999999:1", false, 0, 1, false},
	} {
		err := throttledReplicaList(tc.list)
		if (err == nil) != tc.valid {
			t.Errorf("throttledReplicaList(%q) = %v, want valid %v", tc.list, err, tc.valid)
		}
		if tc.valid {
			if got := throttledOn(tc.list, tc.partition, tc.broker); got != tc.on {
				t.Errorf("throttledOn(%q, %d, %d) = %v, want %v", tc.list, tc.partition, tc.broker, got, tc.on)
			}
		}
	}
}
