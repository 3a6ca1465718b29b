package protocol_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-dev/strata/broker/protocol"
)

// TestDocsAPITable: the hand-written table of docs/broker.md that says
// what each served API key does names the versions the code serves (the
// generated table above it, hack/apitable, is checked by make
// verify-generated). Rows naming several keys ("8-16, 42, 47") are left
// to groups.md.
func TestDocsAPITable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/broker.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "| key | API | versions |")
	if start < 0 {
		t.Fatal("docs/broker.md has no `| key | API | versions |` table")
	}
	row := regexp.MustCompile(`^\| (\d+) \| ([A-Za-z]+) \| (\d+)(?:-(\d+))?\b`)
	seen := 0
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		key, _ := strconv.Atoi(m[1])
		lo, _ := strconv.Atoi(m[3])
		hi := lo
		if m[4] != "" {
			hi, _ = strconv.Atoi(m[4])
		}
		api, ok := protocol.Lookup(int16(key))
		if !ok {
			t.Errorf("docs/broker.md: key %d (%s) is in the table but not served", key, m[2])
			continue
		}
		if int(api.Min) != lo || int(api.Max) != hi {
			t.Errorf("docs/broker.md: key %d (%s) says versions %d-%d, the code serves %d-%d", key, m[2], lo, hi, api.Min, api.Max)
		}
		seen++
	}
	if seen < 30 {
		t.Fatalf("read only %d rows of the table", seen)
	}
}
