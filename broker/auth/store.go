package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/xdg-go/scram"
)

// CredentialStore keeps SCRAM credentials. Implementations are safe for
// concurrent use.
type CredentialStore interface {
	// ScramCredential returns the user's credential for m; ok is false for
	// an unknown user or mechanism.
	ScramCredential(ctx context.Context, user string, m Mechanism) (cred Credential, ok bool, err error)
	// ScramUsers returns the users' mechanisms and iterations (every user
	// when users is nil).
	ScramUsers(ctx context.Context, users []string) (map[string]map[Mechanism]int, error)
	// AlterScram applies deletions then upserts for one user at once.
	AlterScram(ctx context.Context, user string, upserts map[Mechanism]Credential, deletions []Mechanism) error
	// ServerSecret returns the cluster's random secret (ServerSecretBytes),
	// created on first use and the same on every broker and after
	// restarts: unknown users' SCRAM salts and PLAIN decoys derive from it
	// (decoyCredential).
	ServerSecret(ctx context.Context) ([]byte, error)
}

// ErrNoCredential is returned by AlterScram for the deletion of a
// credential that does not exist (Kafka's RESOURCE_NOT_FOUND).
var ErrNoCredential = errors.New("no such SCRAM credential")

// UserCredentials is the stored value of one user: a credential per
// mechanism (JSON keys are mechanism names).
type UserCredentials map[string]Credential

// CheckPlain verifies a SASL PLAIN password against the user's SCRAM
// credential (SCRAM-SHA-512 when present, else SCRAM-SHA-256): the password
// is salted with the stored salt and iterations and its StoredKey compared
// in constant time.
//
// An unknown user costs the same work as a known one with a wrong
// password: both mechanisms are looked up either way, and the password is
// salted against the user's decoy SCRAM-SHA-512 credential
// (decoyCredential: DefaultIterations) and compared, then refused. A login
// does not tell by its time whether the user exists (as long as the known
// users have DefaultIterations).
func CheckPlain(ctx context.Context, store CredentialStore, user, password string) (bool, error) {
	var (
		cred  Credential
		m     Mechanism
		found bool
	)
	for _, mech := range []Mechanism{ScramSHA512, ScramSHA256} {
		c, ok, err := store.ScramCredential(ctx, user, mech)
		if err != nil {
			return false, err
		}
		if ok && !found {
			cred, m, found = c, mech, true
		}
	}
	if !found {
		secret, err := store.ServerSecret(ctx)
		if err != nil {
			return false, err
		}
		m = ScramSHA512
		cred = decoyCredential(secret, m, user)
	}
	stored, ok := plainStoredKey(m, user, password, cred.Salt, cred.Iterations)
	match := hmac.Equal(stored, cred.StoredKey)
	return ok && match && found, nil
}

// plainStoredKey is the StoredKey of password under salt and iterations
// (Hi, then H(HMAC(salted, "Client Key")), RFC 5802); ok is false for a
// password SASLprep refuses (it cannot match any credential). A variable
// so that tests can count the key derivations of a login.
var plainStoredKey = func(m Mechanism, user, password string, salt []byte, iterations int) (storedKey []byte, ok bool) {
	client, err := m.hash().NewClient(user, password, "")
	if err != nil {
		return nil, false
	}
	return client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iterations}).StoredKey, true
}

// ParsePlain splits a SASL PLAIN message (RFC 4616:
// [authzid] NUL authcid NUL passwd). An authorization identity other than
// the user itself is refused, as Kafka does.
func ParsePlain(msg []byte) (user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", errors.New("PLAIN: malformed message")
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return "", "", errors.New("PLAIN: empty user or password")
	}
	if authz != "" && authz != user {
		return "", "", errors.New("PLAIN: authorization identity differs from the user")
	}
	return user, password, nil
}

// FileStore keeps the credentials of a standalone broker in one JSON file
// ({"<user>": {"SCRAM-SHA-512": {...}}}), rewritten atomically on change,
// and its server secret in ServerSecretFile beside it (a standalone
// broker is its own cluster: the secret lives as long as its data dir).
type FileStore struct {
	path   string
	secret []byte
	mu     sync.Mutex
	data   map[string]UserCredentials
}

// ServerSecretFile is the name of a FileStore's server secret file, in the
// directory of its credential file (JSON: the base64 secret).
const ServerSecretFile = "__scram_secret"

// OpenFileStore reads (or starts) the credential file at path, and reads
// (or creates) the server secret beside it.
func OpenFileStore(path string) (*FileStore, error) {
	s := &FileStore{path: path, data: map[string]UserCredentials{}}
	var err error
	if s.secret, err = openSecret(filepath.Join(filepath.Dir(path), ServerSecretFile)); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read SCRAM credentials: %w", err)
	default:
		if err := json.Unmarshal(raw, &s.data); err != nil {
			return nil, fmt.Errorf("parse SCRAM credentials %s: %w", path, err)
		}
	}
	return s, nil
}

// openSecret reads the server secret at path, or creates it (mode 0600).
func openSecret(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		secret := make([]byte, ServerSecretBytes)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("server secret: %w", err)
		}
		if err := writeFileAtomic(path, secret); err != nil {
			return nil, err
		}
		return secret, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read server secret: %w", err)
	}
	var secret []byte
	if err := json.Unmarshal(raw, &secret); err != nil || len(secret) < ServerSecretBytes {
		return nil, fmt.Errorf("server secret %s: not a base64 string of %d bytes (%v)", path, ServerSecretBytes, err)
	}
	return secret, nil
}

// ServerSecret implements CredentialStore.
func (s *FileStore) ServerSecret(context.Context) ([]byte, error) { return s.secret, nil }

// ScramCredential implements CredentialStore.
func (s *FileStore) ScramCredential(_ context.Context, user string, m Mechanism) (Credential, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.data[user][m.String()]
	return c, ok, nil
}

// ScramUsers implements CredentialStore.
func (s *FileStore) ScramUsers(_ context.Context, users []string) (map[string]map[Mechanism]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[Mechanism]int{}
	if users == nil {
		for u := range s.data {
			users = append(users, u)
		}
	}
	for _, u := range users {
		for name, c := range s.data[u] {
			if m, ok := ParseMechanism(name); ok {
				if out[u] == nil {
					out[u] = map[Mechanism]int{}
				}
				out[u][m] = c.Iterations
			}
		}
	}
	return out, nil
}

// AlterScram implements CredentialStore.
func (s *FileStore) AlterScram(_ context.Context, user string, upserts map[Mechanism]Credential, deletions []Mechanism) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	uc := UserCredentials{}
	for k, v := range s.data[user] {
		uc[k] = v
	}
	for _, m := range deletions {
		if _, ok := uc[m.String()]; !ok {
			return fmt.Errorf("%w: %s of user %q", ErrNoCredential, m, user)
		}
		delete(uc, m.String())
	}
	for m, c := range upserts {
		uc[m.String()] = c
	}
	next := map[string]UserCredentials{}
	for k, v := range s.data {
		next[k] = v
	}
	if len(uc) == 0 {
		delete(next, user)
	} else {
		next[user] = uc
	}
	if err := writeFileAtomic(s.path, next); err != nil {
		return err
	}
	s.data = next
	return nil
}

func writeFileAtomic(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
