package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-dev/strata/broker/objstore"
)

func TestFaulty(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem("b")
	f := objstore.NewFaulty(mem)
	if err := f.Put(ctx, "k", []byte("hello world")); err != nil {
		t.Fatalf("pass-through Put: %v", err)
	}

	t.Run("fail next n", func(t *testing.T) {
		f.FailNext(2)
		for i := 0; i < 2; i++ {
			if _, err := f.Get(ctx, "k", 0, -1); !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("call %d = %v, want ErrInjected", i, err)
			}
		}
		if got, err := f.Get(ctx, "k", 0, -1); err != nil || string(got) != "hello world" {
			t.Fatalf("third call = %q, %v", got, err)
		}
	})
	t.Run("fail all", func(t *testing.T) {
		f.SetFailAll(true)
		if err := f.Put(ctx, "k2", []byte("x")); !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("Put = %v, want ErrInjected", err)
		}
		if _, err := f.List(ctx, ""); !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("List = %v, want ErrInjected", err)
		}
		if err := f.Delete(ctx, "k"); !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("Delete = %v, want ErrInjected", err)
		}
		f.SetFailAll(false)
		if _, err := mem.Head(ctx, "k2"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("a failed Put reached the inner store: %v", err)
		}
		if _, err := f.Head(ctx, "k"); err != nil {
			t.Fatalf("a failed Delete reached the inner store: %v", err)
		}
	})
	t.Run("corrupt on read", func(t *testing.T) {
		f.SetCorruptOnRead(true)
		got, err := f.Get(ctx, "k", 0, -1)
		f.SetCorruptOnRead(false)
		if err != nil || len(got) != 11 || bytes.Equal(got, []byte("hello world")) {
			t.Fatalf("corrupted Get = %q, %v; want 11 different bytes", got, err)
		}
		if inner, _ := mem.Get(ctx, "k", 0, -1); string(inner) != "hello world" {
			t.Fatalf("corruption reached the stored object: %q", inner)
		}
	})
	t.Run("latency honours the context", func(t *testing.T) {
		f.SetPutLatency(time.Hour)
		defer f.SetPutLatency(0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := f.Put(cctx, "k3", []byte("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put with latency and a cancelled context = %v, want context.Canceled", err)
		}
	})
	t.Run("latency delays", func(t *testing.T) {
		f.SetGetLatency(time.Millisecond)
		defer f.SetGetLatency(0)
		if got, err := f.Get(ctx, "k", 6, 5); err != nil || string(got) != "world" {
			t.Fatalf("Get = %q, %v", got, err)
		}
	})
	t.Run("latency floor", func(t *testing.T) {
		f.SetLatencyFloor(true)
		f.SetPutLatency(20 * time.Millisecond)
		f.SetGetLatency(20 * time.Millisecond)
		defer func() { f.SetLatencyFloor(false); f.SetPutLatency(0); f.SetGetLatency(0) }()
		start := time.Now()
		if err := f.Put(ctx, "k4", []byte("floor")); err != nil {
			t.Fatalf("Put with a latency floor: %v", err)
		}
		if got, err := f.Get(ctx, "k4", 0, -1); err != nil || string(got) != "floor" {
			t.Fatalf("Get with a latency floor = %q, %v", got, err)
		}
		if took := time.Since(start); took < 40*time.Millisecond {
			t.Fatalf("Put + Get with 20 ms floors took %v, want at least 40 ms", took)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := f.Put(cctx, "k5", []byte("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put with a floor and a cancelled context = %v, want context.Canceled", err)
		}
	})
	if n := f.Calls(objstore.OpGet); n != 6 {
		t.Fatalf("Get calls = %d, want 5", n)
	}
}
