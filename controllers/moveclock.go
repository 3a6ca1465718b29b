package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// Moves with a clock: the progress of partition moves (a KafkaRebalance's,
// the operator's drains and scale-up rebalances in status.scaling) is
// timed, so that a move that stopped copying is seen (MovesStalled) and
// one that copies says when it should end.

// ConditionMovesStalled is True when partition moves in flight made no
// progress (bytes left did not fall, no move finished) for the stall
// time: a person must look (a broker that died while receiving a
// replica, a partition whose leader is gone).
const ConditionMovesStalled = "MovesStalled"

// Reasons of MovesStalled.
const (
	ReasonMovesStalled     = "MovesStalled"
	ReasonMovesProgressing = "MovesProgressing"
)

// EventMovesStalled is the Warning event when the moves stall.
const EventMovesStalled = "MovesStalled"

// DefaultMovesStalledAfter is how long moves may go without progress
// before MovesStalled when the spec says nothing.
const DefaultMovesStalledAfter = 10 * time.Minute

// TickMoveClock is prev's clock (nil: the moves start now) at now, for
// moves that have bytesToMove in all, bytesLeft still to copy and done
// moves finished. progressed says whether they progressed since the
// last look (bytes left fell, a move finished, or they start now): it
// moves LastProgressTime. The rate is the bytes moved over the time
// since the start; the completion estimate is the bytes left at that
// rate (none before a byte moved, none once nothing is left).
func TickMoveClock(prev *strata.MoveClock, now time.Time, bytesToMove, bytesLeft int64, progressed bool) strata.MoveClock {
	t := metav1.NewTime(now)
	c := strata.MoveClock{StartTime: &t, LastProgressTime: &t}
	if prev != nil && prev.StartTime != nil {
		c.StartTime = prev.StartTime.DeepCopy()
		if !progressed && prev.LastProgressTime != nil {
			c.LastProgressTime = prev.LastProgressTime.DeepCopy()
		}
	}
	c.BytesMoved = max(0, bytesToMove-bytesLeft)
	elapsed := now.Sub(c.StartTime.Time)
	if elapsed >= time.Second && c.BytesMoved > 0 {
		c.BytesPerSecond = int64(float64(c.BytesMoved) / elapsed.Seconds())
	}
	if c.BytesPerSecond > 0 && bytesLeft > 0 {
		eta := metav1.NewTime(now.Add(time.Duration(float64(bytesLeft) / float64(c.BytesPerSecond) * float64(time.Second))).Truncate(time.Second))
		c.EstimatedCompletionTime = &eta
	}
	return c
}

// MovesStalledFor says how long the moves went without progress at now,
// when that is at least after (0 and false otherwise, or when nothing is
// in flight).
func MovesStalledFor(c strata.MoveClock, now time.Time, inFlight int, after time.Duration) (time.Duration, bool) {
	if inFlight == 0 || c.LastProgressTime == nil {
		return 0, false
	}
	d := now.Sub(c.LastProgressTime.Time)
	return d, d >= after
}
