package controllers

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
