package protocol

// ApiVersions (key 18), versions 0-4.
//
// The answer lists every key in the registry with the exact range
// registered. A request with a version above 4 is answered (by the server,
// before decoding the body) with a v0 response, header v0, carrying
// UNSUPPORTED_VERSION and the full key list, as Kafka does; the client then
// retries with a version from that list. v3+ requests with an invalid
// client software name or version get INVALID_REQUEST.

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ApiVersions, 0, 4, handleApiVersions) }

// Kafka's rule for ClientSoftwareName / ClientSoftwareVersion (KIP-511).
var softwareRe = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.ApiVersionsRequest)
	resp := r.NewResponse().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareRe.MatchString(req.ClientSoftwareName) || !softwareRe.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	resp.ApiKeys = apiKeys()
	return resp, nil
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	apis := APIs()
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, api := range apis {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: api.Key, MinVersion: api.Min, MaxVersion: api.Max})
	}
	return keys
}

// unsupportedAPIVersionsResponse is the v0 answer to an ApiVersions request
// whose version is not served.
func unsupportedAPIVersionsResponse() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys()
	return resp
}
