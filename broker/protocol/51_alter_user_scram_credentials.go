package protocol

// AlterUserScramCredentials (key 51), version 0 (KIP-554).
//
// Deletes and upserts SCRAM credentials, one result per user. An upsertion
// carries the salt and the salted password (the client salts, the
// password never reaches the broker); the broker stores only the salt,
// iterations, StoredKey and ServerKey (package auth). Kafka's checks: an
// unknown mechanism is UNSUPPORTED_SASL_MECHANISM, iterations outside
// 4096-16384 or an empty user, salt or password UNACCEPTABLE_CREDENTIAL, a
// user/mechanism pair named twice DUPLICATE_RESOURCE, deleting a credential
// that does not exist RESOURCE_NOT_FOUND; a user with any error is not
// changed at all. With ACLs it needs ALTER on the CLUSTER
// (CLUSTER_AUTHORIZATION_FAILED on every user, nothing changed).

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.AlterUserSCRAMCredentials, 0, 0, handleAlterUserScram) }

type scramChange struct {
	upserts   map[auth.Mechanism]auth.Credential
	deletions []auth.Mechanism
	errCode   int16
	errMsg    string
	seen      map[auth.Mechanism]bool
}

func handleAlterUserScram(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.NewResponse().(*kmsg.AlterUserSCRAMCredentialsResponse)
	changes := map[string]*scramChange{}
	change := func(user string) *scramChange {
		c := changes[user]
		if c == nil {
			c = &scramChange{upserts: map[auth.Mechanism]auth.Credential{}, seen: map[auth.Mechanism]bool{}}
			changes[user] = c
		}
		return c
	}
	refuse := func(c *scramChange, code int16, msg string) {
		if c.errCode == 0 {
			c.errCode, c.errMsg = code, msg
		}
	}
	claim := func(c *scramChange, user string, m auth.Mechanism) bool {
		switch {
		case user == "":
			refuse(c, kerr.UnacceptableCredential.Code, "username must not be empty")
		case !m.Valid():
			refuse(c, kerr.UnsupportedSaslMechanism.Code, "unknown SCRAM mechanism")
		case c.seen[m]:
			refuse(c, kerr.DuplicateResource.Code, "a user/mechanism pair is named more than once")
		default:
			c.seen[m] = true
			return true
		}
		return false
	}
	for _, d := range req.Deletions {
		c, m := change(d.Name), auth.Mechanism(d.Mechanism)
		if claim(c, d.Name, m) {
			c.deletions = append(c.deletions, m)
		}
	}
	for _, u := range req.Upsertions {
		c, m := change(u.Name), auth.Mechanism(u.Mechanism)
		if !claim(c, u.Name, m) {
			continue
		}
		cred, err := auth.CredentialFromSalted(m, u.Salt, u.SaltedPassword, int(u.Iterations))
		if err != nil {
			refuse(c, kerr.UnacceptableCredential.Code, err.Error())
			continue
		}
		c.upserts[m] = cred
	}
	clusterOK := r.authorizedCluster(kmsg.ACLOperationAlter)
	users := make([]string, 0, len(changes))
	for u := range changes {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		c := changes[u]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = u
		if c.errCode == 0 && !clusterOK {
			c.errCode, c.errMsg = kerr.ClusterAuthorizationFailed.Code, "ALTER on the cluster is needed to change SCRAM credentials"
		}
		if c.errCode == 0 && r.Env.Credentials == nil {
			c.errCode, c.errMsg = kerr.SecurityDisabled.Code, "no credential store"
		}
		if c.errCode == 0 {
			if err := r.Env.Credentials.AlterScram(ctx, u, c.upserts, c.deletions); err != nil {
				c.errMsg = err.Error()
				c.errCode = kerr.UnknownServerError.Code
				if errors.Is(err, auth.ErrNoCredential) {
					c.errCode = kerr.ResourceNotFound.Code
				}
			}
		}
		if c.errCode != 0 {
			res.ErrorCode = c.errCode
			msg := c.errMsg
			res.ErrorMessage = &msg
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

func sortedMechanisms(m map[auth.Mechanism]int) []auth.Mechanism {
	out := make([]auth.Mechanism, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
