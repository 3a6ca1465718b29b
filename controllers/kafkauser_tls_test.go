package controllers

import (
	"bytes"
	"crypto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/strata-dev/strata/internal/pki"
)

// TestUserKeystore: user.p12 holds the user's key and certificate and
// the clients CA, readable with user.password; it is kept as stored
// while it still holds them (no Secret rewrite per resync), and a new
// certificate or CA gets a new keystore under the same password.
func TestUserKeystore(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("clients", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func() *pki.KeyPair {
		t.Helper()
		leaf, err := ca.Issue(pki.LeafOptions{Subject: UserCertSubject("carol"), Client: true}, now)
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	leaf := issue()
	p12, password, err := userKeystore(nil, leaf, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if len(password) < 26 {
		t.Fatalf("password %q: want a random one of at least 128 bits", password)
	}
	key, cert, chain, err := pkcs12.DecodeChain(p12, string(password))
	if err != nil {
		t.Fatalf("decode user.p12 with user.password: %v", err)
	}
	if !cert.Equal(leaf.Cert) || len(chain) != 1 || !chain[0].Equal(ca.Cert) {
		t.Fatalf("user.p12 holds %s and %d CA certificates, want the user's certificate and the clients CA", cert.Subject, len(chain))
	}
	signer, ok := key.(crypto.Signer)
	if !ok || !leaf.Key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(signer.Public()) {
		t.Fatal("user.p12's key is not the user's key")
	}
	keytoolList(t, p12, password)

	stored := &corev1.Secret{Data: map[string][]byte{UserSecretP12: p12, UserSecretP12Password: password}}
	again, againPassword, err := userKeystore(stored, leaf, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, p12) || !bytes.Equal(againPassword, password) {
		t.Fatal("the stored keystore was encoded again although it holds the certificate: every resync would rewrite the Secret")
	}

	renewed := issue()
	next, nextPassword, err := userKeystore(stored, renewed, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(nextPassword, password) {
		t.Error("a renewed certificate changed user.password")
	}
	if _, cert, _, err := pkcs12.DecodeChain(next, string(nextPassword)); err != nil || !cert.Equal(renewed.Cert) {
		t.Fatalf("after renewal user.p12 holds %v (%v), want the renewed certificate", cert, err)
	}

	stored.Data[UserSecretP12Password] = []byte("not-the-password")
	if _, _, _, err := pkcs12.DecodeChain(stored.Data[UserSecretP12], "not-the-password"); err == nil {
		t.Fatal("decoding with a wrong password succeeded: the check above proves nothing")
	}
	fixed, fixedPassword, err := userKeystore(stored, leaf, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if _, cert, _, err := pkcs12.DecodeChain(fixed, string(fixedPassword)); err != nil || !cert.Equal(leaf.Cert) {
		t.Fatalf("a keystore that does not open with user.password is not replaced: %v", err)
	}
}

// keytoolList lists the keystore with the JRE's keytool, when there is
// one: Java clients are who user.p12 is for.
func keytoolList(t *testing.T, p12, password []byte) {
	t.Helper()
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		t.Log("no keytool on this machine: the keystore is checked with go-pkcs12 only")
		return
	}
	path := filepath.Join(t.TempDir(), "user.p12")
	if err := os.WriteFile(path, p12, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(keytool, "-list", "-keystore", path, "-storetype", "PKCS12", "-storepass", string(password)).CombinedOutput()
	if err != nil {
		t.Fatalf("keytool -list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PrivateKeyEntry") {
		t.Fatalf("keytool -list shows no private key entry:\n%s", out)
	}
}
