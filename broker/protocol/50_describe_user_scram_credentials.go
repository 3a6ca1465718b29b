package protocol

// DescribeUserScramCredentials (key 50), version 0 (KIP-554).
//
// Lists the SCRAM mechanisms and iteration counts of the named users (of
// every user when the list is null or empty), never salts or keys. A named
// user without credentials answers RESOURCE_NOT_FOUND, a user named twice
// DUPLICATE_RESOURCE. Credentials come from Env.Credentials (etcd in
// cluster mode, a file in the data directory standalone).
// With ACLs it needs DESCRIBE on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeUserSCRAMCredentials, 0, 0, handleDescribeUserScram) }

func handleDescribeUserScram(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.NewResponse().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !r.authorizedCluster(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if r.Env.Credentials == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		return resp, nil
	}
	var names []string // nil: every user
	seen := map[string]int{}
	for _, u := range req.Users {
		seen[u.Name]++
		if seen[u.Name] == 1 {
			names = append(names, u.Name)
		}
	}
	found, err := r.Env.Credentials.ScramUsers(ctx, names)
	if err != nil {
		r.Env.Log.Error(err, "describe SCRAM credentials")
		resp.ErrorCode = kerr.UnknownServerError.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, nil
	}
	if names == nil {
		for u := range found {
			names = append(names, u)
		}
		sort.Strings(names)
	}
	for _, u := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch {
		case seen[u] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			msg := "user named more than once: " + u
			res.ErrorMessage = &msg
		case len(found[u]) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			msg := "attempt to describe nonexistent SCRAM credential for user " + u
			res.ErrorMessage = &msg
		default:
			for _, m := range sortedMechanisms(found[u]) {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = int8(m), int32(found[u][m])
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
