package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

func TestMappingRules(t *testing.T) {
	for _, tc := range []struct {
		rules, subject, want string
		err                  bool
	}{
		{"", "CN=alice,O=acme", "User:CN=alice,O=acme", false},
		{"DEFAULT", "CN=alice", "User:CN=alice", false},
		{`RULE:^CN=([^,]+),O=acme$/$1/L,DEFAULT`, "CN=Alice,O=acme", "User:alice", false},
		{`RULE:^CN=([^,]+),O=acme$/$1/U,DEFAULT`, "CN=Alice,O=other", "User:CN=Alice,O=other", false},
		{`RULE:^CN=(.*)$/svc\/$1/`, "CN=kafka", "User:svc/kafka", false},
		{`RULE:^CN=x$/y/`, "CN=z", "", true},
	} {
		r, err := ParseMappingRules(tc.rules)
		if err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		p, err := r.Principal(tc.subject)
		if (err != nil) != tc.err || string(p) != tc.want {
			t.Errorf("%q on %q: %q, %v; want %q (error %v)", tc.rules, tc.subject, p, err, tc.want, tc.err)
		}
	}
	for _, bad := range []string{"RULE:^x$", "RULE:(/y/", "SOMETHING"} {
		if _, err := ParseMappingRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func newStore(t *testing.T, user, password string) *FileStore {
	t.Helper()
	s, err := OpenFileStore(filepath.Join(t.TempDir(), "creds.json"))
	if err != nil {
		t.Fatal(err)
	}
	ups := map[Mechanism]Credential{}
	for _, m := range Mechanisms {
		c, err := NewCredential(m, password, MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		ups[m] = c
	}
	if err := s.AlterScram(context.Background(), user, ups, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScramConversation runs xdg-go/scram's client (an RFC 5802 client)
// against the server, and the message shape librdkafka sends: its client
// nonce followed by the whole combined nonce in the final message, which
// Kafka accepts (a strict server refused every kcat and confluent-kafka
// client: "nonce received did not match nonce sent").
func TestScramConversation(t *testing.T) {
	store := newStore(t, "alice", "pw")
	ctx := context.Background()
	for _, tc := range []struct {
		name, user, password string
		librdkafka           bool
		ok                   bool
	}{
		{"rfc client", "alice", "pw", false, true},
		{"librdkafka nonce", "alice", "pw", true, true},
		{"wrong password", "alice", "nope", false, false},
		{"unknown user", "bob", "pw", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := NewScramConversation(ctx, ScramSHA512, store)
			if err != nil {
				t.Fatal(err)
			}
			client, err := scram.SHA512.NewClient(tc.user, tc.password, "")
			if err != nil {
				t.Fatal(err)
			}
			conv := client.NewConversation()
			c1, _ := conv.Step("")
			s1, done, err := srv.Step([]byte(c1))
			if err != nil || done {
				t.Fatalf("first step: %v %v", done, err)
			}
			var c2 string
			if tc.librdkafka {
				c2 = librdkafkaFinal(t, c1, string(s1), tc.password)
			} else if c2, err = conv.Step(string(s1)); err != nil {
				t.Fatal(err)
			}
			s2, done, err := srv.Step([]byte(c2))
			if !done || (err == nil) != tc.ok {
				t.Fatalf("final step: done %v err %v, want ok %v", done, err, tc.ok)
			}
			if tc.ok && !tc.librdkafka {
				if _, err := conv.Step(string(s2)); err != nil || !conv.Valid() {
					t.Fatalf("client rejects the server signature: %v", err)
				}
			}
			if tc.ok && srv.Username() != "alice" {
				t.Errorf("user %q", srv.Username())
			}
		})
	}
}

// librdkafkaFinal builds the client-final-message as librdkafka 2.x does
// (rd_kafka_sasl_scram_build_client_final_message_wo_proof): "r=" is the
// client nonce followed by the server's whole "r" value.
func librdkafkaFinal(t *testing.T, c1, s1, password string) string {
	t.Helper()
	cnonce := c1[strings.Index(c1, "r=")+2:]
	attrs := map[string]string{}
	for _, a := range strings.Split(s1, ",") {
		attrs[a[:1]] = a[2:]
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs["s"])
	salted := hi(password, salt)
	mac := func(key []byte, s string) []byte {
		h := hmac.New(sha512.New, key)
		h.Write([]byte(s))
		return h.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha512.Sum512(clientKey)
	wo := "c=biws,r=" + cnonce + attrs["r"]
	auth := c1[3:] + "," + s1 + "," + wo
	sig := mac(stored[:], auth)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return wo + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

// hi is PBKDF2-HMAC-SHA512 with MinIterations (RFC 5802's Hi).
func hi(password string, salt []byte) []byte {
	mac := hmac.New(sha512.New, []byte(password))
	mac.Write(salt)
	mac.Write([]byte{0, 0, 0, 1})
	u := mac.Sum(nil)
	out := append([]byte(nil), u...)
	for i := 1; i < MinIterations; i++ {
		mac.Reset()
		mac.Write(u)
		u = mac.Sum(nil)
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}

func TestCheckPlainAndSaltedCredential(t *testing.T) {
	store := newStore(t, "alice", "pw")
	ctx := context.Background()
	if ok, err := CheckPlain(ctx, store, "alice", "pw"); !ok || err != nil {
		t.Fatalf("right password: %v %v", ok, err)
	}
	if ok, _ := CheckPlain(ctx, store, "alice", "pW"); ok {
		t.Fatal("wrong password accepted")
	}
	if ok, _ := CheckPlain(ctx, store, "bob", "pw"); ok {
		t.Fatal("unknown user accepted")
	}
	// AlterUserScramCredentials carries the salted password: the stored
	// credential derived from it must equal the one derived from the
	// password.
	c, _, _ := store.ScramCredential(ctx, "alice", ScramSHA512)
	fromSalted, err := CredentialFromSalted(ScramSHA512, c.Salt, hi("pw", c.Salt), MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	if !hmac.Equal(fromSalted.StoredKey, c.StoredKey) || !hmac.Equal(fromSalted.ServerKey, c.ServerKey) {
		t.Fatal("credential from the salted password differs")
	}
	if _, err := CredentialFromSalted(ScramSHA512, c.Salt, []byte("x"), 100); err == nil {
		t.Fatal("100 iterations accepted")
	}
	if _, _, err := ParsePlain([]byte("other\x00alice\x00pw")); err == nil {
		t.Fatal("PLAIN with a foreign authorization identity accepted")
	}
}

// scramFirst runs a client-first-message for user through a new server
// conversation and returns the server-first-message's attributes.
func scramFirst(t *testing.T, store CredentialStore, m Mechanism, user string) map[string]string {
	t.Helper()
	srv, err := NewScramConversation(context.Background(), m, store)
	if err != nil {
		t.Fatal(err)
	}
	client, err := m.hash().NewClient(user, "pw-guess", "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	c1, _ := conv.Step("")
	s1, done, err := srv.Step([]byte(c1))
	if err != nil || done {
		t.Fatalf("first step for %q: %v %v", user, done, err)
	}
	attrs := map[string]string{}
	for _, a := range strings.Split(string(s1), ",") {
		attrs[a[:1]] = a[2:]
	}
	return attrs
}

// TestScramUnknownUserLooksKnown: an unknown user's exchange cannot be
// told from a known user's by what the server sends: its salt is the same
// on every attempt and after the store is reopened (a restart), differs
// per user and per mechanism, has a real salt's length, the iterations
// are the default, and the proof fails with a wrong password's error.
func TestScramUnknownUserLooksKnown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "creds.json")
	store, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := NewCredential(ScramSHA512, "pw", DefaultIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AlterScram(ctx, "alice", map[Mechanism]Credential{ScramSHA512: c}, nil); err != nil {
		t.Fatal(err)
	}
	known := scramFirst(t, store, ScramSHA512, "alice")
	bob1 := scramFirst(t, store, ScramSHA512, "bob")
	bob2 := scramFirst(t, store, ScramSHA512, "bob")
	carol := scramFirst(t, store, ScramSHA512, "carol")
	bob256 := scramFirst(t, store, ScramSHA256, "bob")
	if bob1["s"] != bob2["s"] {
		t.Errorf("unknown user's salt changes between attempts: %s, %s", bob1["s"], bob2["s"])
	}
	if bob1["s"] == carol["s"] || bob1["s"] == bob256["s"] {
		t.Errorf("unknown users' salts not per user and mechanism: bob %s, carol %s, bob SHA-256 %s", bob1["s"], carol["s"], bob256["s"])
	}
	if len(bob1["s"]) != len(known["s"]) || bob1["i"] != known["i"] || bob1["i"] != "4096" {
		t.Errorf("unknown user's salt %q / iterations %s, known user's %q / %s", bob1["s"], bob1["i"], known["s"], known["i"])
	}
	reopened, err := OpenFileStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if again := scramFirst(t, reopened, ScramSHA512, "bob"); again["s"] != bob1["s"] {
		t.Errorf("unknown user's salt changed after a restart: %s, %s", bob1["s"], again["s"])
	}
	other, err := OpenFileStore(filepath.Join(t.TempDir(), "creds.json"))
	if err != nil {
		t.Fatal(err)
	}
	if elsewhere := scramFirst(t, other, ScramSHA512, "bob"); elsewhere["s"] == bob1["s"] {
		t.Error("two clusters derive the same salt for an unknown user: the secret is not per cluster")
	}

	// The proof: an unknown user and a wrong password fail alike (and
	// the client accepts the server-first-message in both cases).
	failFor := func(user string) error {
		srv, err := NewScramConversation(ctx, ScramSHA512, store)
		if err != nil {
			t.Fatal(err)
		}
		client, _ := scram.SHA512.NewClient(user, "wrong", "")
		conv := client.NewConversation()
		c1, _ := conv.Step("")
		s1, _, err := srv.Step([]byte(c1))
		if err != nil {
			t.Fatal(err)
		}
		c2, err := conv.Step(string(s1))
		if err != nil {
			t.Fatalf("client refuses the server-first-message for %q: %v", user, err)
		}
		_, done, err := srv.Step([]byte(c2))
		if !done {
			t.Fatalf("exchange for %q not done", user)
		}
		return err
	}
	wrong, unknown := failFor("alice"), failFor("bob")
	if !errors.Is(wrong, ErrScramFailed) || unknown != wrong {
		t.Errorf("unknown user fails with %v, wrong password with %v", unknown, wrong)
	}
}

// TestPlainUnknownUserSameWork: a PLAIN login of an unknown user derives
// a key exactly like a known user's wrong password does (one PBKDF2 at the
// default iterations, with a salt of a real salt's length), and both are
// refused; the right password still logs in.
func TestPlainUnknownUserSameWork(t *testing.T) {
	store := newStore(t, "alice", "pw")
	ctx := context.Background()
	type derivation struct {
		m          Mechanism
		saltLen    int
		iterations int
	}
	var calls []derivation
	real := plainStoredKey
	plainStoredKey = func(m Mechanism, user, password string, salt []byte, iterations int) ([]byte, bool) {
		calls = append(calls, derivation{m, len(salt), iterations})
		return real(m, user, password, salt, iterations)
	}
	t.Cleanup(func() { plainStoredKey = real })
	login := func(user, password string) (bool, []derivation) {
		calls = nil
		ok, err := CheckPlain(ctx, store, user, password)
		if err != nil {
			t.Fatal(err)
		}
		return ok, calls
	}
	okWrong, wrong := login("alice", "nope")
	okUnknown, unknown := login("bob", "nope")
	if okWrong || okUnknown {
		t.Fatalf("accepted: wrong password %v, unknown user %v", okWrong, okUnknown)
	}
	if len(wrong) != 1 || len(unknown) != 1 || wrong[0] != unknown[0] {
		t.Errorf("key derivations: wrong password %v, unknown user %v; want the same single one", wrong, unknown)
	}
	if ok, _ := login("alice", "pw"); !ok {
		t.Error("right password refused")
	}
}
