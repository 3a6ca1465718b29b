// Command testreport prints the end of `make test`'s output (hack/test.sh):
// the slowest Ginkgo specs, then every failed test and spec with its
// message, so that what failed is in the last lines and not above
// thousands of lines of test output.
//
//	go run ./hack/testreport [-slowest 15] [-ginkgo ginkgo.json[,ginkgo-2.json]] go-test.json...
//
// The go-test.json files are `go test -json` output (gotestsum --jsonfile);
// ginkgo.json is a Ginkgo JSON report (controllers' suite writes one when
// STRATA_GINKGO_REPORT names it). Missing files are skipped: a package
// that did not build writes no report.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

func main() {
	slowest := flag.Int("slowest", 15, "list this many of the slowest Ginkgo specs")
	ginkgo := flag.String("ginkgo", "", "Ginkgo JSON reports, comma-separated (the controllers' suite writes one per process)")
	lines := flag.Int("lines", 12, "message lines shown per failed test")
	flag.Parse()
	if err := run(os.Stdout, flag.Args(), *ginkgo, *slowest, *lines); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, goFiles []string, ginkgoFile string, slowest, lines int) error {
	var specs []spec
	for _, f := range strings.Split(ginkgoFile, ",") {
		if f == "" {
			continue
		}
		ss, err := readGinkgo(f)
		if err != nil {
			return err
		}
		specs = append(specs, ss...)
	}
	var fails []goFailure
	for _, f := range goFiles {
		ff, err := readGoFailures(f, lines)
		if err != nil {
			return err
		}
		fails = append(fails, ff...)
	}
	var ran []spec
	for _, s := range specs {
		if s.State != "skipped" && s.State != "pending" {
			ran = append(ran, s)
		}
	}
	if len(ran) > 0 {
		sort.SliceStable(ran, func(i, j int) bool { return ran[i].RunTime > ran[j].RunTime })
		fmt.Fprintf(w, "== Slowest Ginkgo specs (top %d of %d run)\n", min(slowest, len(ran)), len(ran))
		for _, s := range ran[:min(slowest, len(ran))] {
			fmt.Fprintf(w, "%8.2fs  %s\n", s.RunTime.Seconds(), s.name())
		}
	}
	var failedSpecs []spec
	for _, s := range specs {
		if s.failed() {
			failedSpecs = append(failedSpecs, s)
		}
	}
	if len(fails) == 0 && len(failedSpecs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "== Failed: %d tests, %d Ginkgo specs (whole output: the go test -json files %s)\n",
		len(fails), len(failedSpecs), strings.Join(goFiles, " "))
	for _, s := range failedSpecs {
		fmt.Fprintf(w, "--- %s: %s (%.2fs)\n", strings.ToUpper(s.State), s.name(), s.RunTime.Seconds())
		fmt.Fprintf(w, "    %s:%d\n", s.Failure.Location.FileName, s.Failure.Location.LineNumber)
		for _, l := range lastLines(strings.Split(strings.TrimRight(s.Failure.Message, "\n"), "\n"), lines) {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	for _, f := range fails {
		fmt.Fprintf(w, "--- FAIL: %s %s (%.2fs)\n", f.pkg, cmpOr(f.test, "[package]"), f.elapsed)
		for _, l := range f.lines {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// spec is the part of a Ginkgo SpecReport the summary prints.
type spec struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	RunTime                 time.Duration
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

func (s spec) name() string {
	parts := append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText)
	name := strings.TrimSpace(strings.Join(parts, " "))
	if s.LeafNodeType != "" && s.LeafNodeType != "It" {
		name = strings.TrimSpace("[" + s.LeafNodeType + "] " + name)
	}
	return name
}

func (s spec) failed() bool {
	switch s.State {
	case "failed", "panicked", "timedout", "aborted", "interrupted":
		return true
	}
	return false
}

func readGinkgo(path string) ([]spec, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var reports []struct{ SpecReports []spec }
	if err := json.Unmarshal(raw, &reports); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var specs []spec
	for _, r := range reports {
		specs = append(specs, r.SpecReports...)
	}
	return specs, nil
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // of build-output: "pkg [pkg.test]"
	Test       string
	Output     string
	Elapsed    float64
}

type goFailure struct {
	pkg, test string
	elapsed   float64
	lines     []string
}

// message matches the lines testing writes for t.Error, t.Fatal and
// t.Log ("    file_test.go:123: ..."); lines indented deeper continue
// the message above them.
var (
	message      = regexp.MustCompile(`^\s+[\w.\-]+\.go:\d+: `)
	continuation = regexp.MustCompile(`^\s{8,}\S`)
	noise        = regexp.MustCompile(`^\s*(=== (RUN|PAUSE|CONT|NAME)|--- (FAIL|PASS|SKIP)|FAIL$|PASS$|ok\s|FAIL\s)`)
)

// readGoFailures returns the failed tests of a go test -json file, the
// innermost only (a failed subtest fails its parent too), and the failed
// packages none of whose tests failed (build errors, a panic or timeout
// outside a test, TestMain's goleak check), each with its last message
// lines.
func readGoFailures(path string, lines int) ([]goFailure, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type key struct{ pkg, test string }
	output := map[key][]string{}
	var failed []goFailure
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // gotestsum may interleave non-JSON lines (build output)
		}
		if e.Package == "" && e.ImportPath != "" {
			e.Package, _, _ = strings.Cut(e.ImportPath, " ")
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output", "build-output":
			output[k] = append(output[k], strings.TrimRight(e.Output, "\n"))
		case "fail":
			failed = append(failed, goFailure{pkg: e.Package, test: e.Test, elapsed: e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []goFailure
	for _, fl := range failed {
		if hasFailedChild(failed, fl) {
			continue
		}
		all := output[key{fl.pkg, fl.test}]
		if fl.test == "" {
			// Package level: the end of its output says why (a build
			// error, a panic, "FAIL ... [setup failed]").
			var kept []string
			for _, l := range all {
				if !noise.MatchString(l) && strings.TrimSpace(l) != "" {
					kept = append(kept, l)
				}
			}
			fl.lines = lastLines(kept, lines)
		} else {
			fl.lines = lastLines(messages(all), lines)
		}
		out = append(out, fl)
	}
	return out, nil
}

func hasFailedChild(failed []goFailure, parent goFailure) bool {
	for _, f := range failed {
		if f.pkg != parent.pkg {
			continue
		}
		if parent.test == "" && f.test != "" {
			return true
		}
		if parent.test != "" && strings.HasPrefix(f.test, parent.test+"/") {
			return true
		}
	}
	return false
}

// messages keeps the file:line lines of a test's output and their
// continuations; if there are none (a panic), the raw output.
func messages(all []string) []string {
	var kept []string
	in := false
	for _, l := range all {
		switch {
		case message.MatchString(l):
			in = true
			kept = append(kept, strings.TrimSpace(l))
		case in && continuation.MatchString(l):
			kept = append(kept, "  "+strings.TrimSpace(l))
		default:
			in = false
		}
	}
	if len(kept) > 0 {
		return kept
	}
	for _, l := range all {
		if !noise.MatchString(l) && strings.TrimSpace(l) != "" {
			kept = append(kept, l)
		}
	}
	return kept
}

func lastLines(l []string, n int) []string {
	if len(l) > n {
		return append([]string{fmt.Sprintf("... (%d lines above)", len(l)-n)}, l[len(l)-n:]...)
	}
	return l
}
