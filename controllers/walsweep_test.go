package controllers

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

// lifecycleServer records the bucket lifecycle calls the SDK makes. No S3
// server that runs here implements lifecycle rules (Versity Gateway
// answers NotImplemented, tested in the envtest suite), so this checks
// what goes on the wire: the XML the SDK sends for the merged rules and
// how answers are read back.
type lifecycleServer struct {
	mu     sync.Mutex
	config string // the stored LifecycleConfiguration XML; "" = none
	puts   int
	status int // non-zero: answer every call with this error status
	code   string
}

func (s *lifecycleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := r.URL.Query()["lifecycle"]; !ok || r.URL.Path != "/wal-bucket" {
		http.Error(w, "unexpected request "+r.Method+" "+r.URL.String(), http.StatusBadRequest)
		return
	}
	fail := func(status int, code string) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>test</Message></Error>`)
	}
	switch {
	case s.status != 0:
		fail(s.status, s.code)
	case r.Method == http.MethodGet && s.config == "":
		fail(http.StatusNotFound, "NoSuchLifecycleConfiguration")
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/xml")
		io.WriteString(w, s.config)
	case r.Method == http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		s.config = string(b)
		s.puts++
	default:
		fail(http.StatusMethodNotAllowed, "MethodNotAllowed")
	}
}

type xmlLifecycle struct {
	Rules []struct {
		ID     string `xml:"ID"`
		Status string `xml:"Status"`
		Prefix *struct {
			Value string `xml:",chardata"`
		} `xml:"Filter>Prefix"`
		Days int `xml:"Expiration>Days"`
	} `xml:"Rule"`
}

func TestApplyLifecycleRule(t *testing.T) {
	srv := &lifecycleServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	client := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
		HTTPClient:  hs.Client(),
	})
	ctx := context.Background()
	parse := func() xmlLifecycle {
		t.Helper()
		var lc xmlLifecycle
		if err := xml.Unmarshal([]byte(srv.config), &lc); err != nil {
			t.Fatalf("stored config %q: %v", srv.config, err)
		}
		return lc
	}

	// No configuration yet: ours is written.
	changed, err := applyLifecycleRule(ctx, client, "wal-bucket", 2)
	if err != nil || !changed {
		t.Fatalf("first apply: changed=%v err=%v", changed, err)
	}
	lc := parse()
	if len(lc.Rules) != 1 || lc.Rules[0].ID != LifecycleRuleID || lc.Rules[0].Status != "Enabled" || lc.Rules[0].Prefix == nil || lc.Rules[0].Prefix.Value != "wal/" || lc.Rules[0].Days != 2 {
		t.Fatalf("written rules %+v (xml %s)", lc.Rules, srv.config)
	}

	// Unchanged: read, nothing written.
	if changed, err := applyLifecycleRule(ctx, client, "wal-bucket", 2); err != nil || changed || srv.puts != 1 {
		t.Fatalf("second apply: changed=%v err=%v puts=%d", changed, err, srv.puts)
	}

	// A user's rule is kept; ours gets the new days.
	srv.config = `<?xml version="1.0" encoding="UTF-8"?><LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
		`<Rule><ID>user-logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>` +
		`<Rule><ID>` + LifecycleRuleID + `</ID><Filter><Prefix>wal/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>` +
		`</LifecycleConfiguration>`
	if changed, err := applyLifecycleRule(ctx, client, "wal-bucket", 5); err != nil || !changed {
		t.Fatalf("apply with a user rule: changed=%v err=%v", changed, err)
	}
	lc = parse()
	if len(lc.Rules) != 2 || lc.Rules[0].ID != "user-logs" || lc.Rules[0].Prefix.Value != "logs/" || lc.Rules[0].Days != 30 ||
		lc.Rules[1].ID != LifecycleRuleID || lc.Rules[1].Days != 5 {
		t.Fatalf("merged rules %+v (xml %s)", lc.Rules, srv.config)
	}

	// NotImplemented is "not supported", other errors are failures.
	srv.status, srv.code = http.StatusNotImplemented, "NotImplemented"
	if _, err := applyLifecycleRule(ctx, client, "wal-bucket", 5); !errors.Is(err, errLifecycleNotSupported) {
		t.Fatalf("NotImplemented: err = %v, want errLifecycleNotSupported", err)
	}
	srv.status, srv.code = http.StatusForbidden, "AccessDenied"
	_, err = applyLifecycleRule(ctx, client, "wal-bucket", 5)
	if err == nil || errors.Is(err, errLifecycleNotSupported) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("AccessDenied: err = %v", err)
	}
}

// undatedStore is a store whose listing has no modification times (as
// some S3-compatible stores answer) and whose deletes of failKey fail.
type undatedStore struct {
	objstore.Store
	failKey string
}

func (s undatedStore) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	objs, err := s.Store.List(ctx, prefix)
	for i := range objs {
		objs[i].LastModified = time.Time{}
	}
	return objs, err
}

func (s undatedStore) Delete(ctx context.Context, key string) error {
	if key == s.failKey {
		return fmt.Errorf("delete %s: %w", key, objstore.ErrInjected)
	}
	return s.Store.Delete(ctx, key)
}

func TestSweepWALHeaderAgesAndFailures(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	mem := objstore.NewMem("wal-bucket")
	put := func(seq uint64, created time.Time) string {
		key := wal.ObjectKey("demo", "zone-a", 101, 1, seq)
		b, _, err := wal.Encode(wal.Header{Cluster: "demo", Zone: "zone-a", BrokerID: 101, Incarnation: 1, Sequence: seq, CreatedAt: created},
			[]wal.ChunkInput{{Topic: "t", BaseOffset: 0, LastOffset: 0, Batches: [][]byte{{1, 2, 3}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
		return key
	}
	old := put(1, now.Add(-time.Hour))
	young := put(2, now.Add(-time.Second))
	failing := put(3, now.Add(-2*time.Hour))
	garbage := wal.ObjectKey("demo", "zone-a", 101, 1, 4)
	if err := mem.Put(ctx, garbage, []byte("not a WAL object")); err != nil {
		t.Fatal(err)
	}
	clusters := []ClusterRetention{{Name: "demo", Retention: time.Minute, Known: true}}

	res, err := sweepWAL(ctx, undatedStore{Store: mem, failKey: failing}, "zone-a", clusters, now)
	if err != nil {
		t.Fatalf("sweepWAL: %v", err)
	}
	if res.deleted != 1 {
		t.Errorf("deleted %d objects, want 1 (%s)", res.deleted, old)
	}
	if _, err := mem.Head(ctx, old); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("%s (old by its header) still there: %v", old, err)
	}
	for _, k := range []string{young, failing, garbage} {
		if _, err := mem.Head(ctx, k); err != nil {
			t.Errorf("%s must stay: %v", k, err)
		}
	}
	if res.plan.Objects != 3 || res.plan.Clusters[0].Objects != 3 {
		t.Errorf("remaining objects %d (cluster %d), want 3", res.plan.Objects, res.plan.Clusters[0].Objects)
	}
	if res.err == nil || !errors.Is(res.err, objstore.ErrInjected) || !errors.Is(res.err, wal.ErrCorrupt) {
		t.Errorf("per-object errors = %v, want the failed delete and the unreadable header", res.err)
	}

	// A failing listing deletes nothing and is the sweep's error.
	f := objstore.NewFaulty(mem)
	f.SetFailAll(true)
	if _, err := sweepWAL(ctx, f, "zone-a", clusters, now.Add(24*time.Hour)); !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("failing listing: err = %v", err)
	}
	if objs, _ := mem.List(ctx, "wal/"); len(objs) != 3 {
		t.Fatalf("after a failed listing %d objects remain, want 3", len(objs))
	}
}

func TestSweepReason(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	store, err := objstore.NewS3(ctx, objstore.Config{Bucket: "wal", Region: "us-east-1", Endpoint: closed, ForcePathStyle: true, MaxAttempts: 1,
		Credentials: &objstore.StaticCredentials{AccessKeyID: "id", SecretAccessKey: "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, listErr := store.List(ctx, "wal/")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, timeoutErr := store.List(cctx, "wal/")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"connection refused", listErr, ReasonEndpointUnreachable},
		{"access denied", fmt.Errorf("objstore: list: %w (SignatureDoesNotMatch)", objstore.ErrAccessDenied), ReasonAccessDenied},
		{"bucket missing", fmt.Errorf("objstore: list s3://wal/: bucket does not exist: %w", objstore.ErrNotFound), ReasonBucketNotFound},
		{"deadline", fmt.Errorf("list: %w", context.DeadlineExceeded), ReasonSweepTimeout},
		{"cancelled", timeoutErr, ReasonSweepFailed},
		{"other", objstore.ErrInjected, ReasonSweepFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error to classify")
			}
			if got := sweepReason(tt.err); got != tt.want {
				t.Fatalf("sweepReason(%v) = %s, want %s", tt.err, got, tt.want)
			}
		})
	}
}
