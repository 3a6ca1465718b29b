package meta

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

// TestACLStore: creating a binding twice stores it once, more bindings
// than one transaction may hold are written, a filter deletes exactly what
// it matches, and WatchACLs hands every change to its callback.
func TestACLStore(t *testing.T) {
	cli := startEtcd(t)
	ctx := testCtx(t)
	s, err := New(cli, "acls", WithMaxTxnOps(8))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []auth.Binding
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WatchACLs(wctx, func(bs []auth.Binding) {
			mu.Lock()
			defer mu.Unlock()
			seen = bs
		})
	}()
	defer func() { cancel(); <-done }()
	waitSeen := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("watch delivered %d bindings, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var bs []auth.Binding
	for i := range 20 {
		bs = append(bs, auth.Binding{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "t" + string(rune('a'+i)),
			PatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice", Host: "*",
			Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow})
	}
	if err := s.CreateACLs(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateACLs(ctx, bs[:3]); err != nil {
		t.Fatal(err)
	}
	got, err := s.ACLs(ctx)
	if err != nil || len(got) != 20 {
		t.Fatalf("%d bindings stored (%v), want 20", len(got), err)
	}
	waitSeen(20)
	name := "tb"
	deleted, err := s.DeleteACLs(ctx, []auth.Filter{{ResourceType: kmsg.ACLResourceTypeAny, ResourceName: &name,
		PatternType: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 1 || deleted[0][0] != bs[1] {
		t.Fatalf("deleted %v (%v), want %v", deleted, err, bs[1])
	}
	waitSeen(19)
}
