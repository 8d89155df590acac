package server

// Authorization (broker/acl): every request is checked before any work,
// with Kafka's operation per API. Off (authorizer.class.name unset), every
// request is allowed.
//
//	Produce                      WRITE topic; WRITE transactional id (transactional batches)   (produce.go)
//	Fetch                        READ topic; a replica's fetch CLUSTER_ACTION cluster             (fetch.go)
//	Metadata                     topics without DESCRIBE hidden/refused; auto-create CREATE      (metadata.go)
//	ListOffsets                  DESCRIBE topic
//	OffsetForLeaderEpoch         DESCRIBE topic; a replica's CLUSTER_ACTION cluster
//	JoinGroup SyncGroup
//	Heartbeat LeaveGroup         READ group
//	OffsetCommit                 READ group, READ topic
//	OffsetFetch                  DESCRIBE group
//	DescribeGroups               DESCRIBE group;  DeleteGroups DELETE group
//	ListGroups                   DESCRIBE cluster, else the groups with DESCRIBE
//	CreateTopics                 CREATE cluster or CREATE topic
//	DeleteTopics DeleteRecords   DELETE topic;  CreatePartitions ALTER topic
//	DescribeConfigs              DESCRIBE_CONFIGS topic or cluster (broker resources)
//	AlterConfigs Incremental…    ALTER_CONFIGS topic or cluster
//	InitProducerId               WRITE transactional id; without one IDEMPOTENT_WRITE cluster or WRITE on any topic
//	AddPartitionsToTxn EndTxn    WRITE transactional id (AddPartitionsToTxn also WRITE topic)
//	AddOffsetsToTxn TxnOffsetCommit  WRITE transactional id, READ group
//	WriteTxnMarkers              CLUSTER_ACTION cluster
//	DescribeTransactions ListTransactions  DESCRIBE transactional id
//	DescribeProducers            READ topic
//	Create/DeleteAcls            ALTER cluster;  DescribeAcls DESCRIBE cluster
//	ElectLeaders AlterPartitionReassignments AlterUserScramCredentials  ALTER cluster
//	ListPartitionReassignments DescribeLogDirs DescribeQuorum DescribeUserScramCredentials  DESCRIBE cluster
//	FindCoordinator              DESCRIBE group or transactional id
//	ApiVersions SaslHandshake SaslAuthenticate DescribeCluster  not checked
//
// A denial answers TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED
// for the entries denied (the rest of the request is served) or for the whole
// request, as Kafka does; it is counted
// (sluice_authorization_denials_total{operation,resource_type}) and logged.
//
// The inter-broker listener of a cluster-mode broker (PLAINTEXT, so
// User:ANONYMOUS) is trusted as a super user: replica fetches arrive there.
// Clients must therefore use another listener when the authorizer is on.

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/acl"
	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/metadata"
)

// authz is the server's authorizer with its denial counter.
type authz struct {
	a       *acl.Authorizer
	denials *prometheus.CounterVec
	stop    chan struct{}
}

// openAuthz starts the authorizer of cfg (nil when it is off).
func openAuthz(cfg config.Broker, st metadata.Store, reg *prometheus.Registry, logger *slog.Logger) (*authz, error) {
	ac := cfg.Security.Authorizer
	if !ac.Enabled() {
		return nil, nil
	}
	as, ok := st.(metadata.ACLStore)
	if !ok {
		return nil, fmt.Errorf("server: authorizer.class.name is set but the metadata store keeps no ACLs")
	}
	a, err := acl.New(acl.Options{Store: as, SuperUsers: ac.SuperUsers, AllowEveryoneIfNoACLFound: ac.AllowEveryoneIfNoACLFound})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	z := &authz{a: a, stop: make(chan struct{}), denials: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_authorization_denials_total", Help: "Requests or request entries denied by the authorizer.",
	}, []string{"operation", "resource_type"})}
	reg.MustRegister(z.denials)
	if w, ok := st.(metadata.ACLWatcher); ok {
		go w.WatchACLs(z.stop, func() error {
			err := a.Reload()
			if err != nil {
				logger.Error("reloading the ACLs failed: the previous ones stay in force until a read succeeds", "err", err)
			}
			return err
		})
	}
	logger.Info("authorizer on", "authorizer.class.name", ac.ClassName, "super.users", ac.SuperUsers, "allow.everyone.if.no.acl.found", ac.AllowEveryoneIfNoACLFound)
	return z, nil
}

func (z *authz) close() {
	if z != nil {
		close(z.stop)
	}
}

// allowed reports whether the request's principal may do op on (typ,
// name); a denial is counted and logged.
func (rc *requestContext) allowed(op acl.Operation, typ acl.ResourceType, name string) bool {
	z := rc.conn.s.authz
	if z == nil || rc.conn.l.interBroker {
		return true
	}
	p := rc.conn.Principal()
	if z.a.Authorize(p, rc.conn.ip, op, typ, name) {
		return true
	}
	rc.denied(op, typ, name)
	return false
}

func (rc *requestContext) denied(op acl.Operation, typ acl.ResourceType, name string) {
	rc.conn.s.authz.denials.WithLabelValues(op.String(), typ.String()).Inc()
	rc.logger.Info("authorization denied", "principal", rc.conn.Principal(), "host", rc.conn.ip,
		"operation", op.String(), "resource_type", typ.String(), "resource", name, "api", kmsg.NameForKey(rc.hdr.key))
}

// allowedQuiet is allowed without counting or logging a denial (Metadata
// hides topics; hiding is not an error).
func (rc *requestContext) allowedQuiet(op acl.Operation, typ acl.ResourceType, name string) bool {
	z := rc.conn.s.authz
	return z == nil || rc.conn.l.interBroker || z.a.Authorize(rc.conn.Principal(), rc.conn.ip, op, typ, name)
}

const (
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opClusterAction   = kmsg.ACLOperationClusterAction
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite

	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId
)

func (rc *requestContext) allowedCluster(op acl.Operation) bool {
	return rc.allowed(op, resCluster, acl.ClusterName)
}

var (
	topicDenied   = kerr.TopicAuthorizationFailed.Code
	groupDenied   = kerr.GroupAuthorizationFailed.Code
	clusterDenied = kerr.ClusterAuthorizationFailed.Code
	txnDenied     = kerr.TransactionalIDAuthorizationFailed.Code
)

// authorizeRequest checks req before its handler runs. A non-nil rep is
// the whole answer (the request was denied). Otherwise req may have lost
// its denied entries, and after (if set) adds their errors to the
// handler's answer.
func authorizeRequest(s *Server, rc *requestContext, req kmsg.Request) (rep reply, after func(reply) reply) {
	if s.authz == nil || rc.conn.l.interBroker {
		return nil, nil
	}
	whole := func(resp kmsg.Response) (reply, func(reply) reply) { return kmsgReply{resp}, nil }
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return authorizeFindCoordinator(rc, r)
	case *kmsg.JoinGroupRequest:
		if !rc.allowed(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = groupDenied
			return whole(resp)
		}
	case *kmsg.SyncGroupRequest:
		if !rc.allowed(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = groupDenied
			return whole(resp)
		}
	case *kmsg.HeartbeatRequest:
		if !rc.allowed(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = groupDenied
			return whole(resp)
		}
	case *kmsg.LeaveGroupRequest:
		if !rc.allowed(opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = groupDenied
			return whole(resp)
		}
	case *kmsg.OffsetCommitRequest:
		return authorizeOffsetCommit(rc, r)
	case *kmsg.OffsetFetchRequest:
		return authorizeOffsetFetch(rc, r)
	case *kmsg.DescribeGroupsRequest:
		var denied []string
		r.Groups, denied = splitNames(rc, r.Groups, opDescribe, resGroup)
		return nil, appendTo(denied, func(resp *kmsg.DescribeGroupsResponse, g string) {
			e := kmsg.NewDescribeGroupsResponseGroup()
			e.Group, e.ErrorCode = g, groupDenied
			resp.Groups = append(resp.Groups, e)
		})
	case *kmsg.DeleteGroupsRequest:
		var denied []string
		r.Groups, denied = splitNames(rc, r.Groups, opDelete, resGroup)
		return nil, appendTo(denied, func(resp *kmsg.DeleteGroupsResponse, g string) {
			e := kmsg.NewDeleteGroupsResponseGroup()
			e.Group, e.ErrorCode = g, groupDenied
			resp.Groups = append(resp.Groups, e)
		})
	case *kmsg.ListGroupsRequest:
		if rc.allowedQuiet(opDescribe, resCluster, acl.ClusterName) {
			return nil, nil
		}
		return nil, func(rep reply) reply {
			if kr, ok := rep.(kmsgReply); ok {
				if resp, ok := kr.resp.(*kmsg.ListGroupsResponse); ok {
					kept := resp.Groups[:0]
					for _, g := range resp.Groups {
						if rc.allowedQuiet(opDescribe, resGroup, g.Group) {
							kept = append(kept, g)
						}
					}
					resp.Groups = kept
				}
			}
			return rep
		}
	case *kmsg.CreateTopicsRequest:
		if rc.allowedQuiet(opCreate, resCluster, acl.ClusterName) {
			return nil, nil
		}
		var denied []string
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if rc.allowed(opCreate, resTopic, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t.Topic)
			}
		}
		r.Topics = kept
		return nil, appendTo(denied, func(resp *kmsg.CreateTopicsResponse, t string) {
			e := kmsg.NewCreateTopicsResponseTopic()
			e.Topic, e.ErrorCode = t, topicDenied
			resp.Topics = append(resp.Topics, e)
		})
	case *kmsg.DeleteTopicsRequest:
		return authorizeDeleteTopics(s, rc, r)
	case *kmsg.DeleteRecordsRequest:
		var denied []kmsg.DeleteRecordsRequestTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if rc.allowed(opDelete, resTopic, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t)
			}
		}
		r.Topics = kept
		return nil, appendTo(denied, func(resp *kmsg.DeleteRecordsResponse, t kmsg.DeleteRecordsRequestTopic) {
			e := kmsg.NewDeleteRecordsResponseTopic()
			e.Topic = t.Topic
			for _, p := range t.Partitions {
				ep := kmsg.NewDeleteRecordsResponseTopicPartition()
				ep.Partition, ep.ErrorCode, ep.LowWatermark = p.Partition, topicDenied, -1
				e.Partitions = append(e.Partitions, ep)
			}
			resp.Topics = append(resp.Topics, e)
		})
	case *kmsg.CreatePartitionsRequest:
		var denied []string
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if rc.allowed(opAlter, resTopic, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t.Topic)
			}
		}
		r.Topics = kept
		return nil, appendTo(denied, func(resp *kmsg.CreatePartitionsResponse, t string) {
			e := kmsg.NewCreatePartitionsResponseTopic()
			e.Topic, e.ErrorCode = t, topicDenied
			resp.Topics = append(resp.Topics, e)
		})
	case *kmsg.ListOffsetsRequest:
		var denied []kmsg.ListOffsetsRequestTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if rc.allowed(opDescribe, resTopic, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t)
			}
		}
		r.Topics = kept
		return nil, appendTo(denied, func(resp *kmsg.ListOffsetsResponse, t kmsg.ListOffsetsRequestTopic) {
			e := kmsg.NewListOffsetsResponseTopic()
			e.Topic = t.Topic
			for _, p := range t.Partitions {
				ep := kmsg.NewListOffsetsResponseTopicPartition()
				ep.Partition, ep.ErrorCode = p.Partition, topicDenied
				e.Partitions = append(e.Partitions, ep)
			}
			resp.Topics = append(resp.Topics, e)
		})
	case *kmsg.OffsetForLeaderEpochRequest:
		replica := r.Version >= 3 && r.ReplicaID >= 0
		if replica && !rc.allowedCluster(opClusterAction) {
			return whole(offsetForLeaderEpochDenied(r, r.Topics, clusterDenied))
		}
		if replica {
			return nil, nil
		}
		var denied []kmsg.OffsetForLeaderEpochRequestTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if rc.allowed(opDescribe, resTopic, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t)
			}
		}
		r.Topics = kept
		if len(denied) == 0 {
			return nil, nil
		}
		return nil, func(rep reply) reply {
			if kr, ok := rep.(kmsgReply); ok {
				if resp, ok := kr.resp.(*kmsg.OffsetForLeaderEpochResponse); ok {
					resp.Topics = append(resp.Topics, offsetForLeaderEpochDenied(r, denied, topicDenied).Topics...)
				}
			}
			return rep
		}
	case *kmsg.DescribeConfigsRequest:
		var denied []kmsg.DescribeConfigsRequestResource
		kept := r.Resources[:0]
		for _, res := range r.Resources {
			if configAllowed(rc, opDescribeConfigs, res.ResourceType, res.ResourceName) {
				kept = append(kept, res)
			} else {
				denied = append(denied, res)
			}
		}
		r.Resources = kept
		return nil, appendTo(denied, func(resp *kmsg.DescribeConfigsResponse, res kmsg.DescribeConfigsRequestResource) {
			e := kmsg.NewDescribeConfigsResponseResource()
			e.ResourceType, e.ResourceName, e.ErrorCode = res.ResourceType, res.ResourceName, configDeniedCode(res.ResourceType)
			resp.Resources = append(resp.Resources, e)
		})
	case *kmsg.AlterConfigsRequest:
		var denied []kmsg.AlterConfigsRequestResource
		kept := r.Resources[:0]
		for _, res := range r.Resources {
			if configAllowed(rc, opAlterConfigs, res.ResourceType, res.ResourceName) {
				kept = append(kept, res)
			} else {
				denied = append(denied, res)
			}
		}
		r.Resources = kept
		return nil, appendTo(denied, func(resp *kmsg.AlterConfigsResponse, res kmsg.AlterConfigsRequestResource) {
			e := kmsg.NewAlterConfigsResponseResource()
			e.ResourceType, e.ResourceName, e.ErrorCode = res.ResourceType, res.ResourceName, configDeniedCode(res.ResourceType)
			resp.Resources = append(resp.Resources, e)
		})
	case *kmsg.IncrementalAlterConfigsRequest:
		var denied []kmsg.IncrementalAlterConfigsRequestResource
		kept := r.Resources[:0]
		for _, res := range r.Resources {
			if configAllowed(rc, opAlterConfigs, res.ResourceType, res.ResourceName) {
				kept = append(kept, res)
			} else {
				denied = append(denied, res)
			}
		}
		r.Resources = kept
		return nil, appendTo(denied, func(resp *kmsg.IncrementalAlterConfigsResponse, res kmsg.IncrementalAlterConfigsRequestResource) {
			e := kmsg.NewIncrementalAlterConfigsResponseResource()
			e.ResourceType, e.ResourceName, e.ErrorCode = res.ResourceType, res.ResourceName, configDeniedCode(res.ResourceType)
			resp.Resources = append(resp.Resources, e)
		})
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		if r.TransactionalID != nil {
			if !rc.allowed(opWrite, resTxnID, *r.TransactionalID) {
				resp.ErrorCode = txnDenied
				return whole(resp)
			}
			return nil, nil
		}
		z := s.authz.a
		if !z.Authorize(rc.conn.Principal(), rc.conn.ip, opIdempotentWrite, resCluster, acl.ClusterName) &&
			!z.AuthorizeAny(rc.conn.Principal(), rc.conn.ip, opWrite, resTopic) {
			rc.denied(opIdempotentWrite, resCluster, acl.ClusterName)
			resp.ErrorCode = clusterDenied
			return whole(resp)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version >= 4 { // a broker's verification: ClusterAction, as Kafka
			if !rc.allowedCluster(opClusterAction) {
				resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
				resp.ErrorCode = clusterDenied
				return whole(resp)
			}
			return nil, nil
		}
		code := int16(0)
		if !rc.allowed(opWrite, resTxnID, r.TransactionalID) {
			code = txnDenied
		}
		for _, t := range r.Topics {
			if code == 0 && !rc.allowed(opWrite, resTopic, t.Topic) {
				code = topicDenied
			}
		}
		if code != 0 {
			resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			for _, t := range r.Topics {
				et := kmsg.NewAddPartitionsToTxnResponseTopic()
				et.Topic = t.Topic
				for _, p := range t.Partitions {
					ep := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					ep.Partition, ep.ErrorCode = p, code
					et.Partitions = append(et.Partitions, ep)
				}
				resp.Topics = append(resp.Topics, et)
			}
			return whole(resp)
		}
	case *kmsg.AddOffsetsToTxnRequest:
		code := int16(0)
		switch {
		case !rc.allowed(opWrite, resTxnID, r.TransactionalID):
			code = txnDenied
		case !rc.allowed(opRead, resGroup, r.Group):
			code = groupDenied
		}
		if code != 0 {
			resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
			resp.ErrorCode = code
			return whole(resp)
		}
	case *kmsg.EndTxnRequest:
		if !rc.allowed(opWrite, resTxnID, r.TransactionalID) {
			resp := r.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = txnDenied
			return whole(resp)
		}
	case *kmsg.TxnOffsetCommitRequest:
		code := int16(0)
		switch {
		case !rc.allowed(opWrite, resTxnID, r.TransactionalID):
			code = txnDenied
		case !rc.allowed(opRead, resGroup, r.Group):
			code = groupDenied
		}
		if code != 0 {
			resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			for _, t := range r.Topics {
				et := kmsg.NewTxnOffsetCommitResponseTopic()
				et.Topic = t.Topic
				for _, p := range t.Partitions {
					ep := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					ep.Partition, ep.ErrorCode = p.Partition, code
					et.Partitions = append(et.Partitions, ep)
				}
				resp.Topics = append(resp.Topics, et)
			}
			return whole(resp)
		}
	case *kmsg.WriteTxnMarkersRequest:
		if !rc.allowedCluster(opClusterAction) {
			resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
			for _, m := range r.Markers {
				em := kmsg.NewWriteTxnMarkersResponseMarker()
				em.ProducerID = m.ProducerID
				for _, t := range m.Topics {
					et := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
					et.Topic = t.Topic
					for _, p := range t.Partitions {
						ep := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
						ep.Partition, ep.ErrorCode = p, clusterDenied
						et.Partitions = append(et.Partitions, ep)
					}
					em.Topics = append(em.Topics, et)
				}
				resp.Markers = append(resp.Markers, em)
			}
			return whole(resp)
		}
	case *kmsg.DescribeTransactionsRequest:
		var denied []string
		r.TransactionalIDs, denied = splitNames(rc, r.TransactionalIDs, opDescribe, resTxnID)
		return nil, appendTo(denied, func(resp *kmsg.DescribeTransactionsResponse, id string) {
			e := kmsg.NewDescribeTransactionsResponseTransactionState()
			e.TransactionalID, e.ErrorCode, e.ProducerID, e.ProducerEpoch = id, txnDenied, -1, -1
			resp.TransactionStates = append(resp.TransactionStates, e)
		})
	case *kmsg.ListTransactionsRequest:
		return nil, func(rep reply) reply {
			if kr, ok := rep.(kmsgReply); ok {
				if resp, ok := kr.resp.(*kmsg.ListTransactionsResponse); ok {
					kept := resp.TransactionStates[:0]
					for _, t := range resp.TransactionStates {
						if rc.allowedQuiet(opDescribe, resTxnID, t.TransactionalID) {
							kept = append(kept, t)
						}
					}
					resp.TransactionStates = kept
				}
			}
			return rep
		}
	case *kmsg.DescribeProducersRequest:
		var denied []kmsg.DescribeProducersRequestTopic
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			if rc.allowed(opRead, resTopic, t.Topic) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t)
			}
		}
		r.Topics = kept
		return nil, appendTo(denied, func(resp *kmsg.DescribeProducersResponse, t kmsg.DescribeProducersRequestTopic) {
			e := kmsg.NewDescribeProducersResponseTopic()
			e.Topic = t.Topic
			for _, p := range t.Partitions {
				ep := kmsg.NewDescribeProducersResponseTopicPartition()
				ep.Partition, ep.ErrorCode = p, topicDenied
				e.Partitions = append(e.Partitions, ep)
			}
			resp.Topics = append(resp.Topics, e)
		})
	case *kmsg.ElectLeadersRequest, *kmsg.AlterPartitionAssignmentsRequest, *kmsg.AlterUserSCRAMCredentialsRequest:
		if !rc.allowedCluster(opAlter) {
			return clusterDeniedReply(r), nil
		}
	case *kmsg.ListPartitionReassignmentsRequest, *kmsg.DescribeLogDirsRequest, *kmsg.DescribeQuorumRequest, *kmsg.DescribeUserSCRAMCredentialsRequest:
		if !rc.allowedCluster(opDescribe) {
			return clusterDeniedReply(r), nil
		}
	}
	return nil, nil
}

// clusterDeniedReply is the answer of a cluster-level API that was denied:
// its response with the top-level error code CLUSTER_AUTHORIZATION_FAILED
// (every one of these APIs has one).
func clusterDeniedReply(req kmsg.Request) reply {
	resp := req.ResponseKind()
	switch r := resp.(type) {
	case *kmsg.ElectLeadersResponse:
		r.ErrorCode = clusterDenied
	case *kmsg.AlterPartitionAssignmentsResponse:
		r.ErrorCode = clusterDenied
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		for _, d := range req.(*kmsg.AlterUserSCRAMCredentialsRequest).Deletions {
			r.Results = append(r.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: d.Name, ErrorCode: clusterDenied})
		}
		for _, u := range req.(*kmsg.AlterUserSCRAMCredentialsRequest).Upsertions {
			r.Results = append(r.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: u.Name, ErrorCode: clusterDenied})
		}
	case *kmsg.ListPartitionReassignmentsResponse:
		r.ErrorCode = clusterDenied
	case *kmsg.DescribeLogDirsResponse:
		r.ErrorCode = clusterDenied
	case *kmsg.DescribeQuorumResponse:
		r.ErrorCode = clusterDenied
	case *kmsg.DescribeUserSCRAMCredentialsResponse:
		r.ErrorCode = clusterDenied
	}
	return kmsgReply{resp}
}

// splitNames keeps the names op on typ is allowed for; denied are the rest.
func splitNames(rc *requestContext, names []string, op acl.Operation, typ acl.ResourceType) (kept, denied []string) {
	kept = names[:0:0]
	for _, n := range names {
		if rc.allowed(op, typ, n) {
			kept = append(kept, n)
		} else {
			denied = append(denied, n)
		}
	}
	return kept, denied
}

// appendTo returns an after function adding each denied entry to the
// handler's answer of type R (nil when nothing was denied).
func appendTo[R kmsg.Response, E any](denied []E, add func(R, E)) func(reply) reply {
	if len(denied) == 0 {
		return nil
	}
	return func(rep reply) reply {
		if kr, ok := rep.(kmsgReply); ok {
			if resp, ok := kr.resp.(R); ok {
				for _, e := range denied {
					add(resp, e)
				}
			}
		}
		return rep
	}
}

func configAllowed(rc *requestContext, op acl.Operation, typ kmsg.ConfigResourceType, name string) bool {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return rc.allowed(op, resTopic, name)
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return rc.allowedCluster(op)
	}
	return true // the handler refuses other types
}

func configDeniedCode(typ kmsg.ConfigResourceType) int16 {
	if typ == kmsg.ConfigResourceTypeTopic {
		return topicDenied
	}
	return clusterDenied
}

func offsetForLeaderEpochDenied(r *kmsg.OffsetForLeaderEpochRequest, topics []kmsg.OffsetForLeaderEpochRequestTopic, code int16) *kmsg.OffsetForLeaderEpochResponse {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range topics {
		et := kmsg.NewOffsetForLeaderEpochResponseTopic()
		et.Topic = t.Topic
		for _, p := range t.Partitions {
			ep := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			ep.Partition, ep.ErrorCode, ep.LeaderEpoch, ep.EndOffset = p.Partition, code, -1, -1
			et.Partitions = append(et.Partitions, ep)
		}
		resp.Topics = append(resp.Topics, et)
	}
	return resp
}

// authorizeOffsetCommit: READ on the group for the whole request, READ on
// each topic for its partitions.
func authorizeOffsetCommit(rc *requestContext, r *kmsg.OffsetCommitRequest) (reply, func(reply) reply) {
	errTopic := func(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
		et := kmsg.NewOffsetCommitResponseTopic()
		et.Topic = t.Topic
		for _, p := range t.Partitions {
			ep := kmsg.NewOffsetCommitResponseTopicPartition()
			ep.Partition, ep.ErrorCode = p.Partition, code
			et.Partitions = append(et.Partitions, ep)
		}
		return et
	}
	if !rc.allowed(opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			resp.Topics = append(resp.Topics, errTopic(t, groupDenied))
		}
		return kmsgReply{resp}, nil
	}
	var denied []kmsg.OffsetCommitRequestTopic
	kept := r.Topics[:0]
	for _, t := range r.Topics {
		if rc.allowed(opRead, resTopic, t.Topic) {
			kept = append(kept, t)
		} else {
			denied = append(denied, t)
		}
	}
	r.Topics = kept
	return nil, appendTo(denied, func(resp *kmsg.OffsetCommitResponse, t kmsg.OffsetCommitRequestTopic) {
		resp.Topics = append(resp.Topics, errTopic(t, topicDenied))
	})
}

// authorizeOffsetFetch: DESCRIBE on each group asked for; then, in the
// answer, the partitions of topics the principal may not DESCRIBE are
// TOPIC_AUTHORIZATION_FAILED (topics asked for by name) or left out (all
// of a group's topics asked for), as Kafka does.
func authorizeOffsetFetch(rc *requestContext, r *kmsg.OffsetFetchRequest) (reply, func(reply) reply) {
	hideTopics := func(rep reply) reply {
		kr, ok := rep.(kmsgReply)
		if !ok {
			return rep
		}
		resp, ok := kr.resp.(*kmsg.OffsetFetchResponse)
		if !ok {
			return rep
		}
		verdict := map[string]bool{}
		describable := func(topic string) bool {
			ok, seen := verdict[topic]
			if !seen {
				ok = rc.allowed(opDescribe, resTopic, topic)
				verdict[topic] = ok
			}
			return ok
		}
		if r.Version < 8 {
			resp.Topics = filterOffsetTopics(resp.Topics, r.Topics == nil, describable)
			return rep
		}
		asked := map[string]bool{}
		for _, g := range r.Groups {
			asked[g.Group] = g.Topics == nil
		}
		for i := range resp.Groups {
			g := &resp.Groups[i]
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				switch {
				case describable(t.Topic):
					kept = append(kept, t)
				case !asked[g.Group]:
					for j := range t.Partitions {
						t.Partitions[j].ErrorCode, t.Partitions[j].Offset = topicDenied, -1
					}
					kept = append(kept, t)
				}
			}
			g.Topics = kept
		}
		return rep
	}
	if r.Version < 8 {
		if rc.allowed(opDescribe, resGroup, r.Group) {
			return nil, hideTopics
		}
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = groupDenied
		for _, t := range r.Topics {
			et := kmsg.NewOffsetFetchResponseTopic()
			et.Topic = t.Topic
			for _, p := range t.Partitions {
				ep := kmsg.NewOffsetFetchResponseTopicPartition()
				ep.Partition, ep.ErrorCode, ep.Offset = p, groupDenied, -1
				et.Partitions = append(et.Partitions, ep)
			}
			resp.Topics = append(resp.Topics, et)
		}
		return kmsgReply{resp}, nil
	}
	var denied []string
	kept := r.Groups[:0]
	for _, g := range r.Groups {
		if rc.allowed(opDescribe, resGroup, g.Group) {
			kept = append(kept, g)
		} else {
			denied = append(denied, g.Group)
		}
	}
	r.Groups = kept
	addDenied := appendTo(denied, func(resp *kmsg.OffsetFetchResponse, g string) {
		e := kmsg.NewOffsetFetchResponseGroup()
		e.Group, e.ErrorCode = g, groupDenied
		resp.Groups = append(resp.Groups, e)
	})
	return nil, func(rep reply) reply {
		rep = hideTopics(rep)
		if addDenied != nil {
			rep = addDenied(rep)
		}
		return rep
	}
}

// filterOffsetTopics is OffsetFetch v0-7's topic filter: all topics asked
// for (all) leaves the undescribable out, named ones answer them denied.
func filterOffsetTopics(ts []kmsg.OffsetFetchResponseTopic, all bool, describable func(string) bool) []kmsg.OffsetFetchResponseTopic {
	kept := ts[:0]
	for _, t := range ts {
		switch {
		case describable(t.Topic):
			kept = append(kept, t)
		case !all:
			for j := range t.Partitions {
				t.Partitions[j].ErrorCode, t.Partitions[j].Offset = topicDenied, -1
			}
			kept = append(kept, t)
		}
	}
	return kept
}

// authorizeDeleteTopics: DELETE on each topic, named or by id.
func authorizeDeleteTopics(s *Server, rc *requestContext, r *kmsg.DeleteTopicsRequest) (reply, func(reply) reply) {
	var denied []kmsg.DeleteTopicsResponseTopic
	deny := func(name string, id [16]byte) {
		e := kmsg.NewDeleteTopicsResponseTopic()
		n := name
		e.Topic, e.TopicID, e.ErrorCode = &n, id, topicDenied
		denied = append(denied, e)
	}
	if r.Version < 6 {
		kept := r.TopicNames[:0]
		for _, n := range r.TopicNames {
			if rc.allowed(opDelete, resTopic, n) {
				kept = append(kept, n)
			} else {
				deny(n, [16]byte{})
			}
		}
		r.TopicNames = kept
	} else {
		kept := r.Topics[:0]
		for _, t := range r.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			} else if tp, ok := s.topics.byID(t.TopicID); ok {
				name = tp.name
			}
			if name == "" || rc.allowed(opDelete, resTopic, name) {
				kept = append(kept, t)
			} else {
				deny(name, t.TopicID)
			}
		}
		r.Topics = kept
	}
	return nil, appendTo(denied, func(resp *kmsg.DeleteTopicsResponse, e kmsg.DeleteTopicsResponseTopic) {
		resp.Topics = append(resp.Topics, e)
	})
}

// checkTrustedListener refuses a cluster-mode config whose trusted
// inter-broker listener could be the clients' too: with the authorizer on,
// inter.broker.listener.name (or security.inter.broker.protocol) must name
// a listener explicitly and another listener must serve the clients.
func checkTrustedListener(cfg config.Broker) error {
	if !cfg.Security.Authorizer.Enabled() {
		return nil
	}
	if len(cfg.Security.Listeners) < 2 || cfg.Security.InterBrokerListener == "" {
		return fmt.Errorf("server: authorizer.class.name in cluster mode: the inter-broker listener's connections are trusted as the brokers' own, so it must not be the clients' listener; " +
			"add a listener for the clients to listeners and name the brokers' PLAINTEXT one in inter.broker.listener.name")
	}
	return nil
}

// markInterBroker marks cluster mode's replication listener (the
// inter-broker listener, else the first) as trusted.
func markInterBroker(specs []*listener, cfg config.Broker) {
	name := ""
	if ib := cfg.Security.InterBroker(); ib != nil {
		name = ib.Name
	}
	for _, l := range specs {
		if name == "" || l.name == name {
			l.interBroker = true
			return
		}
	}
}

// authorizeFetch marks the partitions the principal may not read: READ on
// the topic, or CLUSTER_ACTION for a replica's fetch.
func authorizeFetch(rc *requestContext, req *kmsg.FetchRequest, targets []fetchTarget) {
	if rc.conn.s.authz == nil || rc.conn.l.interBroker {
		return
	}
	if req.ReplicaID >= 0 {
		if !rc.allowedCluster(opClusterAction) {
			for i := range targets {
				targets[i].denied = true
			}
		}
		return
	}
	verdict := map[string]bool{}
	for i := range targets {
		name := targets[i].topicName
		ok, seen := verdict[name]
		if !seen {
			ok = rc.allowed(opRead, resTopic, name)
			verdict[name] = ok
		}
		targets[i].denied = !ok
	}
}

// createAllowed reports whether the principal may auto-create topic name
// (CREATE on the cluster or on the topic); not counted as a denial.
func createAllowed(rc *requestContext, name string) bool {
	return rc.allowedQuiet(opCreate, resCluster, acl.ClusterName) || rc.allowedQuiet(opCreate, resTopic, name)
}

// authorizeFindCoordinator: DESCRIBE on each group or transactional id
// looked up.
func authorizeFindCoordinator(rc *requestContext, r *kmsg.FindCoordinatorRequest) (reply, func(reply) reply) {
	typ, code := resGroup, groupDenied
	if r.CoordinatorType == 1 {
		typ, code = resTxnID, txnDenied
	}
	if r.Version < 4 {
		if rc.allowed(opDescribe, typ, r.CoordinatorKey) {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
		return kmsgReply{resp}, nil
	}
	var denied []string
	r.CoordinatorKeys, denied = splitNames(rc, r.CoordinatorKeys, opDescribe, typ)
	return nil, appendTo(denied, func(resp *kmsg.FindCoordinatorResponse, k string) {
		e := kmsg.NewFindCoordinatorResponseCoordinator()
		e.Key, e.ErrorCode, e.NodeID, e.Port = k, code, -1, -1
		resp.Coordinators = append(resp.Coordinators, e)
	})
}
