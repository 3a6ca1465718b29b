package protocol

// UpdateFeatures (key 57), versions 0-1.
//
// Served so that admin tools (kafka-features.sh, kadm.UpdateFeatures) get
// a clear per-feature answer rather than a closed connection: Strata's
// feature levels (18_api_versions.go, features) are fixed by its release
// and change only with an upgrade, because each level is code that is or
// is not there (a KIP-848 group coordinator, the KIP-890 part 2
// transaction protocol); there is no metadata log whose format a level
// would switch. So an update to the level already in force succeeds (it
// changes nothing), and every other one gets INVALID_UPDATE_VERSION with a
// message naming the level in force, as Kafka answers an update it cannot
// make; a feature Strata does not implement gets INVALID_UPDATE_VERSION
// too. ValidateOnly answers the same. Requires CLUSTER ALTER, as in Kafka
// (CLUSTER_AUTHORIZATION_FAILED, top level and per feature). v2 (no
// per-feature results) is not served: with 0-1, clients get an answer
// per feature.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.UpdateFeatures, 0, 1, handleUpdateFeatures) }

func handleUpdateFeatures(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.UpdateFeaturesRequest)
	resp := r.NewResponse().(*kmsg.UpdateFeaturesResponse)
	authorized := r.Authorized(kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName)
	if !authorized {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	}
	for _, u := range req.FeatureUpdates {
		res := kmsg.NewUpdateFeaturesResponseResult()
		res.Feature = u.Feature
		level, known := finalizedLevel(u.Feature)
		var msg string
		switch {
		case !authorized:
			res.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		case !known:
			res.ErrorCode = kerr.InvalidUpdateVersion.Code
			msg = fmt.Sprintf("Strata does not implement feature %q", u.Feature)
		case max(u.MaxVersionLevel, 0) != level:
			res.ErrorCode = kerr.InvalidUpdateVersion.Code
			msg = fmt.Sprintf("%s is %d in this Strata release; its feature levels are fixed by the release and change only with an upgrade", u.Feature, level)
		}
		if msg != "" {
			res.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
