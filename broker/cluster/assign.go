package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// assignReplicas spreads partitions [first, first+count) of a topic over
// brokers with replicationFactor replicas each, preferred leader first, the
// way Kafka's AdminUtils.assignReplicasToBrokers does: leaders round-robin
// from a random start, followers at a shift that grows every len(brokers)
// partitions, so leaders and replica pairs are spread evenly. When every
// broker has a rack, the brokers are first ordered alternating between racks
// and a follower is placed on a rack holding no replica of the partition
// yet, while such a rack exists. rnd picks the start and the shift.
func assignReplicas(brokers []BrokerInfo, first, count int32, replicationFactor int, rnd *rand.Rand) ([][]int32, error) {
	n := len(brokers)
	if replicationFactor < 1 {
		return nil, fmt.Errorf("%w: replication factor %d: must be at least 1", ErrInvalid, replicationFactor)
	}
	if replicationFactor > n {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the %d live brokers", ErrInvalid, replicationFactor, n)
	}
	if count < 0 || first < 0 {
		return nil, fmt.Errorf("%w: partitions %d from %d", ErrInvalid, count, first)
	}
	sorted := slices.Clone(brokers)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	racks := map[int32]string{}
	rackAware := true
	for _, b := range sorted {
		racks[b.ID] = b.Rack
		rackAware = rackAware && b.Rack != ""
	}
	arranged := make([]int32, 0, n)
	numRacks := 1
	if rackAware {
		arranged, numRacks = rackAlternated(sorted)
	} else {
		for _, b := range sorted {
			arranged = append(arranged, b.ID)
		}
	}
	start, shift := rnd.IntN(n), rnd.IntN(n)
	out := make([][]int32, 0, count)
	for p := first; p < first+count; p++ {
		if p > 0 && int(p)%n == 0 {
			shift++
		}
		lead := (int(p) + start) % n
		replicas := []int32{arranged[lead]}
		usedRacks := map[string]bool{racks[arranged[lead]]: true}
		for k := 0; len(replicas) < replicationFactor; k++ {
			b := arranged[replicaIndex(lead, shift*numRacks, k, n)]
			rackFree := !rackAware || !usedRacks[racks[b]] || len(usedRacks) == numRacks
			if rackFree && !slices.Contains(replicas, b) {
				replicas = append(replicas, b)
				usedRacks[racks[b]] = true
			}
			if k > 2*n*n { // every broker was tried: cannot happen with rf <= n
				return nil, fmt.Errorf("%w: cannot place %d replicas on %d brokers", ErrInvalid, replicationFactor, n)
			}
		}
		out = append(out, replicas)
	}
	return out, nil
}

// replicaIndex is the broker index of the k-th follower of a partition led
// by the broker at index lead.
func replicaIndex(lead, shift, k, n int) int {
	if n == 1 {
		return 0
	}
	return (lead + 1 + (shift+k)%(n-1)) % n
}

// rackAlternated orders broker ids one rack after another: the first
// broker of each rack (racks sorted by name), then the second of each...
func rackAlternated(sorted []BrokerInfo) ([]int32, int) {
	byRack := map[string][]int32{}
	var names []string
	for _, b := range sorted {
		if _, ok := byRack[b.Rack]; !ok {
			names = append(names, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	sort.Strings(names)
	var out []int32
	for i := 0; len(out) < len(sorted); i++ {
		for _, r := range names {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out, len(names)
}
