//go:build !linux

package bench

import (
	"errors"
	"time"
)

var errNoPin = errors.New("CPU pinning and process CPU time need Linux")

func availableCPUs() ([]int, error)             { return nil, errNoPin }
func pinProcess(int, []int) error               { return errNoPin }
func childPIDs(int) []int                       { return nil }
func processCPUTime(int) (time.Duration, error) { return 0, errNoPin }

const pinSupported = false
