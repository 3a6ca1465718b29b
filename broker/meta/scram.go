package meta

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/auth"
)

// SCRAM credentials live beside the watched metadata (credentials/scram/),
// so that a password change does not wake every broker's metadata watch;
// brokers read a user's credential when a client authenticates. Values
// are auth.UserCredentials: salt, iterations, StoredKey and ServerKey per
// mechanism, never a password.

func (k keys) scramUsers() string { return k.credentials + "scram/" }

// scramSecret is the key of the cluster's server secret (auth
// CredentialStore.ServerSecret), beside the credentials it protects and
// readable by whoever may read them.
func (k keys) scramSecret() string { return k.credentials + "server-secret" }
func (k keys) scramUser(user string) string {
	return k.scramUsers() + url.PathEscape(user)
}

var _ auth.CredentialStore = (*Store)(nil)

func (s *Store) readScram(ctx context.Context, user string) (auth.UserCredentials, int64, error) {
	resp, err := s.client.Get(ctx, s.keys.scramUser(user))
	if err != nil {
		return nil, 0, fmt.Errorf("read SCRAM credentials of %q: %w", user, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	var uc auth.UserCredentials
	if err := json.Unmarshal(resp.Kvs[0].Value, &uc); err != nil {
		return nil, 0, fmt.Errorf("decode SCRAM credentials of %q: %w", user, err)
	}
	return uc, resp.Kvs[0].ModRevision, nil
}

// ServerSecret implements auth.CredentialStore: the first broker that
// needs it creates it (create-if-absent), every broker reads the same one,
// and it survives restarts with etcd.
func (s *Store) ServerSecret(ctx context.Context) ([]byte, error) {
	if p := s.secret.Load(); p != nil {
		return *p, nil
	}
	fresh := make([]byte, auth.ServerSecretBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("server secret: %w", err)
	}
	key := s.keys.scramSecret()
	resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(fresh))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, fmt.Errorf("create server secret: %w", err)
	}
	secret := fresh
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || len(kvs[0].Value) < auth.ServerSecretBytes {
			return nil, fmt.Errorf("%w: server secret missing or short", ErrStaleState)
		}
		secret = kvs[0].Value
	}
	s.secret.Store(&secret)
	return secret, nil
}

// ScramCredential implements auth.CredentialStore.
func (s *Store) ScramCredential(ctx context.Context, user string, m auth.Mechanism) (auth.Credential, bool, error) {
	uc, _, err := s.readScram(ctx, user)
	if err != nil {
		return auth.Credential{}, false, err
	}
	c, ok := uc[m.String()]
	return c, ok, nil
}

// ScramUsers implements auth.CredentialStore.
func (s *Store) ScramUsers(ctx context.Context, users []string) (map[string]map[auth.Mechanism]int, error) {
	all := map[string]auth.UserCredentials{}
	if users == nil {
		resp, err := s.client.Get(ctx, s.keys.scramUsers(), clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("list SCRAM users: %w", err)
		}
		for _, kv := range resp.Kvs {
			name, err := url.PathUnescape(strings.TrimPrefix(string(kv.Key), s.keys.scramUsers()))
			if err != nil {
				continue
			}
			var uc auth.UserCredentials
			if err := json.Unmarshal(kv.Value, &uc); err != nil {
				return nil, fmt.Errorf("decode SCRAM credentials of %q: %w", name, err)
			}
			all[name] = uc
		}
	} else {
		for _, u := range users {
			uc, _, err := s.readScram(ctx, u)
			if err != nil {
				return nil, err
			}
			all[u] = uc
		}
	}
	out := map[string]map[auth.Mechanism]int{}
	for u, uc := range all {
		for name, c := range uc {
			if m, ok := auth.ParseMechanism(name); ok {
				if out[u] == nil {
					out[u] = map[auth.Mechanism]int{}
				}
				out[u][m] = c.Iterations
			}
		}
	}
	return out, nil
}

// AlterScram implements auth.CredentialStore: a compare-and-swap on the
// user's key, retried on a concurrent change.
func (s *Store) AlterScram(ctx context.Context, user string, upserts map[auth.Mechanism]auth.Credential, deletions []auth.Mechanism) error {
	key := s.keys.scramUser(user)
	for range casAttempts {
		cur, rev, err := s.readScram(ctx, user)
		if err != nil {
			return err
		}
		next := auth.UserCredentials{}
		for k, v := range cur {
			next[k] = v
		}
		for _, m := range deletions {
			if _, ok := next[m.String()]; !ok {
				return fmt.Errorf("%w: %s of user %q", auth.ErrNoCredential, m, user)
			}
			delete(next, m.String())
		}
		for m, c := range upserts {
			next[m.String()] = c
		}
		op := clientv3.OpPut(key, encode(next))
		if len(next) == 0 {
			op = clientv3.OpDelete(key)
		}
		resp, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Commit()
		if err != nil {
			return fmt.Errorf("write SCRAM credentials of %q: %w", user, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("%w: SCRAM credentials of %q changed concurrently %d times", ErrStaleState, user, casAttempts)
}
