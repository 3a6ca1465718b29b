package controllers_test

import (
	"slices"
	"testing"

	"github.com/strata-dev/strata/controllers"
)

func TestCordonChanges(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		toRemove, ours         []int32
		wantCordon, wantUncord []int32
	}{
		{"a scale-down starts", []int32{3, 1}, nil, []int32{1, 3}, nil},
		{"cordoned already", []int32{1, 3}, []int32{1, 3}, nil, nil},
		{"broker 3 gone from the metadata", []int32{1}, []int32{1, 3}, nil, []int32{3}},
		{"cancelled: the spec wants them again", nil, []int32{1, 3}, nil, []int32{1, 3}},
		{"one more to remove", []int32{1, 2}, []int32{1}, []int32{2}, nil},
		{"nothing", nil, nil, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cordon, uncordon := controllers.CordonChanges(tt.toRemove, tt.ours)
			if !slices.Equal(cordon, tt.wantCordon) || !slices.Equal(uncordon, tt.wantUncord) {
				t.Fatalf("CordonChanges(%v, %v) = %v, %v; want %v, %v", tt.toRemove, tt.ours, cordon, uncordon, tt.wantCordon, tt.wantUncord)
			}
		})
	}
}
