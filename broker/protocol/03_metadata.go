package protocol

// Metadata (key 3), versions 0-12.
//
// Brokers (with their rack and their address on the listener the client
// connected on; brokers without that listener are left out), the controller, and every partition's leader,
// leader epoch, replicas, ISR and offline replicas come from the cluster
// metadata snapshot this broker applied last (etcd), the topics and their
// partition counts from that same snapshot (broker.MetadataView: a topic
// the broker is still setting up is not listed half-known, with partitions
// that have no replicas); a standalone broker is
// the only broker, the controller, and the leader (epoch 0) of every
// partition, with itself as the only replica and ISR. A partition without a
// live leader reports LEADER_NOT_AVAILABLE. A null topic list (or an empty
// one in v0) asks for every topic. Missing topics are created with
// num.partitions partitions (and default.replication.factor replicas) when
// auto.create.topics.enable is set and the request allows it (always below
// v4), as Kafka does, except Kafka's internal topic names
// (INVALID_TOPIC_EXCEPTION, broker.CheckNotInternalTopic). The brokers'
// __consumer_offsets projection (broker/offsetstopic) is listed with
// is_internal set, as Kafka lists its offsets topic, and created when a
// request names it before any group made the brokers create it (as Kafka
// creates its internal topics on request; LEADER_NOT_AVAILABLE until this
// broker applied it). v10+ report
// topic UUIDs; v12 may name topics by UUID only. With zone-local produce
// (wal.zonelocal.produce.enable) a client naming its zone in its client ID
// sees its zone's replica as the leader of every partition that has one
// there, with the real leader epoch (zonelocal.go).
//
// With ACLs: a listing of every topic shows the topics the principal may
// DESCRIBE; a named topic it may not answers TOPIC_AUTHORIZATION_FAILED
// (whether it exists or not), and auto-creation needs CREATE on the
// cluster or on the topic (TOPIC_AUTHORIZATION_FAILED otherwise). The
// authorized operations of the cluster (v8-10) and of each topic are
// filled when requested, else the int32 minimum ("not requested").

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-dev/strata/broker"
	"github.com/strata-dev/strata/broker/auth"
)

func init() { register(kmsg.Metadata, 0, 12, handleMetadata) }

const authorizedOpsNotRequested = -2147483648

func handleMetadata(ctx context.Context, r *Request) (kmsg.Response, error) {
	if err := r.CheckVersion(); err != nil {
		return nil, err
	}
	resp, err := metadataAnswer(ctx, r)
	if zone := zoneLocalClient(r); zone != "" && err == nil {
		// Zone-local produce: the client's own zone leads everything.
		zoneLocalLeaders(r.Env.Broker, r.Client.Listener, zone, resp.Topics)
	}
	return resp, err
}

func metadataAnswer(ctx context.Context, r *Request) (*kmsg.MetadataResponse, error) {
	req := r.Msg.(*kmsg.MetadataRequest)
	resp := r.NewResponse().(*kmsg.MetadataResponse)
	b := r.Env.Broker
	cfg := b.Config()

	for _, bi := range b.BrokersOn(r.Client.Listener) {
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = bi.ID, bi.Host, bi.Port
		if bi.Rack != "" {
			rack := bi.Rack
			rb.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	clusterID := b.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = b.ControllerID()
	resp.AuthorizedOperations = authorizedOpsNotRequested
	if req.IncludeClusterAuthorizedOperations && req.Version >= 8 && req.Version <= 10 {
		resp.AuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeCluster, auth.ClusterResourceName)
	}
	topicOps := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.IncludeTopicAuthorizedOperations && req.Version >= 8 && mt.Topic != nil && mt.ErrorCode == 0 {
			mt.AuthorizedOperations = r.authorizedOps(kmsg.ACLResourceTypeTopic, *mt.Topic)
		}
		return mt
	}
	deniedTopic := func(name *string, id [16]byte) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = name, id
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		mt.AuthorizedOperations = authorizedOpsNotRequested
		resp.Topics = append(resp.Topics, mt)
	}

	view := b.MetadataView()
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range view.Topics() {
			if r.authorizedQuiet(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
				resp.Topics = append(resp.Topics, topicOps(metadataTopic(view, t)))
			}
		}
		return resp, nil
	}
	autoCreate := cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			// v10+: by topic UUID.
			if t, ok := view.TopicByID(rt.TopicID); ok {
				if !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
					deniedTopic(nil, rt.TopicID)
					continue
				}
				resp.Topics = append(resp.Topics, topicOps(metadataTopic(view, t)))
				continue
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicID.Code
			mt.AuthorizedOperations = authorizedOpsNotRequested
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		name := *rt.Topic
		if !r.Authorized(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
			deniedTopic(&name, [16]byte{})
			continue
		}
		t, ok := view.Topic(name)
		if !ok && autoCreate && broker.ValidateTopicName(name) == nil && !r.authorizedQuiet(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, auth.ClusterResourceName) &&
			!r.Authorized(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, name) {
			deniedTopic(&name, [16]byte{})
			continue
		}
		if !ok && broker.IsInternalTopic(name) && r.Env.CreateInternalTopic != nil {
			// Kafka creates its internal topics when they are asked for
			// (a tool such as Burrow starting before any group exists).
			code := kerr.LeaderNotAvailable.Code // being created: retry
			if err := r.Env.CreateInternalTopic(ctx, name); errors.Is(err, kerr.UnknownTopicOrPartition) {
				code = kerr.UnknownTopicOrPartition.Code // its projection is off
			} else if err != nil {
				r.Env.Log.V(1).Info("creating an internal topic on request failed", "topic", name, "error", err.Error())
			}
			view = b.MetadataView()
			if t, ok = view.Topic(name); !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = code
				mt.AuthorizedOperations = authorizedOpsNotRequested
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if !ok && autoCreate {
			_, err := b.CreateTopic(ctx, broker.TopicSpec{Name: name, Partitions: -1, ReplicationFactor: -1}, false)
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) { // exists: raced with another creator
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = broker.ErrorCode(err)
				mt.AuthorizedOperations = authorizedOpsNotRequested
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			// CreateTopic waited (bounded) for this broker to apply it.
			view = b.MetadataView()
			if t, ok = view.Topic(name); !ok {
				// Created, not applied here yet: Kafka's answer for a
				// topic being created, which clients retry.
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
				mt.AuthorizedOperations = authorizedOpsNotRequested
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		if !ok {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if broker.ValidateTopicName(name) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			}
			mt.AuthorizedOperations = authorizedOpsNotRequested
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, topicOps(metadataTopic(view, t)))
	}
	return resp, nil
}

func metadataTopic(view broker.MetadataView, t broker.TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = broker.IsInternalTopic(name)
	mt.AuthorizedOperations = authorizedOpsNotRequested
	for i := range t.Partitions {
		mt.Partitions = append(mt.Partitions, metadataPartition(view, t.Name, i))
	}
	return mt
}

// metadataPartition is one partition's state as Metadata and
// DescribeTopicPartitions report it: LEADER_NOT_AVAILABLE without a live
// leader or without state in the view.
func metadataPartition(view broker.MetadataView, topic string, i int32) kmsg.MetadataResponseTopicPartition {
	p := kmsg.NewMetadataResponseTopicPartition()
	p.Partition = i
	v, ok := view.Partition(topic, i)
	if !ok {
		p.ErrorCode = kerr.LeaderNotAvailable.Code
		p.Leader, p.LeaderEpoch = -1, -1
		p.Replicas, p.ISR, p.OfflineReplicas = []int32{}, []int32{}, []int32{}
		return p
	}
	p.Leader = v.Leader
	p.LeaderEpoch = v.LeaderEpoch
	p.Replicas = v.Replicas
	p.ISR = v.ISR
	p.OfflineReplicas = v.Offline
	if v.Leader < 0 {
		p.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return p
}
