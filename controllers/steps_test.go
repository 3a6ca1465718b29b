package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// TestRunSteps: the first failing step ends the run; a topicStop gives
// its reason, any other error kafkaFailure's; retry returns the error
// (named by the step) for backoff, otherwise a requeue after the interval
// the steps left; an event is written only when Ready changes.
func TestRunSteps(t *testing.T) {
	type scope struct {
		ran     []string
		requeue time.Duration
	}
	ok := func(name string) step[*scope] {
		return step[*scope]{name, func(_ context.Context, s *scope) error { s.ran = append(s.ran, name); return nil }}
	}
	fail := func(name string, err error) step[*scope] {
		return step[*scope]{name, func(_ context.Context, s *scope) error {
			s.ran = append(s.ran, name)
			s.requeue = 7 * time.Second // a step may change the interval
			return err
		}}
	}
	for _, tc := range []struct {
		name      string
		steps     []step[*scope]
		ran       int
		stopped   bool
		reason    string
		err       string
		requeue   time.Duration
		prevReady *metav1.Condition
		events    int
	}{
		{name: "all pass", steps: []step[*scope]{ok("a"), ok("b")}, ran: 2},
		{name: "stop without retry", steps: []step[*scope]{ok("a"), fail("b", &topicStop{reason: "Conflict", message: "m"}), ok("c")},
			ran: 2, stopped: true, reason: "Conflict", requeue: 7 * time.Second, events: 1},
		{name: "stop with retry", steps: []step[*scope]{fail("a", &topicStop{reason: "ClusterNotFound", message: "m", retry: true})},
			ran: 1, stopped: true, reason: "ClusterNotFound", err: "a: m", events: 1},
		{name: "broker error code", steps: []step[*scope]{fail("describe", kerr.PolicyViolation)},
			ran: 1, stopped: true, reason: ReasonKafkaError, err: "describe: " + kerr.PolicyViolation.Error(), events: 1},
		{name: "other error", steps: []step[*scope]{fail("describe", errors.New("dial tcp: refused"))},
			ran: 1, stopped: true, reason: ReasonKafkaUnreachable, err: "describe: dial tcp: refused", events: 1},
		{name: "same Ready again: no event", steps: []step[*scope]{fail("a", &topicStop{reason: "Conflict", message: "m"})},
			ran: 1, stopped: true, reason: "Conflict", requeue: 7 * time.Second,
			prevReady: &metav1.Condition{Type: strata.ConditionReady, Status: metav1.ConditionFalse, Reason: "Conflict", Message: "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kt := &strata.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Name: "t", Generation: 2}}
			if tc.prevReady != nil {
				kt.Status.Conditions = []metav1.Condition{*tc.prevReady}
			}
			rec := events.NewFakeRecorder(10)
			s := &scope{requeue: time.Minute}
			rep := stepReport{object: kt, conditions: &kt.Status.Conditions, event: EventTopicNotReady, what: "topic",
				setReady: func(status metav1.ConditionStatus, reason, msg string) { setTopicCondition(kt, status, reason, msg) }}
			res, stopped, err := runSteps(context.Background(), rec, rep, &s.requeue, s, tc.steps)
			if len(s.ran) != tc.ran || stopped != tc.stopped {
				t.Fatalf("ran %v, stopped %v; want %d steps, stopped %v", s.ran, stopped, tc.ran, tc.stopped)
			}
			if got := errString(err); got != tc.err {
				t.Errorf("error %q, want %q", got, tc.err)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tc.requeue)
			}
			if tc.stopped {
				c := meta.FindStatusCondition(kt.Status.Conditions, strata.ConditionReady)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
					t.Errorf("Ready %+v, want False %s", c, tc.reason)
				}
			}
			if len(rec.Events) != tc.events {
				t.Errorf("%d events, want %d", len(rec.Events), tc.events)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
