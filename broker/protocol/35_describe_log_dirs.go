package protocol

// DescribeLogDirs (key 35), versions 0-4.
//
// This broker has one log directory (its data dir). A null topic list asks
// for every partition; otherwise the named partitions that exist are
// reported (unknown ones are left out, as Kafka does). Size is the bytes of
// the partition's segments; OffsetLag is 0 (no future replicas). v4 adds
// the file system's total and usable bytes.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
)

func init() { register(kmsg.DescribeLogDirs, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	req := r.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := r.NewResponse().(*kmsg.DescribeLogDirsResponse)
	b := r.Env.Broker
	if !r.authorizedCluster(kmsg.ACLOperationDescribe) {
		// As Kafka: no directories, and the error from v3 on.
		if req.Version >= 3 {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.Config().DataDir
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if total, usable, err := b.DiskUsage(); err == nil {
		dir.TotalBytes, dir.UsableBytes = total, usable
	}

	add := func(p *broker.Partition) {
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != p.Topic {
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = p.Topic
			dir.Topics = append(dir.Topics, t)
		}
		t := &dir.Topics[len(dir.Topics)-1]
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = p.Index, p.Log.Size()
		t.Partitions = append(t.Partitions, dp)
	}
	if req.Topics == nil {
		for _, t := range b.Topics() {
			for i := range t.Partitions {
				if p, err := b.Partition(t.Name, i); err == nil {
					add(p)
				}
			}
		}
	} else {
		for _, rt := range req.Topics {
			for _, i := range rt.Partitions {
				if p, err := b.Partition(rt.Topic, i); err == nil {
					add(p)
				}
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}
