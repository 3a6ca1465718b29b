package meta

import (
	"bytes"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/strata-dev/strata/broker/auth"
)

// TestScramCredentials: credentials round-trip through etcd, user names
// with '/' stay one key, deleting the last mechanism removes the user, a
// missing credential cannot be deleted, and nothing lands under the watched
// metadata prefix.
func TestScramCredentials(t *testing.T) {
	cli := startEtcd(t)
	ctx := testCtx(t)
	s, err := New(cli, "scram")
	if err != nil {
		t.Fatal(err)
	}
	cred := func(m auth.Mechanism) auth.Credential {
		c, err := auth.NewCredential(m, "pw", 4096)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	user := "team/alice"
	if err := s.AlterScram(ctx, user, map[auth.Mechanism]auth.Credential{auth.ScramSHA256: cred(auth.ScramSHA256), auth.ScramSHA512: cred(auth.ScramSHA512)}, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := auth.CheckPlain(ctx, s, user, "pw"); !ok || err != nil {
		t.Fatalf("stored credential does not verify: %v %v", ok, err)
	}
	all, err := s.ScramUsers(ctx, nil)
	if err != nil || len(all) != 1 || all[user][auth.ScramSHA512] != 4096 {
		t.Fatalf("users %v %v", all, err)
	}
	if err := s.AlterScram(ctx, "bob", nil, []auth.Mechanism{auth.ScramSHA256}); !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("deleting a missing credential: %v", err)
	}
	if err := s.AlterScram(ctx, user, nil, []auth.Mechanism{auth.ScramSHA256, auth.ScramSHA512}); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.ScramUsers(ctx, nil); len(all) != 0 {
		t.Fatalf("user left after its last credential was deleted: %v", all)
	}
	st, err := s.Snapshot(ctx)
	if err != nil || st == nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/strata/scram/meta/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("credential writes touched the metadata prefix: %v %v", resp.Kvs, err)
	}
}

// TestServerSecret: every Store of a cluster (every broker, and a broker
// after a restart) gets the same server secret, created once outside the
// watched prefix; another cluster on the same etcd gets its own.
func TestServerSecret(t *testing.T) {
	cli := startEtcd(t)
	ctx := testCtx(t)
	open := func(cluster string) []byte {
		s, err := New(cli, cluster)
		if err != nil {
			t.Fatal(err)
		}
		secret, err := s.ServerSecret(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := s.ServerSecret(ctx); !bytes.Equal(again, secret) {
			t.Fatal("secret changed within one store")
		}
		return secret
	}
	a1, a2, b := open("a"), open("a"), open("b")
	if len(a1) != auth.ServerSecretBytes || !bytes.Equal(a1, a2) {
		t.Fatalf("two brokers of cluster a: %x, %x", a1, a2)
	}
	if bytes.Equal(a1, b) {
		t.Fatal("clusters a and b share a secret")
	}
	resp, err := cli.Get(ctx, "/strata/a/meta/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the secret touched the metadata prefix: %v %v", resp.Kvs, err)
	}
}
