package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strings"

	"github.com/xdg-go/scram"
)

// Mechanism is a SCRAM mechanism with Kafka's wire code
// (DescribeUserScramCredentials / AlterUserScramCredentials).
type Mechanism int8

// The SCRAM mechanisms Kafka defines.
const (
	ScramSHA256 Mechanism = 1
	ScramSHA512 Mechanism = 2
)

// Mechanisms lists the SCRAM mechanisms served.
var Mechanisms = []Mechanism{ScramSHA256, ScramSHA512}

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations, and the
// maximum AlterUserScramCredentials accepts).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// DefaultIterations is the iteration count of the credentials Strata
// creates (the operator's KafkaUsers, `strata dev --security`), Kafka's
// default too; an unknown user is answered with it.
const DefaultIterations = MinIterations

// SaltBytes is the salt length of the credentials Strata creates: kadm's
// (which the operator uses for KafkaUsers), so that the made-up salt of an
// unknown user has the length most real ones have.
const SaltBytes = 24

// String returns the SASL mechanism name, e.g. SCRAM-SHA-512.
func (m Mechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(m))
}

// ParseMechanism returns the SCRAM mechanism named name.
func ParseMechanism(name string) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if m.String() == name {
			return m, true
		}
	}
	return 0, false
}

// Valid says whether m is a known SCRAM mechanism.
func (m Mechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

func (m Mechanism) hash() scram.HashGeneratorFcn {
	if m == ScramSHA512 {
		return scram.SHA512
	}
	return scram.SHA256
}

func (m Mechanism) newHash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is one user's stored SCRAM credential for one mechanism.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// ErrBadCredential is returned for a credential request outside Kafka's
// rules (unknown mechanism, iterations out of range, empty salt).
var ErrBadCredential = errors.New("invalid SCRAM credential")

// CredentialFromSalted derives the stored credential from the salted
// password (Hi(password, salt, i)) that AlterUserScramCredentials carries:
// StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted,
// "Server Key") (RFC 5802).
func CredentialFromSalted(m Mechanism, salt, salted []byte, iterations int) (Credential, error) {
	switch {
	case !m.Valid():
		return Credential{}, fmt.Errorf("%w: unknown mechanism %d", ErrBadCredential, m)
	case iterations < MinIterations || iterations > MaxIterations:
		return Credential{}, fmt.Errorf("%w: %d iterations, want %d-%d", ErrBadCredential, iterations, MinIterations, MaxIterations)
	case len(salt) == 0 || len(salted) == 0:
		return Credential{}, fmt.Errorf("%w: empty salt or salted password", ErrBadCredential)
	}
	h := m.newHash()
	mac := func(key []byte, s string) []byte {
		w := hmac.New(h, key)
		w.Write([]byte(s))
		return w.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	sum := h()
	sum.Write(clientKey)
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  sum.Sum(nil),
		ServerKey:  mac(salted, "Server Key"),
	}, nil
}

// NewCredential salts password with a fresh random salt (what a client of
// AlterUserScramCredentials does, and `strata dev --security` for its
// first user).
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	if !m.Valid() {
		return Credential{}, fmt.Errorf("%w: unknown mechanism %d", ErrBadCredential, m)
	}
	salt := make([]byte, SaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, fmt.Errorf("salt: %w", err)
	}
	client, err := m.hash().NewClient("", password, "")
	if err != nil {
		return Credential{}, fmt.Errorf("SASLprep password: %w", err)
	}
	sc := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: %d iterations, want %d-%d", ErrBadCredential, iterations, MinIterations, MaxIterations)
	}
	return Credential{Salt: salt, Iterations: iterations, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// ScramConversation is the server side of one SCRAM exchange (RFC 5802),
// with Kafka's rules: no channel binding, the authorization identity (if
// any) must be the user, and the nonce of the client's final message must
// END with the combined nonce (Kafka's ScramSaslServer checks endsWith):
// librdkafka (kcat, confluent-kafka) sends its own nonce followed by the
// whole combined nonce, which a strict RFC server (github.com/xdg-go/scram's
// ServerConversation compares for equality) refuses. Hence this small
// server; key derivation for stored credentials still comes from
// xdg-go/scram's client (NewCredential, CheckPlain).
type ScramConversation struct {
	m       Mechanism
	lookup  func(user string) (Credential, bool, error)
	step    int
	user    string
	cred    Credential
	unknown bool
	gs2     string // gs2 header of the client's first message
	c1bare  string
	s1      string
	nonce   string // combined nonce
}

// NewScramConversation starts a server conversation for mechanism m whose
// credentials come from store. An unknown user gets a decoy credential
// (decoyCredential) that fails at the proof with the error a wrong
// password gets, so that the exchange does not tell which users exist.
func NewScramConversation(ctx context.Context, m Mechanism, store CredentialStore) (*ScramConversation, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w: unknown mechanism %d", ErrBadCredential, m)
	}
	return &ScramConversation{m: m, lookup: func(user string) (Credential, bool, error) {
		cred, ok, err := store.ScramCredential(ctx, user, m)
		if err != nil || ok {
			return cred, ok, err
		}
		secret, err := store.ServerSecret(ctx)
		if err != nil {
			return Credential{}, false, err
		}
		return decoyCredential(secret, m, user), false, nil
	}}, nil
}

// ErrScramFailed is the error of a refused SCRAM proof: a wrong password
// and an unknown user fail alike.
var ErrScramFailed = errors.New("SCRAM: authentication failed")

// ServerSecretBytes is the length of a cluster's server secret
// (CredentialStore.ServerSecret).
const ServerSecretBytes = 32

// decoyCredential is what an unknown user's exchange runs against, as RFC
// 5802 section 9 suggests: the salt is HMAC-SHA256(secret, mechanism ||
// user) cut to SaltBytes, so it is the same on every attempt, on every
// broker and after restarts (a fresh random salt per attempt would tell an
// unknown user from a known one with two attempts), and differs per user
// and per mechanism (a known user's two mechanisms have independent random
// salts); the iterations are DefaultIterations; the keys are derived from
// the secret too, never revealed, and the proof is refused whatever it is.
func decoyCredential(secret []byte, m Mechanism, user string) Credential {
	derive := func(h func() hash.Hash, label string) []byte {
		w := hmac.New(h, secret)
		w.Write([]byte(label))
		w.Write([]byte{0})
		w.Write([]byte(m.String()))
		w.Write([]byte{0})
		w.Write([]byte(user))
		return w.Sum(nil)
	}
	return Credential{
		Salt:       derive(sha256.New, "strata scram decoy salt")[:SaltBytes],
		Iterations: DefaultIterations,
		StoredKey:  derive(m.newHash(), "strata scram decoy stored key"),
		ServerKey:  derive(m.newHash(), "strata scram decoy server key"),
	}
}

// Step consumes a client message and returns the server's answer. done
// is true after the final message; the user is authenticated only when
// err is nil and done.
func (c *ScramConversation) Step(msg []byte) (resp []byte, done bool, err error) {
	c.step++
	switch c.step {
	case 1:
		out, err := c.first(string(msg))
		if err != nil {
			return nil, true, err
		}
		return []byte(out), false, nil
	case 2:
		out, err := c.final(string(msg))
		if err != nil {
			return nil, true, err
		}
		return []byte(out), true, nil
	}
	return nil, true, errors.New("SCRAM: message after the exchange ended")
}

func (c *ScramConversation) first(msg string) (string, error) {
	// gs2-header: "n," or "y," (no channel binding), then [a=authzid] ",".
	parts := strings.SplitN(msg, ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") {
		return "", errors.New("SCRAM: client-first-message without a supported gs2 header (channel binding is not supported)")
	}
	c.gs2 = parts[0] + "," + parts[1] + ","
	c.c1bare = parts[2]
	attrs := strings.Split(c.c1bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", errors.New("SCRAM: malformed client-first-message")
	}
	user, err := scramUnescape(attrs[0][2:])
	if err != nil || user == "" {
		return "", errors.New("SCRAM: malformed user name")
	}
	if authz := parts[1]; authz != "" && authz != "a="+attrs[0][2:] {
		return "", errors.New("SCRAM: authorization identity differs from the user")
	}
	cnonce := attrs[1][2:]
	if cnonce == "" {
		return "", errors.New("SCRAM: empty client nonce")
	}
	c.user = user
	cred, ok, err := c.lookup(user)
	if err != nil {
		return "", err
	}
	c.unknown = !ok
	c.cred = cred
	c.nonce = cnonce + kafkaNonce()
	c.s1 = fmt.Sprintf("r=%s,s=%s,i=%d", c.nonce, base64.StdEncoding.EncodeToString(cred.Salt), cred.Iterations)
	return c.s1, nil
}

func (c *ScramConversation) final(msg string) (string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return "", errors.New("SCRAM: client-final-message without proof")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	var cbind, nonce string
	for _, a := range strings.Split(withoutProof, ",") {
		switch {
		case strings.HasPrefix(a, "c="):
			cbind = a[2:]
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		}
	}
	if cbind != base64.StdEncoding.EncodeToString([]byte(c.gs2)) {
		return "", errors.New("SCRAM: channel binding does not match the gs2 header")
	}
	if !strings.HasSuffix(nonce, c.nonce) {
		return "", errors.New("SCRAM: nonce does not match")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", errors.New("SCRAM: proof is not base64")
	}
	authMsg := []byte(c.c1bare + "," + c.s1 + "," + withoutProof)
	h := c.m.newHash()
	mac := func(key []byte) []byte {
		w := hmac.New(h, key)
		w.Write(authMsg)
		return w.Sum(nil)
	}
	sig := mac(c.cred.StoredKey)
	if len(proof) != len(sig) {
		return "", ErrScramFailed
	}
	clientKey := make([]byte, len(sig))
	for i := range sig {
		clientKey[i] = proof[i] ^ sig[i]
	}
	sum := h()
	sum.Write(clientKey)
	if !hmac.Equal(sum.Sum(nil), c.cred.StoredKey) || c.unknown {
		return "", ErrScramFailed
	}
	return "v=" + base64.StdEncoding.EncodeToString(mac(c.cred.ServerKey)), nil
}

// Username is the user the client named in its first message.
func (c *ScramConversation) Username() string { return c.user }

// scramUnescape decodes "=2C" and "=3D" in a SCRAM user name.
func scramUnescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("bad escape")
		}
		i += 2
	}
	return b.String(), nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// kafkaNonce is the server nonce in Kafka's alphabet ([0-9a-z], from 192
// random bits).
func kafkaNonce() string {
	return new(big.Int).SetBytes(randomBytes(24)).Text(36)
}
