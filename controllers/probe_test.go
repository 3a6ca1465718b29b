package controllers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func httpErr(status int, code string) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: "test"},
	}}
}

func TestClassifyProbeErrors(t *testing.T) {
	tests := []struct {
		name, step string
		err        error
		want       string
	}{
		{"connection refused", "HeadBucket", fmt.Errorf("send: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}), ReasonEndpointUnreachable},
		{"DNS failure", "HeadBucket", fmt.Errorf("send: %w", &net.DNSError{Err: "no such host", Name: "s3.invalid"}), ReasonEndpointUnreachable},
		{"timeout", "PutObject", fmt.Errorf("send: %w", context.DeadlineExceeded), ReasonProbeTimeout},
		{"403 on HeadBucket (no body, no code)", "HeadBucket", httpErr(403, "Forbidden"), ReasonAccessDenied},
		{"wrong signature on PutObject", "PutObject", httpErr(403, "SignatureDoesNotMatch"), ReasonAccessDenied},
		{"404 on HeadBucket", "HeadBucket", httpErr(404, "NotFound"), ReasonBucketNotFound},
		{"NoSuchBucket on GetObject", "GetObject", httpErr(404, "NoSuchBucket"), ReasonBucketNotFound},
		{"404 on GetObject is not a missing bucket", "GetObject", httpErr(404, "NoSuchKey"), ReasonProbeFailed},
		{"500", "PutObject", httpErr(500, "InternalError"), ReasonProbeFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := classify(tt.step, tt.err)
			if pe.Reason != tt.want {
				t.Errorf("reason = %s, want %s (err %v)", pe.Reason, tt.want, tt.err)
			}
			if pe.Step != tt.step || pe.Error() == "" {
				t.Errorf("ProbeError = %+v", pe)
			}
		})
	}
}
