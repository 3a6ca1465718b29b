package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClientSecurityFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw, user, ca := write("password", "s3cret\n"), write("username", "journey-app"), write("ca.crt", "pem")

	if s, err := (&clientSecurityFlags{mechanism: "SCRAM-SHA-512"}).security(); s != nil || err != nil {
		t.Fatalf("no flags: %v, %v; want PLAINTEXT", s, err)
	}
	s, err := (&clientSecurityFlags{caFile: ca, mechanism: "SCRAM-SHA-256", userFile: user, passwordFile: pw}).security()
	if err != nil {
		t.Fatal(err)
	}
	if s.User != "journey-app" || s.Password != "s3cret" || s.Mechanism != "SCRAM-SHA-256" || s.CAFile != ca {
		t.Fatalf("security = %+v", s)
	}
	for _, tc := range []struct {
		f    clientSecurityFlags
		want string
	}{
		{clientSecurityFlags{user: "u", mechanism: "SCRAM-SHA-512", passwordFile: pw}, "needs --tls-ca-file"},
		{clientSecurityFlags{caFile: ca, user: "u", mechanism: "PLAIN", passwordFile: pw}, "--sasl-mechanism"},
		{clientSecurityFlags{caFile: ca, user: "u", mechanism: "SCRAM-SHA-512", passwordFile: filepath.Join(dir, "none")}, "--sasl-password-file"},
	} {
		if _, err := tc.f.security(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: err = %v, want %q", tc.f, err, tc.want)
		}
	}
}
