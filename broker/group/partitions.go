package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// Cluster mode: a broker coordinates the groups of the offsets partitions
// it leads (Options.Clustered). The server tells the coordinator when it
// becomes the leader of a partition (LoadPartition: the partition's
// groups and offsets are replayed from the log) and when it stops being
// one (DropPartition: they are forgotten, and requests waiting on them
// are answered NOT_COORDINATOR so their clients look the coordinator up
// again). The server answers NOT_COORDINATOR for a group of a partition
// it has not loaded, before calling the coordinator.

// PartitionFor returns the partition of OffsetsTopic (of partitions) that
// holds a group: Kafka's abs(hashCode(group)) % partitions.
func PartitionFor(group string, partitions int32) int32 { return partitionFor(group, partitions) }

// LoadPartition replays partition p of OffsetsTopic into the groups (this
// broker now leads it), knowing the topic has partitions partitions.
func (c *Coordinator) LoadPartition(p, partitions int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions == 0 {
		c.partitions = partitions
	}
	c.dropLocked(p) // what an earlier leadership left is stale
	if err := c.load(p); err != nil {
		return err
	}
	now := c.clock.Now()
	for _, g := range c.sortedGroups() {
		if partitionFor(g.id, c.partitions) == p {
			c.reschedule(g, now)
		}
	}
	return nil
}

// DropPartition forgets the groups of partition p of OffsetsTopic (this
// broker no longer leads it); their waiting requests get NOT_COORDINATOR.
func (c *Coordinator) DropPartition(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(p)
}

func (c *Coordinator) dropLocked(p int32) {
	c.loads[p]++
	if c.partitions == 0 {
		return
	}
	for _, g := range c.sortedGroups() {
		if partitionFor(g.id, c.partitions) != p {
			continue
		}
		for _, m := range g.members {
			g.removeMember(m, kerr.NotCoordinator.Code)
		}
		c.forget(g)
	}
}
