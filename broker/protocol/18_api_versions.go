package protocol

// ApiVersions (key 18), versions 0-4.
//
// The answer lists every key in the registry with the exact range
// registered. A request with a version above 4 is answered (by the server,
// before decoding the body) with a v0 response, header v0, carrying
// UNSUPPORTED_VERSION and the full key list, as Kafka does; the client then
// retries with a version from that list. v3+ requests with an invalid
// client software name or version get INVALID_REQUEST. A v3+ answer to a
// broker (client ID BrokerClientIDPrefix) carries the tagged field
// TagZoneLocalForms: the forms of zone-local forwarded records this
// broker reads (zonelocal.go), so that a forwarder sends the compact
// form only to leaders that read it.
//
// v3+ answers also carry the Kafka features (KIP-584) Strata implements,
// fixed by the release (features below): SupportedFeatures, the finalized
// levels in FinalizedFeatures and FinalizedFeaturesEpoch
// (featuresEpoch). For v3 requests a supported range starting at 0 starts
// at 1 and a range of only 0 is left out, as Kafka does since KIP-1022
// (older clients fail on a minimum of 0); finalized level 0 means off and
// is never listed. What is claimed, and why no more:
//
//   - group.version 0-1, finalized 1: the KIP-848 consumer group protocol
//     (ConsumerGroupHeartbeat, key 68; ConsumerGroupDescribe, key 69) is
//     served.
//   - transaction.version 0 only. Level 1 is, in Kafka, a record format of
//     __transaction_state, which Strata does not have (transaction state
//     is in etcd or a file); level 2 is KIP-890 part 2 (an epoch bump per
//     transaction, partitions added by Produce v12 and TxnOffsetCommit v5,
//     EndTxn v5), and Strata serves Produce up to v11 and EndTxn and
//     TxnOffsetCommit up to v4. franz-go switches to the part 2 protocol
//     when transaction.version 2 is finalized, so claiming it would break
//     transactions. (KIP-890 part 1, server-side partition verification,
//     needs no feature level.)
//   - metadata.version and kraft.version are not listed: they version
//     KRaft's metadata log and controller quorum, and Strata's metadata is
//     in etcd. No client changes behaviour on them; kafka-features.sh
//     shows the features above only.
//   - eligible.leader.replicas.version is not listed: the controller
//     elects from the ISR and keeps no KIP-966 eligible leader replicas.
//     streams.version is not listed (KIP-1071's keys 88-89 are not
//     served).
//   - share.version 0-1, finalized 1: KIP-932 share groups (keys 76-79
//     at the versions of Kafka 4.1, which serves them once share.version
//     1 is finalized) are served.
//
// UpdateFeatures (key 57, 57_update_features.go) answers that these levels
// cannot be changed.

import (
	"context"
	"regexp"
	"strings"

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
	if req.Version >= 3 {
		resp.SupportedFeatures = supportedFeatures(req.Version)
		resp.FinalizedFeaturesEpoch = featuresEpoch
		resp.FinalizedFeatures = finalizedFeatures()
		if strings.HasPrefix(r.Client.ClientID, BrokerClientIDPrefix) {
			// Zone-local produce: the forms of forwarded records this
			// broker reads (zonelocal.go), for the brokers forwarding.
			resp.UnknownTags.Set(TagZoneLocalForms, []byte{ZoneLocalFormsRead})
		}
	}
	return resp, nil
}

// feature is a Kafka feature (KIP-584) Strata implements: the levels it
// supports and the one in force (0: off, not listed as finalized).
type feature struct {
	name      string
	min, max  int16
	finalized int16
}

// features are fixed by the release; see the file comment for why each
// range is what it is.
var features = []feature{
	{name: "group.version", min: 0, max: 1, finalized: 1},
	{name: "share.version", min: 0, max: 1, finalized: 1},
	{name: "transaction.version", min: 0, max: 0, finalized: 0},
}

// featuresEpoch is FinalizedFeaturesEpoch: the finalized levels never
// change while a broker runs (they change with the release), so one
// constant, not -1 (unknown), which would make clients ignore them.
const featuresEpoch = 1

// supportedFeatures lists features for an ApiVersions request of version
// v (3 or more): below v4 a minimum of 0 becomes 1 and ranges of only 0
// are left out (KIP-1022).
func supportedFeatures(v int16) []kmsg.ApiVersionsResponseSupportedFeature {
	out := make([]kmsg.ApiVersionsResponseSupportedFeature, 0, len(features))
	for _, f := range features {
		lo := f.min
		if v < 4 && lo == 0 {
			if f.max == 0 {
				continue
			}
			lo = 1
		}
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.name, lo, f.max
		out = append(out, sf)
	}
	return out
}

// finalizedFeatures lists the features in force (level above 0).
func finalizedFeatures() []kmsg.ApiVersionsResponseFinalizedFeature {
	var out []kmsg.ApiVersionsResponseFinalizedFeature
	for _, f := range features {
		if f.finalized > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.name, f.finalized, f.finalized
			out = append(out, ff)
		}
	}
	return out
}

// finalizedLevel returns the level of feature name in force and whether
// Strata knows the feature.
func finalizedLevel(name string) (level int16, known bool) {
	for _, f := range features {
		if f.name == name {
			return f.finalized, true
		}
	}
	return 0, false
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
