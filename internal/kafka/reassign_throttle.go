package kafka

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The configs a throttled reassignment sets, Kafka's (KIP-73): the rates on
// every broker a move touches, the replica lists on each moving topic.
const (
	leaderThrottleRate       = "leader.replication.throttled.rate"
	followerThrottleRate     = "follower.replication.throttled.rate"
	leaderThrottledReplicas  = "leader.replication.throttled.replicas"
	followerThrottledReplica = "follower.replication.throttled.replicas"
)

// ThrottleReassign throttles the replication of moves to rate bytes/s as
// kafka-reassign-partitions --throttle does: each moving partition's
// current replicas (any may lead) in its topic's
// leader.replication.throttled.replicas, the replicas it gains in
// follower.replication.throttled.replicas, and both rates on every broker
// of the current and target replicas. Run it before Reassign;
// ClearReassignThrottle undoes it.
func (a *Admin) ThrottleReassign(ctx context.Context, moves []Move, rate int64, w io.Writer) error {
	if rate < 0 {
		return fmt.Errorf("kafka: --throttle %d: a rate in bytes/s must be at least 0", rate)
	}
	var topics []string
	for _, m := range moves {
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: throttle: %w", err)
	}
	leaders, followers := map[string][]string{}, map[string][]string{}
	brokers := map[int32]bool{}
	for _, m := range moves {
		p, ok := md.Topics[m.Topic].Partitions[m.Partition]
		if !ok {
			return fmt.Errorf("kafka: throttle: topic %q has no partition %d", m.Topic, m.Partition)
		}
		for _, b := range p.Replicas {
			leaders[m.Topic] = append(leaders[m.Topic], fmt.Sprintf("%d:%d", m.Partition, b))
			brokers[b] = true
		}
		for _, b := range m.Replicas {
			if !slices.Contains(p.Replicas, b) {
				followers[m.Topic] = append(followers[m.Topic], fmt.Sprintf("%d:%d", m.Partition, b))
			}
			brokers[b] = true
		}
	}
	for _, t := range topics {
		cfgs := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: leaderThrottledReplicas, Value: ptr(strings.Join(leaders[t], ","))}}
		if len(followers[t]) > 0 {
			cfgs = append(cfgs, kadm.AlterConfig{Op: kadm.SetConfig, Name: followerThrottledReplica, Value: ptr(strings.Join(followers[t], ","))})
		}
		if err := alterErr(a.adm.AlterTopicConfigs(ctx, cfgs, t)); err != nil {
			return fmt.Errorf("kafka: throttle topic %s: %w", t, err)
		}
	}
	ids := sortedIDs(brokers)
	r := strconv.FormatInt(rate, 10)
	cfgs := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: leaderThrottleRate, Value: &r}, {Op: kadm.SetConfig, Name: followerThrottleRate, Value: &r}}
	if err := alterErr(a.adm.AlterBrokerConfigs(ctx, cfgs, ids...)); err != nil {
		return fmt.Errorf("kafka: throttle brokers %v: %w", ids, err)
	}
	fmt.Fprintf(w, "replication throttled to %d B/s on brokers %v for the moving replicas\n", rate, ids)
	return nil
}

// ClearReassignThrottle removes what ThrottleReassign set: the replica lists
// of the moves' topics and the rates of every live broker (as
// kafka-reassign-partitions --verify does once the moves completed).
func (a *Admin) ClearReassignThrottle(ctx context.Context, moves []Move, w io.Writer) error {
	var topics []string
	for _, m := range moves {
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	del := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderThrottledReplicas}, {Op: kadm.DeleteConfig, Name: followerThrottledReplica}}
	for _, t := range topics {
		if err := alterErr(a.adm.AlterTopicConfigs(ctx, del, t)); err != nil {
			return fmt.Errorf("kafka: clear the throttle of topic %s: %w", t, err)
		}
	}
	bs, err := a.adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("kafka: clear the throttle: %w", err)
	}
	ids := bs.NodeIDs()
	del = []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderThrottleRate}, {Op: kadm.DeleteConfig, Name: followerThrottleRate}}
	if err := alterErr(a.adm.AlterBrokerConfigs(ctx, del, ids...)); err != nil {
		return fmt.Errorf("kafka: clear the throttle of brokers %v: %w", ids, err)
	}
	fmt.Fprintf(w, "replication throttle removed (topics %v, brokers %v)\n", topics, ids)
	return nil
}

func alterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %w %s", r.Name, r.Err, r.ErrMessage)
		}
	}
	return nil
}

func sortedIDs(set map[int32]bool) []int32 {
	out := make([]int32, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func ptr(s string) *string { return &s }
