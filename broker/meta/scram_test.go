package meta

import (
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
