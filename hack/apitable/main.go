// Command apitable writes the table of Kafka API keys in docs/broker.md
// from the code: every key the broker registers (broker/protocol, which
// also drives ApiVersions) with the versions it serves, beside the newest
// version of each key that franz-go's kmsg knows (it follows Apache
// Kafka's message definitions), and the keys Kafka has that Strata does
// not serve. The table sits between the markers
//
//	<!-- api-table:begin (go run ./hack/apitable -w) -->
//	<!-- api-table:end -->
//
// Without -w it exits 1 when the file's table differs from the code's
// (hack/verify-generated.sh runs it so).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/protocol"
)

const (
	begin = "<!-- api-table:begin (go run ./hack/apitable -w) -->"
	end   = "<!-- api-table:end -->"
)

func main() {
	write := flag.Bool("w", false, "rewrite the file instead of checking it")
	file := flag.String("file", "docs/broker.md", "the Markdown file holding the table")
	flag.Parse()
	if err := run(*file, *write); err != nil {
		fmt.Fprintln(os.Stderr, "apitable:", err)
		os.Exit(1)
	}
}

func run(file string, write bool) error {
	doc, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q block", file, begin, end)
	}
	out := append(append(append([]byte{}, doc[:i+len(begin)]...), table()...), doc[j:]...)
	if bytes.Equal(out, doc) {
		return nil
	}
	if !write {
		return fmt.Errorf("%s: the API table is stale; run go run ./hack/apitable -w", file)
	}
	return os.WriteFile(file, out, 0o644)
}

// table renders the block's contents (between the markers).
func table() string {
	served := map[int16]protocol.API{}
	for _, api := range protocol.APIs() {
		served[api.Key] = api
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n\nGenerated from the code by `go run ./hack/apitable -w` (checked by `make verify-generated`): the versions each key's handler is registered for, which ApiVersions advertises, and the newest version of each key in franz-go's kmsg %s, which follows Apache Kafka's message definitions.\n\n", kmsgVersion())
	b.WriteString("| key | API | Strata serves | Kafka's newest (kmsg) |\n|---|---|---|---|\n")
	var missing []string
	for k := int16(0); k < 1000; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		name := kmsg.NameForKey(k)
		api, ok := served[k]
		if !ok {
			missing = append(missing, fmt.Sprintf("%d %s", k, name))
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d |\n", k, name, versions(api.Min, api.Max), req.MaxVersion())
		delete(served, k)
	}
	for k, api := range served { // registered, unknown to kmsg (Register refuses that)
		fmt.Fprintf(&b, "| %d | ? | %s | ? |\n", k, versions(api.Min, api.Max))
	}
	fmt.Fprintf(&b, "\nNot served (%d keys: ApiVersions does not list them, and a request with one of them closes the connection): %s.\n\n", len(missing), strings.Join(missing, ", "))
	return b.String()
}

func versions(lo, hi int16) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

func kmsgVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go/pkg/kmsg" {
				return d.Version
			}
		}
	}
	return "(version unknown)"
}
