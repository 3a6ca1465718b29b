package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerRefusesHiddenConfigKeys: `strata broker` exits before it opens
// anything when its properties file spells a key with a form feed or a
// no-break space (issue 26: node.id\f set node.id), naming the line and
// the key.
func TestBrokerRefusesHiddenConfigKeys(t *testing.T) {
	for _, line := range []string{"node.id\f=4242", "super.users\u00a0=User:mallory"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "broker.properties")
		props := "log.dirs=" + filepath.Join(dir, "data") + "\n" + line + "\n"
		if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runStrata(t, "broker", "--config", path, "--listen", "127.0.0.1:0", "--metrics-listen", "")
		if err == nil || !strings.Contains(err.Error(), "config line 2: invalid config key") {
			t.Errorf("strata broker with %q: err %v, want a refusal of line 2\n%s", line, err, out)
		}
		if _, statErr := os.Stat(filepath.Join(dir, "data")); statErr == nil {
			t.Errorf("strata broker with %q created its data directory before refusing the config", line)
		}
	}
}
