package auth

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzScramConversation feeds client-first and client-final messages to
// the server side of SCRAM (what an unauthenticated client controls). It
// must not panic; an exchange naming anyone but the stored user never
// succeeds; an unknown user is answered with its decoy salt and the
// default iterations; a success answers a server signature. "{r}" in the
// final message stands for the server's combined nonce, so that inputs
// reach the proof check.
func FuzzScramConversation(f *testing.F) {
	for _, seed := range [][2]string{
		{"n,,n=alice,r=abc", "c=biws,r={r},p=AAAA"},
		{"n,,n=bob,r=abc", "c=biws,r={r},p=" + base64.StdEncoding.EncodeToString(make([]byte, 64))},
		{"y,a=alice,n=alice,r=x", "c=eSxhPWFsaWNlLA==,r=x{r},p=AAAA"},
		{"n,,n=a=2Cb=3D,r=1", "r={r},c=biws,p=!"},
		{"p=tls-unique,,n=alice,r=abc", ""},
		{"n,,n=,r=", "c=biws"},
		{"n,,n=alice=,r=abc", "c=biws,r={r},p="},
	} {
		f.Add(seed[0], seed[1])
	}
	store, err := OpenFileStore(filepath.Join(f.TempDir(), "creds.json"))
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	c, err := NewCredential(ScramSHA512, "pw", DefaultIterations)
	if err != nil {
		f.Fatal(err)
	}
	if err := store.AlterScram(ctx, "alice", map[Mechanism]Credential{ScramSHA512: c}, nil); err != nil {
		f.Fatal(err)
	}
	secret, _ := store.ServerSecret(ctx)
	f.Fuzz(func(t *testing.T, c1, c2 string) {
		srv, err := NewScramConversation(ctx, ScramSHA512, store)
		if err != nil {
			t.Fatal(err)
		}
		s1, done, err := srv.Step([]byte(c1))
		if err != nil {
			if !done {
				t.Fatal("failed first step not done")
			}
			return
		}
		attrs := map[string]string{}
		for _, a := range strings.Split(string(s1), ",") {
			if len(a) >= 2 {
				attrs[a[:1]] = a[2:]
			}
		}
		if user := srv.Username(); user != "alice" {
			if want := base64.StdEncoding.EncodeToString(decoyCredential(secret, ScramSHA512, user).Salt); attrs["s"] != want || attrs["i"] != "4096" {
				t.Fatalf("unknown user %q answered %q, want salt %s and 4096 iterations", user, s1, want)
			}
		}
		s2, done, err := srv.Step([]byte(strings.ReplaceAll(c2, "{r}", attrs["r"])))
		if !done {
			t.Fatal("final step not done")
		}
		if err == nil && (srv.Username() != "alice" || !strings.HasPrefix(string(s2), "v=")) {
			t.Fatalf("exchange of %q succeeded with %q", srv.Username(), s2)
		}
		if _, _, err := srv.Step(nil); err == nil {
			t.Fatal("a third message accepted")
		}
	})
}
