package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

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
	salt := make([]byte, 32)
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

// ScramConversation is the server side of one SCRAM exchange.
type ScramConversation struct {
	conv    *scram.ServerConversation
	unknown bool
}

// NewScramConversation starts a server conversation for mechanism m whose
// credentials come from store. An unknown user gets a conversation with a
// made-up credential that fails at the proof, as Kafka does, so that the
// exchange does not tell which users exist.
func NewScramConversation(ctx context.Context, m Mechanism, store CredentialStore) (*ScramConversation, error) {
	sc := &ScramConversation{}
	srv, err := m.hash().NewServer(func(user string) (scram.StoredCredentials, error) {
		cred, ok, err := store.ScramCredential(ctx, user, m)
		if err != nil {
			return scram.StoredCredentials{}, err
		}
		if !ok {
			sc.unknown = true
			salt := make([]byte, 32)
			_, _ = rand.Read(salt)
			key := make([]byte, m.newHash()().Size())
			_, _ = rand.Read(key)
			return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: MinIterations}, StoredKey: key, ServerKey: key}, nil
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(cred.Salt), Iters: cred.Iterations}, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}, nil
	})
	if err != nil {
		return nil, err
	}
	sc.conv = srv.NewConversation()
	return sc, nil
}

// Step consumes a client message and returns the server's answer. done
// is true after the final message; the user is authenticated only when
// err is nil and done.
func (c *ScramConversation) Step(msg []byte) (resp []byte, done bool, err error) {
	out, err := c.conv.Step(string(msg))
	if err != nil {
		return nil, true, fmt.Errorf("SCRAM: %w", err)
	}
	if c.conv.Done() {
		if !c.conv.Valid() || c.unknown {
			return nil, true, errors.New("SCRAM: authentication failed")
		}
		return []byte(out), true, nil
	}
	return []byte(out), false, nil
}

// Username is the user the client named in its first message.
func (c *ScramConversation) Username() string { return c.conv.Username() }
