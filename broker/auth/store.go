package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
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
}

// ErrNoCredential is returned by AlterScram for the deletion of a
// credential that does not exist (Kafka's RESOURCE_NOT_FOUND).
var ErrNoCredential = errors.New("no such SCRAM credential")

// UserCredentials is the stored value of one user: a credential per
// mechanism (JSON keys are mechanism names).
type UserCredentials map[string]Credential

// CheckPlain verifies a SASL PLAIN password against the user's SCRAM
// credential (SCRAM-SHA-512 when present, else SCRAM-SHA-256): the password
// is salted with the stored salt and iterations and its StoredKey compared.
func CheckPlain(ctx context.Context, store CredentialStore, user, password string) (bool, error) {
	for _, m := range []Mechanism{ScramSHA512, ScramSHA256} {
		cred, ok, err := store.ScramCredential(ctx, user, m)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		client, err := m.hash().NewClient(user, password, "")
		if err != nil {
			return false, nil // not SASLprep-able: cannot match
		}
		sc := client.GetStoredCredentials(scram.KeyFactors{Salt: string(cred.Salt), Iters: cred.Iterations})
		return hmac.Equal(sc.StoredKey, cred.StoredKey), nil
	}
	return false, nil
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
// ({"<user>": {"SCRAM-SHA-512": {...}}}), rewritten atomically on change.
type FileStore struct {
	path string
	mu   sync.Mutex
	data map[string]UserCredentials
}

// OpenFileStore reads (or starts) the credential file at path.
func OpenFileStore(path string) (*FileStore, error) {
	s := &FileStore{path: path, data: map[string]UserCredentials{}}
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
