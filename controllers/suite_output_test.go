package controllers_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

// TestSuiteLogger: the suite's operator logs at info level unless
// STRATA_TEST_LOG_LEVEL says otherwise, and without stack traces.
func TestSuiteLogger(t *testing.T) {
	for _, tc := range []struct {
		level string
		debug bool
	}{
		{level: "", debug: false},
		{level: "info", debug: false},
		{level: "debug", debug: true},
		{level: "1", debug: true},
	} {
		t.Run("level="+tc.level, func(t *testing.T) {
			t.Setenv("STRATA_TEST_LOG_LEVEL", tc.level)
			var buf bytes.Buffer
			logger, err := suiteLogger(&buf)
			if err != nil {
				t.Fatal(err)
			}
			logger.V(1).Info("a debug line")
			logger.Info("an info line")
			logger.Error(errors.New("boom"), "an error line")
			out := buf.String()
			if !strings.Contains(out, "an info line") || !strings.Contains(out, "an error line") {
				t.Errorf("info and error lines missing:\n%s", out)
			}
			if got := strings.Contains(out, "a debug line"); got != tc.debug {
				t.Errorf("debug line shown: %v, want %v:\n%s", got, tc.debug, out)
			}
			if n := strings.Count(out, "\n"); n != 2+btoi(tc.debug) {
				t.Errorf("%d lines, want one per call (no stack traces):\n%s", n, out)
			}
		})
	}
	t.Setenv("STRATA_TEST_LOG_LEVEL", "chatty")
	if _, err := suiteLogger(&bytes.Buffer{}); err == nil {
		t.Error("an unknown level is accepted")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFailureSummary: one block per failed spec, with its full name,
// location and message (long messages cut), nothing for a green run.
func TestFailureSummary(t *testing.T) {
	passed := types.SpecReport{LeafNodeType: types.NodeTypeIt, LeafNodeText: "creates a topic", State: types.SpecStatePassed}
	if got := failureSummary(types.Report{SpecReports: types.SpecReports{passed}}); got != nil {
		t.Fatalf("green run: %q", got)
	}
	failed := types.SpecReport{
		ContainerHierarchyTexts: []string{"KafkaTopic controller"}, LeafNodeType: types.NodeTypeIt,
		LeafNodeText: "adopts an existing topic", State: types.SpecStateFailed,
		Failure: types.Failure{Message: "Timed out after 120s.\nExpected\n    <[]string>: [\"adopted existing topic legacy_Events (2 partitions, replication factor 0)\"]",
			Location: types.CodeLocation{FileName: "/src/controllers/kafkatopic_envtest_test.go", LineNumber: 260}},
	}
	long := types.SpecReport{LeafNodeType: types.NodeTypeIt, LeafNodeText: "rolls", State: types.SpecStateTimedout,
		Failure: types.Failure{Message: strings.Repeat("line\n", summaryLines+5), Location: types.CodeLocation{FileName: "roll.go", LineNumber: 1}}}
	got := strings.Join(failureSummary(types.Report{SpecReports: types.SpecReports{passed, failed, long}}), "\n")
	for _, want := range []string{
		"2 failed, of 3 specs that ran",
		"[FAILED] KafkaTopic controller adopts an existing topic\n    at /src/controllers/kafkatopic_envtest_test.go:260\n    Timed out after 120s.",
		"replication factor 0",
		"[TIMEDOUT] rolls",
		"... (5 more lines in the spec's report above)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "    line"); n != summaryLines {
		t.Errorf("long message: %d lines kept, want %d", n, summaryLines)
	}
}
