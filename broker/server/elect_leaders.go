package server

// ElectLeaders (key 43), versions 0-2 (KIP-183, KIP-460): served, by any
// broker (Kafka sends it to the controller; here every broker can take it,
// since the election is a request to the controller through ZooKeeper).
//
// PREFERRED (election type 0, and every v0 request): for each named
// partition (all partitions when Topics is null) whose preferred replica
// (the first of its assignment) does not lead, and is live and in the ISR,
// the broker writes Kafka's /admin/preferred_replica_election request
// (cluster.Node.ElectPreferred), waits until the controller took it, then
// until this broker sees the new leader: NONE. A partition already led by
// its preferred replica is ELECTION_NOT_NEEDED (left out of the answer when
// Topics is null, as Kafka does), one whose preferred replica is dead or
// out of the ISR PREFERRED_LEADER_NOT_AVAILABLE, an unknown one
// UNKNOWN_TOPIC_OR_PARTITION; REQUEST_TIMED_OUT when the controller did not
// act within TimeoutMillis (capped at 60 s; the request znode stays, and
// the next controller acts on it, as in Kafka).
//
// UNCLEAN (type 1): a partition with a leader is ELECTION_NOT_NEEDED; one
// without is ELIGIBLE_LEADERS_NOT_AVAILABLE with a message. Deviation:
// sluice does not elect an out-of-sync replica on demand (only through
// unclean.leader.election.enable on the topic). Other types get a top-level
// INVALID_REQUEST.
//
// On a single node every partition is led by its only (preferred) replica:
// ELECTION_NOT_NEEDED. No ACLs: CLUSTER_AUTHORIZATION_FAILED is never sent.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/cluster"
)

const (
	electPreferred = 0
	electUnclean   = 1
	// electMaxWait caps TimeoutMillis.
	electMaxWait = 60 * time.Second
	electPoll    = 50 * time.Millisecond
)

// adminPartition is what the admin APIs need of a partition.
type adminPartition struct {
	leader   int32
	isr      []int32
	replicas []int32
}

// adminPartitions returns every partition of the cluster as this broker
// last saw it (on a single node, its own partitions, led by itself).
func (s *Server) adminPartitions() map[partitionKey]adminPartition {
	out := map[partitionKey]adminPartition{}
	if s.cluster == nil {
		for _, t := range s.topics.list() {
			for p := int32(0); p < t.npart; p++ {
				self := []int32{s.cfg.NodeID}
				out[partitionKey{t.name, p}] = adminPartition{leader: s.cfg.NodeID, isr: self, replicas: self}
			}
		}
		return out
	}
	for _, st := range s.cluster.node.Partitions() {
		out[partitionKey{st.Topic, st.Partition}] = adminPartition{leader: st.Leader, isr: st.ISR, replicas: st.Replicas}
	}
	return out
}

// liveBrokers returns the ids of the live brokers.
func (s *Server) liveBrokers() map[int32]bool {
	live := map[int32]bool{}
	if s.cluster == nil {
		live[s.cfg.NodeID] = true
		return live
	}
	for _, b := range s.cluster.node.Brokers() {
		live[b.ID] = true
	}
	return live
}

func handleElectLeaders(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	etype := req.ElectionType
	if req.Version == 0 {
		etype = electPreferred
	}
	if etype != electPreferred && etype != electUnclean {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return kmsgReply{resp}, nil
	}
	parts := s.adminPartitions()
	all := req.Topics == nil
	var asked []partitionKey
	if all {
		for k := range parts {
			asked = append(asked, k)
		}
		sort.Slice(asked, func(i, j int) bool {
			if asked[i].topic != asked[j].topic {
				return asked[i].topic < asked[j].topic
			}
			return asked[i].partition < asked[j].partition
		})
	} else {
		seen := map[partitionKey]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				k := partitionKey{t.Topic, p}
				if !seen[k] {
					seen[k] = true
					asked = append(asked, k)
				}
			}
		}
	}
	type result struct {
		code int16
		msg  string
	}
	results := make(map[partitionKey]result, len(asked))
	live := s.liveBrokers()
	var elect []cluster.TopicPartition
	for _, k := range asked {
		ap, ok := parts[k]
		switch {
		case !ok:
			results[k] = result{kerr.UnknownTopicOrPartition.Code, "no such partition"}
		case etype == electUnclean && ap.leader >= 0:
			results[k] = result{kerr.ElectionNotNeeded.Code, fmt.Sprintf("broker %d leads", ap.leader)}
		case etype == electUnclean:
			results[k] = result{kerr.EligibleLeadersNotAvailable.Code,
				"the partition is offline; sluice elects an out-of-sync replica only with unclean.leader.election.enable"}
		case len(ap.replicas) == 0:
			results[k] = result{kerr.PreferredLeaderNotAvailable.Code, "the partition has no assignment yet"}
		case ap.leader == ap.replicas[0]:
			results[k] = result{kerr.ElectionNotNeeded.Code, fmt.Sprintf("the preferred replica %d leads", ap.leader)}
		case !live[ap.replicas[0]] || !containsID(ap.isr, ap.replicas[0]):
			results[k] = result{kerr.PreferredLeaderNotAvailable.Code,
				fmt.Sprintf("the preferred replica %d is not live and in the ISR %v", ap.replicas[0], ap.isr)}
		default:
			elect = append(elect, cluster.TopicPartition{Topic: k.topic, Partition: k.partition})
		}
	}
	if len(elect) > 0 && s.cluster != nil { // a single node leaves none to elect
		wait := time.Duration(req.TimeoutMillis) * time.Millisecond
		if wait <= 0 || wait > electMaxWait {
			wait = electMaxWait
		}
		ctx, cancel := context.WithTimeout(rc.ctx, wait)
		err := s.cluster.node.ElectPreferred(ctx, elect)
		pending := map[partitionKey]bool{}
		if err == nil {
			pending = s.waitPreferred(ctx, elect)
		}
		cancel()
		for _, tp := range elect {
			k := partitionKey{tp.Topic, tp.Partition}
			switch {
			case err != nil && ctx.Err() != nil:
				results[k] = result{kerr.RequestTimedOut.Code, "the controller did not take the election request in time: " + err.Error()}
			case err != nil:
				results[k] = result{kerr.PreferredLeaderNotAvailable.Code, err.Error()}
			case pending[k]:
				results[k] = result{kerr.RequestTimedOut.Code, "the controller took the request but the preferred replica does not lead yet"}
			default:
				results[k] = result{}
			}
		}
		rc.logger.Info("preferred leader election", "partitions", len(elect), "not_moved", len(pending), "err", err)
	}
	byTopic := map[string]int{}
	for _, k := range asked {
		r := results[k]
		if all && r.code == kerr.ElectionNotNeeded.Code {
			continue
		}
		i, ok := byTopic[k.topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[k.topic] = i
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = k.topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = k.partition
		rp.ErrorCode = r.code
		if r.code != 0 {
			msg := r.msg
			rp.ErrorMessage = &msg
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return kmsgReply{resp}, nil
}

// waitPreferred waits until this broker sees each partition led by its
// preferred replica (the controller wrote the states before it removed
// the request; the watch may lag).
// It returns the partitions still not moved when ctx ends.
func (s *Server) waitPreferred(ctx context.Context, tps []cluster.TopicPartition) map[partitionKey]bool {
	for {
		parts := s.adminPartitions()
		pending := map[partitionKey]bool{}
		for _, tp := range tps {
			k := partitionKey{tp.Topic, tp.Partition}
			ap, ok := parts[k]
			if !ok || len(ap.replicas) == 0 || ap.leader != ap.replicas[0] {
				pending[k] = true
			}
		}
		if len(pending) == 0 {
			return pending
		}
		select {
		case <-ctx.Done():
			return pending
		case <-time.After(electPoll):
		}
	}
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
