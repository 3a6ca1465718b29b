package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/strata-dev/strata/broker/objstore"
)

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     objstore.Config
		wantErr string
	}{
		{"plain S3", objstore.Config{Bucket: "b", Region: "us-east-1"}, ""},
		{"S3-compatible, path style", objstore.Config{Bucket: "b", Region: "us-east-1", Endpoint: "http://127.0.0.1:9000", ForcePathStyle: true}, ""},
		{"directory bucket", objstore.Config{Bucket: "wal--use1-az6--x-s3", Region: "us-east-1", Type: objstore.TypeS3Express}, ""},
		{"no bucket", objstore.Config{Region: "us-east-1"}, "bucket is required"},
		{"no region", objstore.Config{Bucket: "b"}, "region is required"},
		{"express without directory bucket name", objstore.Config{Bucket: "wal", Region: "us-east-1", Type: objstore.TypeS3Express}, "not a directory bucket name"},
		{"express with path style", objstore.Config{Bucket: "wal--use1-az6--x-s3", Region: "us-east-1", Type: objstore.TypeS3Express, ForcePathStyle: true}, "path-style"},
		{"unknown type", objstore.Config{Bucket: "b", Region: "us-east-1", Type: "GCS"}, "unknown bucket type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// recordingClient records requests and fails them without network access.
type recordingClient struct {
	mu   sync.Mutex
	reqs []*http.Request
}

var errOffline = errors.New("offline test client")

func (c *recordingClient) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	return nil, errOffline
}

// TestS3ExpressSessionAuth checks the configuration path of a directory
// bucket: with no custom endpoint the SDK sends the first request to the
// zonal S3 Express endpoint and it is CreateSession (session auth), before
// any PutObject. The WAL's lean request path (OwnChecksums) keeps it.
func TestS3ExpressSessionAuth(t *testing.T) {
	t.Setenv("AWS_CA_BUNDLE", "") // a custom CA bundle needs the SDK's own HTTP client
	for _, own := range []bool{false, true} {
		t.Run(fmt.Sprintf("own=%v", own), func(t *testing.T) { testS3ExpressSessionAuth(t, own) })
	}
}

func testS3ExpressSessionAuth(t *testing.T, own bool) {
	rec := &recordingClient{}
	s := newExpressStore(t, rec, own)
	err := s.Put(context.Background(), "wal/c/z/1/1/00000000000000000000", []byte("v"))
	if err == nil || !strings.Contains(err.Error(), "CreateSession") || !strings.Contains(err.Error(), errOffline.Error()) {
		t.Fatalf("Put = %v, want CreateSession failing with the offline client's error", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("no request was sent")
	}
	first := rec.reqs[0]
	if want := "strata-wal--use1-az6--x-s3.s3express-use1-az6.us-east-1.amazonaws.com"; first.URL.Host != want {
		t.Errorf("first request host = %q, want the zonal endpoint %q", first.URL.Host, want)
	}
	if _, ok := first.URL.Query()["session"]; !ok || first.Method != http.MethodGet {
		t.Errorf("first request = %s %s, want CreateSession (GET /?session)", first.Method, first.URL)
	}
	for _, r := range rec.reqs {
		if r.Method == http.MethodPut {
			t.Errorf("PutObject was sent before a session existed: %s", r.URL)
		}
	}
}

// TestS3PlainBucketNoSession: an ordinary bucket gets no CreateSession and
// path-style puts the bucket in the path.
func TestS3PlainBucketNoSession(t *testing.T) {
	t.Setenv("AWS_CA_BUNDLE", "") // a custom CA bundle needs the SDK's own HTTP client
	rec := &recordingClient{}
	s, err := objstore.NewS3(context.Background(), objstore.Config{
		Bucket: "wal", Region: "us-east-1", Endpoint: "http://127.0.0.1:1", ForcePathStyle: true,
		Credentials: &objstore.StaticCredentials{AccessKeyID: "a", SecretAccessKey: "b"},
		MaxAttempts: 1, HTTPClient: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Put(context.Background(), "k", []byte("v"))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 1 || rec.reqs[0].Method != http.MethodPut || rec.reqs[0].URL.Host != "127.0.0.1:1" || rec.reqs[0].URL.Path != "/wal/k" {
		t.Fatalf("requests = %v, want one PUT http://127.0.0.1:1/wal/k", rec.reqs)
	}
}

// sessionClient answers CreateSession with fixed session credentials and
// every other request with 200, recording the requests.
type sessionClient struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (c *sessionClient) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.mu.Unlock()
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	body := ""
	if _, ok := r.URL.Query()["session"]; ok {
		body = `<?xml version="1.0" encoding="UTF-8"?><CreateSessionResult><Credentials>` +
			`<SessionToken>session-token</SessionToken><SecretAccessKey>session-secret</SecretAccessKey>` +
			`<AccessKeyId>SESSIONKEY</AccessKeyId><Expiration>2099-01-01T00:00:00Z</Expiration>` +
			`</Credentials></CreateSessionResult>`
	}
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// TestS3ExpressSessionSignsLeanPut: after CreateSession, a WAL store's
// (OwnChecksums) PUT to a directory bucket is signed with the session's
// credentials and carries its token (auth scheme sigv4-s3express), with
// an unsigned payload.
func TestS3ExpressSessionSignsLeanPut(t *testing.T) {
	t.Setenv("AWS_CA_BUNDLE", "") // a custom CA bundle needs the SDK's own HTTP client
	rec := &sessionClient{}
	s := newExpressStore(t, rec, true)
	if err := s.Put(context.Background(), "wal/c/z/1/1/00000000000000000000", []byte("v")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) != 2 || rec.reqs[1].Method != http.MethodPut {
		t.Fatalf("requests %v, want CreateSession then the PUT", rec.reqs)
	}
	put := rec.reqs[1]
	if got := put.Header.Get("X-Amz-S3session-Token"); got != "session-token" {
		t.Errorf("PUT x-amz-s3session-token = %q, want the session's token", got)
	}
	if got := put.Header.Get("Authorization"); !strings.Contains(got, "Credential=SESSIONKEY/") {
		t.Errorf("PUT Authorization = %q, want it signed with the session's key", got)
	}
	if got := put.Header.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
		t.Errorf("PUT x-amz-content-sha256 = %q, want UNSIGNED-PAYLOAD", got)
	}
}

// newExpressStore is a directory-bucket store (us-east-1, zone use1-az6)
// whose requests go to client, one attempt each.
func newExpressStore(t *testing.T, client aws.HTTPClient, own bool) *objstore.S3 {
	t.Helper()
	s, err := objstore.NewS3(context.Background(), objstore.Config{
		Bucket: "strata-wal--use1-az6--x-s3", Region: "us-east-1", Type: objstore.TypeS3Express,
		Credentials: &objstore.StaticCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"},
		MaxAttempts: 1, HTTPClient: client, OwnChecksums: own,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
