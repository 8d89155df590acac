package server

// Cluster mode (Options.Cluster, `sluice broker --zookeeper`): the server
// serves the topics of the cluster's metadata Store (ZooKeeper) and the
// partition states broker/cluster's Node keeps fresh.
//
//	cluster.Node ──OnStates──► Server.ApplyStates ─┐
//	cluster.Node ──Changed───► clusterLoop ────────┴► reconcile (clusterView.mu):
//	      1. the registry follows the Store: topics, ids, partition counts,
//	         assignments and configs (the Store is read when the Node's
//	         view differs from what was last read, when it saw a topic's
//	         overrides change, and every storeRecheck)
//	      2. the partitions assigned to this broker are opened; those of
//	         deleted topics deleted
//	      3. the states of every partition are published for Metadata and
//	         the leader checks (NOT_LEADER_OR_FOLLOWER)
//	      4. leadership changes reach the group coordinator (its offsets
//	         partitions) and the replica manager
//
// Placement: a topic of the registry lists every partition (npart), but
// holds open only the partitions with a replica here; partition(p) is nil
// for the others. Clients are answered NOT_LEADER_OR_FOLLOWER for a
// partition this broker does not lead, UNKNOWN_TOPIC_OR_PARTITION for one
// the topic does not have.
//
// Concurrency: clusterView.mu serialises reconciles (the Node's OnStates
// goroutine and clusterLoop); it is taken before registry.mu and never
// under it. The published states (clusterView.states) sit behind their own
// RWMutex, a leaf.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/cluster"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/metadata"
)

// schemasTopic is the schema registry's topic (broker/schemaregistry's default).
const schemasTopic = "_schemas"

// storeRecheck is how often the cluster loop rereads the Store even when
// the Node's view shows no change of topics (a topic deleted and created
// again under the same name between two looks, a config changed on
// another broker).
const storeRecheck = 10 * time.Second

// placement is what the registry needs of the cluster: this broker's id,
// the live brokers and an assignment of new partitions (*cluster.Node).
type placement interface {
	ID() int32
	Brokers() []cluster.BrokerInfo
	AssignReplicas(first, count int32, replicationFactor int) ([][]int32, error)
}

// internalReplicas assigns the partitions of an internal topic in cluster
// mode: replication factor internalReplicationFactor, or the live brokers
// if fewer; nil on a single node.
func (r *registry) internalReplicas(partitions int32) ([][]int32, error) {
	if r.placement == nil {
		return nil, nil
	}
	rf := min(internalReplicationFactor, len(r.placement.Brokers()))
	return r.placement.AssignReplicas(0, partitions, max(rf, 1))
}

// isLocal reports whether partition p of a topic assigned as replicas has
// a replica on this broker (always on a single node).
func (r *registry) isLocal(replicas [][]int32, p int32) bool {
	if r.placement == nil {
		return true
	}
	return int(p) < len(replicas) && slices.Contains(replicas[p], r.placement.ID())
}

// clusterView is the server's side of cluster mode.
type clusterView struct {
	node *cluster.Node
	self int32

	mu        sync.Mutex // serialises reconcile; guards the fields below
	lastLoad  time.Time
	configGen int64                 // the Node's ConfigGeneration at the last read of the Store
	loaded    map[string]topicShape // what the Store held at the last read
	leaderOf  map[partitionKey]bool // partitions this broker led at the last reconcile
	stopped   bool                  // Shutdown began: no more reconciles

	statesMu sync.RWMutex // guards states and owned
	states   map[partitionKey]cluster.PartitionState
	owned    map[int32]int32 // offsets partitions whose groups the coordinator loaded -> the leader epoch it loaded in
}

// owns reports whether the group coordinator serves the groups of offsets
// partition p.
func (cv *clusterView) owns(p int32) bool {
	_, ok := cv.ownedEpoch(p)
	return ok
}

// ownedEpoch is the leader epoch the coordinator loaded offsets partition
// p in; ok false when it does not serve p's groups.
func (cv *clusterView) ownedEpoch(p int32) (epoch int32, ok bool) {
	cv.statesMu.RLock()
	defer cv.statesMu.RUnlock()
	epoch, ok = cv.owned[p]
	return epoch, ok
}

func (cv *clusterView) setOwned(p int32, epoch int32, on bool) {
	cv.statesMu.Lock()
	defer cv.statesMu.Unlock()
	if on {
		cv.owned[p] = epoch
	} else {
		delete(cv.owned, p)
	}
}

type partitionKey struct {
	topic     string
	partition int32
}

// topicShape is what decides a topic's placement: its count and assignment.
type topicShape struct {
	id       [16]byte
	replicas [][]int32
}

func newClusterView(node *cluster.Node) *clusterView {
	return &clusterView{node: node, self: node.ID(), loaded: map[string]topicShape{}, leaderOf: map[partitionKey]bool{},
		states: map[partitionKey]cluster.PartitionState{}, owned: map[int32]int32{}}
}

// state returns a partition's state as last seen.
func (cv *clusterView) state(topic string, p int32) (cluster.PartitionState, bool) {
	cv.statesMu.RLock()
	defer cv.statesMu.RUnlock()
	st, ok := cv.states[partitionKey{topic, p}]
	return st, ok
}

// ApplyStates is the cluster.Node's OnStates hook: the states of this
// broker's partitions changed. It reconciles at once, so the partitions
// are open (and their roles known) when it returns. Before the server is
// serving and after Shutdown it does nothing (the cluster loop catches up).
func (s *Server) ApplyStates(states []cluster.PartitionState) {
	if s.cluster == nil || s.ctx.Err() != nil {
		return
	}
	s.reconcile()
}

// clusterLoop reconciles whenever the Node sees a change, until Shutdown.
func (s *Server) clusterLoop() {
	defer s.retentionWG.Done()
	for {
		changed := s.cluster.node.Changed()
		s.reconcile()
		t := time.NewTimer(time.Second) // a failed open or a busy topic is retried
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// reconcile brings the registry and the published states in line with the
// cluster (see the file comment).
func (s *Server) reconcile() {
	cv := s.cluster
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.stopped {
		return
	}
	view := cv.node.Partitions()
	states := make(map[partitionKey]cluster.PartitionState, len(view))
	shapes := map[string][][]int32{}
	for _, st := range view {
		states[partitionKey{st.Topic, st.Partition}] = st
		shapes[st.Topic] = append(shapes[st.Topic], st.Replicas)
	}
	cv.statesMu.Lock()
	cv.states = states
	cv.statesMu.Unlock()

	if gen := cv.node.ConfigGeneration(); s.storeStale(shapes) || gen != cv.configGen {
		topics, _, err := s.opts.Metadata.Load()
		if err != nil {
			s.logger.Warn("cluster: reading the topics; retrying", "err", err)
		} else {
			s.followStore(topics)
			cv.lastLoad, cv.configGen = time.Now(), gen
		}
	}
	s.openAssigned()
	s.followLeadership(states)
	s.applyReplicas(states)
	s.dropUnassigned(states)
	s.followGroups(s.cluster.leaderOf)
}

// dropUnassigned deletes the local replicas that a finished (or cancelled)
// replica move took off this broker, as Kafka's StopReplica with delete:
// the Store's assignment and the partition's state both leave this broker
// out, and the replica Manager no longer replicates it.
func (s *Server) dropUnassigned(states map[partitionKey]cluster.PartitionState) {
	r, cv := s.topics, s.cluster
	for _, t := range r.list() {
		var drop []*partition
		for _, p := range t.parts {
			k := partitionKey{t.name, p.tp.Partition}
			st, ok := states[k]
			if r.isLocal(t.replicas, k.partition) || !ok || slices.Contains(st.Replicas, cv.self) ||
				(s.replicas != nil && s.replicas.Holds(k.topic, k.partition)) {
				continue
			}
			drop = append(drop, p)
		}
		if len(drop) == 0 {
			continue
		}
		r.mu.Lock()
		busy, still := r.busy[t.name], r.topics[t.name] == t
		if busy || !still {
			r.mu.Unlock()
			continue
		}
		nt := *t
		nt.parts = slices.DeleteFunc(slices.Clone(t.parts), func(p *partition) bool { return slices.Contains(drop, p) })
		r.topics[t.name] = &nt
		r.mu.Unlock()
		tps := make([]plog.TopicPartition, len(drop))
		for i, p := range drop {
			tps[i] = p.tp
		}
		if err := r.mgr.DeleteMany(tps); err != nil {
			s.logger.Error("cluster: delete the replicas moved off this broker", "topic", t.name, "err", err)
		} else {
			s.logger.Info("cluster: deleted the replicas moved off this broker", "topic", t.name, "partitions", len(tps))
		}
	}
}

// storeStale reports whether the Node's view of topics differs from what
// the Store held at the last read (or storeRecheck has passed).
func (s *Server) storeStale(shapes map[string][][]int32) bool {
	cv := s.cluster
	if time.Since(cv.lastLoad) >= storeRecheck || len(shapes) != len(cv.loaded) {
		return true
	}
	for name, replicas := range shapes {
		have, ok := cv.loaded[name]
		if !ok || !slices.EqualFunc(have.replicas, replicas, slices.Equal[[]int32]) {
			return true
		}
	}
	return false
}

// followStore makes the registry list exactly the Store's topics: new ones
// are published (no partition open yet), grown or reassigned ones replaced,
// deleted ones (or ones recreated under a new id) have their local
// partitions deleted. Topics being created or deleted by a request of this
// broker are left to it.
func (s *Server) followStore(topics []metadata.Topic) {
	r, cv := s.topics, s.cluster
	loaded := make(map[string]topicShape, len(topics))
	for _, mt := range topics {
		loaded[mt.Name] = topicShape{id: mt.ID, replicas: mt.Replicas}
		r.mu.Lock()
		cur, ok := r.topics[mt.Name]
		busy := r.busy[mt.Name]
		r.mu.Unlock()
		switch {
		case busy:
			continue
		case ok && cur.id != mt.ID:
			s.logger.Info("cluster: topic recreated under a new id; deleting the old partitions here", "topic", mt.Name)
			r.forget(cur)
			cur, ok = nil, false
		}
		nt := &topic{name: mt.Name, id: mt.ID, overrides: mt.Configs, cfg: r.broker.ResolveTopic(mt.Configs),
			npart: mt.Partitions, replicas: mt.Replicas}
		if ok {
			if cur.npart == nt.npart && slices.EqualFunc(cur.replicas, nt.replicas, slices.Equal[[]int32]) && maps.Equal(cur.overrides, nt.overrides) {
				continue
			}
			nt.parts = cur.parts
			if !maps.Equal(cur.overrides, nt.overrides) {
				lc := logConfig(nt.cfg)
				lc.ProducerIDExpiration = producerIDExpiration(r.broker)
				for _, p := range nt.parts {
					if err := p.log.SetConfig(lc); err != nil {
						s.logger.Warn("cluster: apply topic configs", "topic", nt.name, "err", err)
					}
				}
			}
		}
		r.publishIf(cur, nt)
	}
	for _, t := range r.list() {
		if _, ok := loaded[t.name]; !ok {
			r.mu.Lock()
			busy, still := r.busy[t.name], r.topics[t.name] == t
			r.mu.Unlock()
			if !busy && still {
				s.logger.Info("cluster: topic deleted; deleting its partitions here", "topic", t.name)
				r.forget(t)
			}
		}
	}
	cv.loaded = loaded
}

// openAssigned opens the partitions assigned to this broker that are not
// open yet.
func (s *Server) openAssigned() {
	r := s.topics
	for _, t := range r.list() {
		var want []plog.TopicPartition
		for p := range t.npart {
			if t.partition(p) == nil && r.isLocal(t.replicas, p) {
				want = append(want, plog.TopicPartition{Topic: t.name, Partition: p})
			}
		}
		if len(want) == 0 {
			continue
		}
		r.mu.Lock()
		busy, still := r.busy[t.name], r.topics[t.name] == t
		if !busy && still {
			r.busy[t.name] = true
		}
		r.mu.Unlock()
		if busy || !still {
			continue
		}
		lc := logConfig(t.cfg)
		lc.ProducerIDExpiration = producerIDExpiration(r.broker)
		logs, err := r.mgr.OpenMany(want, lc)
		nt := *t
		nt.parts = slices.Clone(t.parts)
		for i, l := range logs {
			if l != nil {
				nt.parts = append(nt.parts, &partition{tp: want[i], log: l})
			}
		}
		slices.SortFunc(nt.parts, func(a, b *partition) int { return int(a.tp.Partition - b.tp.Partition) })
		r.mu.Lock()
		r.topics[t.name] = &nt
		delete(r.busy, t.name)
		r.mu.Unlock()
		if err != nil {
			s.logger.Error("cluster: open assigned partitions; retrying", "topic", t.name, "err", err)
		} else {
			s.logger.Info("cluster: opened replicas", "topic", t.name, "partitions", len(want))
		}
	}
}

// followLeadership acts on the partitions whose leadership here began or
// ended: the group coordinator loads or drops its offsets partitions.
// While no replica manager runs, a partition this broker leads with an ISR
// of itself alone has everything in its log committed (acks need no one
// else), as on a single node.
func (s *Server) followLeadership(states map[partitionKey]cluster.PartitionState) {
	cv := s.cluster
	leads := map[partitionKey]bool{}
	for k, st := range states {
		if st.Leader != cv.self {
			continue
		}
		leads[k] = true
		t, ok := s.topics.get(k.topic)
		if !ok {
			continue
		}
		p := t.partition(k.partition)
		if p == nil {
			continue
		}
		if s.replicas == nil && len(st.ISR) == 1 && st.ISR[0] == cv.self {
			p.mu.Lock()
			if leo := p.log.LogEndOffset(); leo > p.log.HighWatermark() {
				if err := p.log.SetHighWatermark(leo); err != nil {
					s.logger.Warn("cluster: set high watermark", "partition", p.tp.String(), "err", err)
				}
			}
			p.mu.Unlock()
		}
	}
	cv.leaderOf = leads
}

// leaderPartition returns partition p of t for a client request (Produce,
// Fetch from a consumer, ListOffsets, DeleteRecords): nil and
// UNKNOWN_TOPIC_OR_PARTITION when the topic has no such partition, nil and
// NOT_LEADER_OR_FOLLOWER in cluster mode when this broker does not lead it.
func (s *Server) leaderPartition(t *topic, p int32) (*partition, int16) {
	if t == nil || !t.hasPartition(p) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	part := t.partition(p)
	if s.cluster != nil {
		st, ok := s.cluster.state(t.name, p)
		if !ok || st.Leader != s.cluster.self || part == nil {
			return nil, kerr.NotLeaderForPartition.Code
		}
	}
	if part == nil {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	return part, 0
}

// stopCluster waits for a reconcile in progress and stops later ones
// (Shutdown, before the logs close).
func (s *Server) stopCluster() {
	if s.cluster == nil {
		return
	}
	s.cluster.mu.Lock()
	s.cluster.stopped = true
	s.cluster.mu.Unlock()
}

// leaderEpoch is partition p's current leader epoch as this broker last saw
// it: the partition state's in cluster mode, 0 on a single node.
func (s *Server) leaderEpoch(t *topic, p int32) int32 {
	if s.cluster == nil {
		return 0
	}
	st, _ := s.cluster.state(t.name, p)
	return st.LeaderEpoch
}

// leaderEpochCode checks a request's current leader epoch of a partition
// (-1: not given) against the partition's: FENCED_LEADER_EPOCH when older,
// UNKNOWN_LEADER_EPOCH when newer (the client knows of an election this
// broker has not seen yet), 0 when equal. A single node's epoch is 0.
func (s *Server) leaderEpochCode(t *topic, p int32, current int32) int16 {
	if current < 0 {
		return 0
	}
	switch epoch := s.leaderEpoch(t, p); {
	case current < epoch:
		return kerr.FencedLeaderEpoch.Code
	case current > epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// checkAssignment checks a manual replica assignment (cluster mode): each
// partition lists the same number of distinct live brokers. It returns ""
// or what is wrong.
func (s *Server) checkAssignment(replicas [][]int32) string {
	live := map[int32]bool{}
	for _, b := range s.cluster.node.Brokers() {
		live[b.ID] = true
	}
	for p, list := range replicas {
		switch {
		case len(list) == 0:
			return fmt.Sprintf("partition %d has no replica", p)
		case len(list) != len(replicas[0]):
			return fmt.Sprintf("partition %d has %d replicas, partition 0 has %d", p, len(list), len(replicas[0]))
		}
		for i, b := range list {
			if slices.Contains(list[:i], b) {
				return fmt.Sprintf("partition %d lists broker %d twice", p, b)
			}
			if !live[b] {
				return fmt.Sprintf("partition %d: broker %d is not a live broker of the cluster", p, b)
			}
		}
	}
	return ""
}

// assignNew assigns partitions [first, first+count) of a new topic with
// replication factor rf over the live brokers (cluster mode). rf -1 is
// default.replication.factor, except for the schema registry's topic
// (_schemas), which like __consumer_offsets gets internalReplicationFactor
// (or the live brokers if fewer): the registry asks for -1 so that it works
// against a single node too.
func (s *Server) assignNew(topic string, first, count int32, rf int16) ([][]int32, int16, string) {
	if rf == -1 {
		rf = s.cfg.DefaultReplicationFactor
		if topic == schemasTopic {
			rf = int16(max(1, min(internalReplicationFactor, len(s.cluster.node.Brokers()))))
		}
	}
	if rf < 1 {
		return nil, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor %d: must be at least 1 (or -1 for default.replication.factor)", rf)
	}
	if count < 1 || count > metadata.MaxPartitions {
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d out of range 1..%d", count, metadata.MaxPartitions)
	}
	replicas, err := s.cluster.node.AssignReplicas(first, count, int(rf))
	if err != nil {
		if errors.Is(err, cluster.ErrInvalid) {
			return nil, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("topic %q: %v", topic, err)
		}
		return nil, kerr.KafkaStorageError.Code, fmt.Sprintf("topic %q: %v", topic, err)
	}
	return replicas, 0, ""
}

// forget removes a topic from the registry and deletes its local
// partitions (the cluster deleted it; the Store is not written).
func (r *registry) forget(t *topic) {
	r.mu.Lock()
	if r.topics[t.name] == t {
		delete(r.topics, t.name)
	}
	r.mu.Unlock()
	tps := make([]plog.TopicPartition, len(t.parts))
	for i, p := range t.parts {
		tps[i] = p.tp
	}
	if err := r.mgr.DeleteMany(tps); err != nil {
		r.logger.Error("delete partitions", "topic", t.name, "err", err)
	}
	r.metrics.forgetTopic(t.name)
}

// publishIf replaces cur (nil: absent) by nt unless the registry moved on
// meanwhile (another replacement, or a request reserved the name).
func (r *registry) publishIf(cur, nt *topic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[nt.name] || r.topics[nt.name] != cur {
		return
	}
	r.topics[nt.name] = nt
}

// controlledShutdown asks the controller to move this broker's
// leaderships away (cluster mode; nothing on a single node).
func (s *Server) controlledShutdown(ctx context.Context) error {
	if s.cluster == nil {
		return nil
	}
	return s.cluster.node.ControlledShutdown(ctx)
}
