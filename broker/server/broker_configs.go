package server

// Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on a
// broker resource): the replication throttles only,
// leader.replication.throttled.rate and follower.replication.throttled.rate
// in bytes/s (KIP-73; unset = unlimited), as kafka-reassign-partitions
// --throttle and `sluice topics reassign --throttle` set them. In cluster
// mode they are kept in ZooKeeper at /config/brokers/<id> (Kafka's node)
// and applied to the replica Manager at once and at each start. Admin
// clients send a broker resource to the broker it names; another broker's
// id, the cluster default ("") and any other property are INVALID_REQUEST,
// as is a throttle on a single node (nothing replicates). Deleting a config
// that is not set answers NONE, as Kafka does (kafka-reassign-partitions
// --verify deletes the throttles so).

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The dynamic broker configs sluice serves.
const (
	leaderThrottleRate   = "leader.replication.throttled.rate"
	followerThrottleRate = "follower.replication.throttled.rate"
)

// alterBrokerConfigs applies set (nil value: delete) to broker resource
// name. replace (AlterConfigs) also deletes the throttles set leaves out.
func (s *Server) alterBrokerConfigs(name string, set map[string]*string, replace, validateOnly bool) (int16, string) {
	set = maps.Clone(set)
	if replace {
		for _, k := range []string{leaderThrottleRate, followerThrottleRate} {
			if _, ok := set[k]; !ok {
				set[k] = nil
			}
		}
	}
	onlyDeletes := true
	for k, v := range set {
		if v == nil {
			continue
		}
		onlyDeletes = false
		if k != leaderThrottleRate && k != followerThrottleRate {
			return kerr.InvalidRequest.Code, fmt.Sprintf("broker config %s cannot be altered: sluice's dynamic broker configs are %s and %s; set other broker properties in the --config file and restart",
				k, leaderThrottleRate, followerThrottleRate)
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(*v), 10, 64); err != nil || n < 0 {
			return kerr.InvalidConfig.Code, fmt.Sprintf("broker config %s: %q is not a rate in bytes/s (an integer >= 0)", k, *v)
		}
	}
	if s.cluster == nil {
		if onlyDeletes {
			return 0, ""
		}
		return kerr.InvalidRequest.Code, "replication throttles apply to a cluster (sluice broker --zookeeper); this broker is a single node"
	}
	if id := strconv.Itoa(int(s.cluster.self)); name != id {
		if onlyDeletes && name == "" {
			return 0, "" // nothing is ever set as the cluster default
		}
		return kerr.InvalidRequest.Code, fmt.Sprintf("broker resource %q: this is broker %s, and it alters only its own configs (the cluster default \"\" is not served)", name, id)
	}
	for k := range set {
		if k != leaderThrottleRate && k != followerThrottleRate {
			delete(set, k) // a delete of a config that is never set: nothing to do
		}
	}
	if validateOnly || len(set) == 0 {
		return 0, ""
	}
	cfg, err := s.cluster.node.UpdateBrokerConfig(set)
	if err != nil {
		return kerr.KafkaStorageError.Code, "write the broker's dynamic configs: " + err.Error()
	}
	s.applyBrokerConfig(cfg)
	return 0, ""
}

// applyBrokerConfig hands the replica Manager the throttle rates of the
// broker's dynamic configs.
func (s *Server) applyBrokerConfig(cfg map[string]string) {
	rate := func(k string) int64 {
		v, ok := cfg[k]
		if !ok {
			return -1
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			s.logger.Warn("ignoring an invalid dynamic broker config", "config", k, "value", v)
			return -1
		}
		return n
	}
	leader, follower := rate(leaderThrottleRate), rate(followerThrottleRate)
	if s.replicas != nil {
		s.replicas.SetThrottleRates(leader, follower)
	}
	s.logger.Info("replication throttles", leaderThrottleRate, leader, followerThrottleRate, follower)
}
