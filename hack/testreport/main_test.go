package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goJSON is go test -json of a package with a failed subtest among
// logging, a passing test, and a package that did not build.
const goJSON = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestOK"}
{"Action":"pass","Package":"ex/a","Test":"TestOK","Elapsed":0.1}
{"Action":"run","Package":"ex/a","Test":"TestX"}
{"Action":"output","Package":"ex/a","Test":"TestX/sub","Output":"=== RUN   TestX/sub\n"}
{"Action":"output","Package":"ex/a","Test":"TestX/sub","Output":"debug line from a broker\n"}
{"Action":"output","Package":"ex/a","Test":"TestX/sub","Output":"    x_test.go:42: offset = 7, want 9\n"}
{"Action":"output","Package":"ex/a","Test":"TestX/sub","Output":"        more detail\n"}
{"Action":"output","Package":"ex/a","Test":"TestX/sub","Output":"another debug line\n"}
{"Action":"output","Package":"ex/a","Test":"TestX/sub","Output":"    --- FAIL: TestX/sub (1.50s)\n"}
{"Action":"fail","Package":"ex/a","Test":"TestX/sub","Elapsed":1.5}
{"Action":"fail","Package":"ex/a","Test":"TestX","Elapsed":1.6}
{"Action":"fail","Package":"ex/a","Elapsed":2}
{"ImportPath":"ex/b","Action":"build-output","Output":"# ex/b\n"}
{"Action":"output","Package":"ex/b","Output":"b.go:3:1: syntax error\n"}
{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b [build failed]\n"}
{"Action":"fail","Package":"ex/b","Elapsed":0}
`

const ginkgoJSON = `[{"SpecReports":[
 {"ContainerHierarchyTexts":["KafkaTopic controller"],"LeafNodeText":"adopts an existing topic","LeafNodeType":"It","State":"failed","RunTime":12000000000,
  "Failure":{"Message":"Expected\n    <string>: replication factor 0\nto equal 3","Location":{"FileName":"/src/controllers/topic_test.go","LineNumber":77}}},
 {"ContainerHierarchyTexts":["KafkaCluster"],"LeafNodeText":"rolls","LeafNodeType":"It","State":"passed","RunTime":30000000000},
 {"LeafNodeType":"BeforeSuite","State":"passed","RunTime":5000000000},
 {"ContainerHierarchyTexts":["KafkaUser"],"LeafNodeText":"not focused","LeafNodeType":"It","State":"skipped","RunTime":90000000000}
]}]`

func TestReport(t *testing.T) {
	dir := t.TempDir()
	goFile, ginkgoFile := filepath.Join(dir, "go.json"), filepath.Join(dir, "ginkgo.json")
	if err := os.WriteFile(goFile, []byte(goJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ginkgoFile, []byte(ginkgoJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := run(&b, []string{goFile, filepath.Join(dir, "missing.json")}, ginkgoFile, 2, 12); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	want := `== Slowest Ginkgo specs (top 2 of 3 run)
   30.00s  KafkaCluster rolls
   12.00s  KafkaTopic controller adopts an existing topic
== Failed: 2 tests, 1 Ginkgo specs (whole output: the go test -json files ` + goFile + " " + filepath.Join(dir, "missing.json") + `)
--- FAILED: KafkaTopic controller adopts an existing topic (12.00s)
    /src/controllers/topic_test.go:77
    Expected
        <string>: replication factor 0
    to equal 3
--- FAIL: ex/a TestX/sub (1.50s)
    x_test.go:42: offset = 7, want 9
      more detail
--- FAIL: ex/b [package] (0.00s)
    # ex/b
    b.go:3:1: syntax error
`
	if got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}

func TestLastLinesCountsWhatItDrops(t *testing.T) {
	got := lastLines([]string{"a", "b", "c"}, 2)
	if strings.Join(got, "|") != "... (1 lines above)|b|c" {
		t.Errorf("lastLines = %q", got)
	}
}
