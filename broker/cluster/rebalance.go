package cluster

// The automatic preferred-leader rebalance (auto.leader.rebalance.enable),
// as Kafka's controller runs it: every leader.imbalance.check.interval
// the controller groups the partitions by their preferred replica (the
// first of the assignment); a broker's imbalance is the share of its
// group led by another broker (or by none). When that share is above
// leader.imbalance.per.broker.percentage, each partition of the group is
// given back to it where decide allows a preferred election: the
// preferred replica live, not shutting down, in the ISR, and the
// partition not moving. A broker at or under the threshold keeps its
// partitions where they are, so a cluster is not reshuffled for one
// partition out of place among many.

// imbalanced reads the state of every partition of topics and returns the
// partitions the rebalance should give back to their preferred replica.
func (c *controller) imbalanced(topics []topicAssignment) (map[partitionKey]bool, error) {
	var states []PartitionState
	for _, a := range topics {
		for p := range a.Replicas {
			st, ok, err := readState(c.s, a, int32(p))
			if err != nil {
				return nil, err
			}
			if ok {
				states = append(states, st)
			}
		}
	}
	out, ratios := imbalance(states, c.n.opts.LeaderImbalancePercentage)
	for b, r := range ratios {
		if r.over {
			c.log.Info("leader imbalance: giving partitions back to their preferred replica",
				"broker", b, "led_elsewhere", r.elsewhere, "preferred", r.preferred, "percentage", c.n.opts.LeaderImbalancePercentage)
		}
	}
	return out, nil
}

// brokerImbalance is one preferred replica's count: of the partitions
// preferring it, how many are led elsewhere, and whether that share is
// over the threshold.
type brokerImbalance struct {
	preferred, elsewhere int
	over                 bool
}

// imbalance groups states by preferred replica and returns the partitions
// of the brokers whose share led elsewhere is above percent (0..100), and
// each broker's count.
func imbalance(states []PartitionState, percent int) (map[partitionKey]bool, map[int32]brokerImbalance) {
	ratios := map[int32]brokerImbalance{}
	for _, st := range states {
		if len(st.Replicas) == 0 {
			continue
		}
		r := ratios[st.Replicas[0]]
		r.preferred++
		if st.Leader != st.Replicas[0] {
			r.elsewhere++
		}
		ratios[st.Replicas[0]] = r
	}
	out := map[partitionKey]bool{}
	for b, r := range ratios {
		// elsewhere/preferred > percent/100, in integers.
		r.over = r.elsewhere > 0 && r.elsewhere*100 > percent*r.preferred
		ratios[b] = r
	}
	for _, st := range states {
		if len(st.Replicas) > 0 && ratios[st.Replicas[0]].over && st.Leader != st.Replicas[0] {
			out[partitionKey{st.Topic, st.Partition}] = true
		}
	}
	return out, ratios
}
