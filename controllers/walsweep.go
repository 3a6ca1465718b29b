package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	strata "github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/broker/objstore"
	"github.com/strata-dev/strata/broker/wal"
)

// Reasons of a FastBucket's WALSwept and LifecycleRuleApplied conditions.
// A failed listing also uses the Reachable reasons EndpointUnreachable,
// AccessDenied and BucketNotFound.
const (
	ReasonSwept             = "Swept"
	ReasonBucketUnreachable = "BucketUnreachable"
	ReasonSweepTimeout      = "SweepTimeout"
	ReasonSweepFailed       = "SweepFailed"
	ReasonDeleteFailed      = "DeleteFailed"

	ReasonRuleApplied      = "RuleApplied"
	ReasonRuleUpToDate     = "RuleUpToDate"
	ReasonRuleDisabled     = "Disabled"
	ReasonNotSupported     = "NotSupported"
	ReasonNoClusters       = "NoClusters"
	ReasonRetentionUnknown = "RetentionUnknown"
	ReasonLifecycleFailed  = "LifecycleFailed"
)

const (
	// sweepTimeout bounds one sweep; what is left is deleted next time.
	sweepTimeout = 2 * time.Minute
	// sweepDeleteWorkers is how many deletes run at once.
	sweepDeleteWorkers = 8
)

// errLifecycleNotSupported is a store that answers NotImplemented to the
// bucket lifecycle API (e.g. Versity Gateway v1.8).
var errLifecycleNotSupported = errors.New("the store does not implement bucket lifecycle configuration")

// sweepResult is the outcome of one sweep.
type sweepResult struct {
	plan SweepPlan
	// deleted and deletedBytes are the deletes that succeeded.
	deleted, deletedBytes int64
	// err joins the per-object failures (unreadable headers, failed
	// deletes); the objects concerned are kept and counted as present.
	err error
}

// openBucket returns an object store on the FastBucket's bucket.
func openBucket(ctx context.Context, spec strata.FastBucketSpec, creds *StaticCredentials) (*objstore.S3, error) {
	cfg := objstore.Config{
		Bucket: spec.Bucket, Region: spec.Region, Zone: spec.Zone, Endpoint: spec.Endpoint,
		ForcePathStyle: spec.ForcePathStyle, Type: objstore.TypeS3,
	}
	if spec.Type == strata.BucketTypeS3Express {
		cfg.Type = objstore.TypeS3Express
	}
	if creds != nil {
		cfg.Credentials = &objstore.StaticCredentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken}
	}
	return objstore.NewS3(ctx, cfg)
}

// sweepWAL lists wal/ in the store and deletes what PlanSweep says. A
// failed listing is returned as err with no plan; failures on single
// objects are in the result.
func sweepWAL(ctx context.Context, store objstore.Store, zone string, clusters []ClusterRetention, now time.Time) (sweepResult, error) {
	listing, err := store.List(ctx, wal.KeyPrefix)
	if err != nil {
		return sweepResult{}, err
	}
	var errs []error
	plan := PlanSweep(listing, zone, clusters, nil, now)
	if len(plan.NeedCreated) > 0 {
		created := map[string]time.Time{}
		for _, o := range plan.NeedCreated {
			h, err := wal.ReadHeader(ctx, store, o.Key)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			created[o.Key] = h.CreatedAt
		}
		plan = PlanSweep(listing, zone, clusters, created, now)
	}

	res := sweepResult{plan: plan}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan objstore.ObjectInfo)
	for range min(sweepDeleteWorkers, len(plan.Delete)) {
		wg.Go(func() {
			for o := range work {
				err := store.Delete(ctx, o.Key)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
					res.plan.Objects++
					res.plan.Bytes += o.Size
					if k, perr := wal.ParseKey(o.Key); perr == nil {
						for i := range res.plan.Clusters {
							if res.plan.Clusters[i].Name == k.Cluster {
								res.plan.Clusters[i].Objects++
								res.plan.Clusters[i].Bytes += o.Size
							}
						}
					}
				} else {
					res.deleted++
					res.deletedBytes += o.Size
				}
				mu.Unlock()
			}
		})
	}
	for _, o := range plan.Delete {
		work <- o
	}
	close(work)
	wg.Wait()
	res.err = errors.Join(errs...)
	return res, nil
}

// s3LifecycleClient is the part of the S3 API the lifecycle rule needs.
type s3LifecycleClient interface {
	GetBucketLifecycleConfiguration(ctx context.Context, in *s3.GetBucketLifecycleConfigurationInput, opts ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error)
	PutBucketLifecycleConfiguration(ctx context.Context, in *s3.PutBucketLifecycleConfigurationInput, opts ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error)
}

// applyLifecycleRule makes the bucket's lifecycle configuration hold the
// operator's wal/ rule with days, keeping every other rule. It reports
// whether it wrote the configuration; errLifecycleNotSupported when the
// store does not implement the API.
func applyLifecycleRule(ctx context.Context, client s3LifecycleClient, bucket string, days int32) (bool, error) {
	var existing []s3types.LifecycleRule
	out, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	switch {
	case err == nil:
		existing = out.Rules
	case apiCode(err) == "NoSuchLifecycleConfiguration":
	case isNotImplemented(err):
		return false, fmt.Errorf("GetBucketLifecycleConfiguration: %w (%w)", errLifecycleNotSupported, err)
	default:
		return false, fmt.Errorf("GetBucketLifecycleConfiguration: %w", err)
	}
	rules, changed := MergeLifecycleRules(existing, days)
	if !changed {
		return false, nil
	}
	_, err = client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                 aws.String(bucket),
		LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules},
	})
	if isNotImplemented(err) {
		return false, fmt.Errorf("PutBucketLifecycleConfiguration: %w (%w)", errLifecycleNotSupported, err)
	}
	if err != nil {
		return false, fmt.Errorf("PutBucketLifecycleConfiguration: %w", err)
	}
	return true, nil
}

func isNotImplemented(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NotImplemented" || apiErr.ErrorCode() == "NotImplementedError")
}

// sweepReason maps a failed listing to a WALSwept reason.
func sweepReason(err error) string {
	if errors.Is(err, objstore.ErrAccessDenied) {
		return ReasonAccessDenied
	}
	switch r := classify("ListObjectsV2", err).Reason; r {
	case ReasonProbeTimeout:
		return ReasonSweepTimeout
	case ReasonProbeFailed:
		if errors.Is(err, objstore.ErrNotFound) {
			return ReasonBucketNotFound
		}
		return ReasonSweepFailed
	default:
		return r
	}
}
