package group

import (
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/internal/recbatch"
)

// CommitOffsets serves OffsetCommit. A commit with generation -1 and no
// member id is a "simple" commit (standalone consumers, admin tools), only
// accepted while the group has no members.
//
// The phases: check who commits (committerLocked), check each partition
// (acceptCommits), bound and store the records (storeCommits), apply the
// stored offsets (applyCommits); every entry of the request gets an answer.
func (c *Coordinator) CommitOffsets(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	ans := newCommitAnswer(req)
	defer ans.fill(req, resp)
	if req.Group == "" {
		ans.all(kerr.InvalidGroupID.Code)
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	staged, isStaged := c.opts.Storage.(StagedStorage)
	if c.opts.Clustered && isStaged {
		c.commitStaged(req, ans, staged)
		return resp
	}
	now := c.clock.Now()
	g, code := c.committerLocked(req, now)
	if code != 0 {
		ans.all(code)
		return resp
	}
	ok, recs := c.acceptCommits(req, ans, now)
	if code := c.storeCommits(g, req.Group, ok, recs); code != 0 {
		ans.refuse(ok, code)
		return resp
	}
	c.applyCommits(g, req.Group, ok, now)
	return resp
}

// commitStaged is CommitOffsets over a StagedStorage (c.mu held on entry
// and exit, released while the append commits): the checks and the append
// as above, then the wait without the lock, then the stored offsets
// applied — unless the group's offsets partition was dropped or loaded
// again meanwhile (NOT_COORDINATOR: the records are in the log the next
// coordinator loads). One staged commit per group at a time keeps a
// group's commits applied in the order of their records.
func (c *Coordinator) commitStaged(req *kmsg.OffsetCommitRequest, ans *commitAnswer, st StagedStorage) {
	for {
		busy := c.committing[req.Group]
		if busy == nil {
			break
		}
		c.mu.Unlock()
		<-busy
		c.mu.Lock()
	}
	now := c.clock.Now()
	g, code := c.committerLocked(req, now)
	if code != 0 {
		ans.all(code)
		return
	}
	ok, recs := c.acceptCommits(req, ans, now)
	if len(ok) == 0 {
		return
	}
	if grow := c.commitGrowth(g, req.Group, ok); grow > 0 && c.mem.used+grow > c.opts.MaxCoordinatorBytes {
		c.logger.Warn("offset commit refused: the coordinator holds group.coordinator.max.bytes; the client gets INVALID_COMMIT_OFFSET_SIZE",
			"group", req.Group, "partitions", len(ok), "need", c.mem.used+grow, "limit", c.opts.MaxCoordinatorBytes)
		ans.refuse(ok, kerr.InvalidCommitOffsetSize.Code)
		return
	}
	if err := c.ensurePartitions(); err != nil {
		c.logger.Error("store offsets", "group", req.Group, "err", err)
		ans.refuse(ok, kerr.CoordinatorNotAvailable.Code)
		return
	}
	p := partitionFor(req.Group, c.partitions)
	batch := recbatch.Encode(toBatchRecords(recs), now.UnixMilli(), recbatch.NoProducer)
	if limit := c.opts.Storage.MaxBatchBytes(); limit > 0 && len(batch) > limit {
		c.logger.Warn("offset commit refused: its records do not fit one batch of the offsets topic; the client gets INVALID_COMMIT_OFFSET_SIZE",
			"group", req.Group, "partitions", len(ok), "bytes", len(batch), "limit", limit)
		ans.refuse(ok, kerr.InvalidCommitOffsetSize.Code)
		return
	}
	wait, err := st.AppendStaged(p, batch)
	if err == nil && wait != nil {
		done := make(chan struct{})
		c.committing[req.Group] = done
		loads := c.loads[p]
		c.mu.Unlock()
		err = wait()
		c.mu.Lock()
		delete(c.committing, req.Group)
		close(done)
		switch now = c.clock.Now(); {
		case err != nil:
		case c.loads[p] != loads:
			ans.refuse(ok, kerr.NotCoordinator.Code)
			return
		case g != nil && c.groups[req.Group] != g:
			// Deleted (its tombstones follow the commit in the log) or
			// expired meanwhile: as Kafka does for a dead group, the
			// offsets are not applied; the client may commit again.
			ans.refuse(ok, kerr.CoordinatorNotAvailable.Code)
			return
		default:
			g = c.groups[req.Group]
		}
	}
	if err != nil {
		c.logger.Error("store offsets", "group", req.Group, "err", err)
		code := kerr.CoordinatorNotAvailable.Code
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
			code = ke.Code
		}
		if errors.Is(err, ErrRecordTooLarge) {
			code = kerr.InvalidCommitOffsetSize.Code
		}
		ans.refuse(ok, code)
		return
	}
	c.applyCommits(g, req.Group, ok, now)
}

// commitAnswer is the error code of each partition entry of an
// OffsetCommit, indexed as the request's topics and partitions.
type commitAnswer struct {
	codes [][]int16
	// last is where the last entry naming each partition is: a partition
	// named twice is stored once, the last value wins, both entries get
	// its answer.
	last map[topicPartition][2]int
}

func newCommitAnswer(req *kmsg.OffsetCommitRequest) *commitAnswer {
	ans := &commitAnswer{codes: make([][]int16, len(req.Topics)), last: map[topicPartition][2]int{}}
	for i, t := range req.Topics {
		ans.codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			ans.last[topicPartition{t.Topic, p.Partition}] = [2]int{i, j}
		}
	}
	return ans
}

// isLast reports whether entry (i, j) is the last one naming tp.
func (a *commitAnswer) isLast(tp topicPartition, i, j int) bool { return a.last[tp] == [2]int{i, j} }

// all answers every entry with code.
func (a *commitAnswer) all(code int16) {
	for i := range a.codes {
		for j := range a.codes[i] {
			a.codes[i][j] = code
		}
	}
}

// refuse answers the accepted entries with code: their records were not stored.
func (a *commitAnswer) refuse(ok []accepted, code int16) {
	for _, e := range ok {
		a.codes[e.i][e.j] = code
	}
}

// fill writes the answer into resp, in the request's order; an entry that a
// later one for the same partition overrode gets the later one's code.
func (a *commitAnswer) fill(req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) {
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			at := a.last[topicPartition{t.Topic, p.Partition}]
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, a.codes[at[0]][at[1]]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// committerLocked checks who commits and returns the group (nil if it does
// not exist yet) and a code for every partition, 0 to go on: a simple commit
// is accepted only while the group has no members; a member's only in the
// group's generation and not while the group completes a rebalance (the
// member's session is refreshed either way).
func (c *Coordinator) committerLocked(req *kmsg.OffsetCommitRequest, now time.Time) (*group, int16) {
	g := c.groups[req.Group]
	simple := req.Generation < 0 && req.MemberID == ""
	switch {
	case g == nil && !simple:
		return g, kerr.IllegalGeneration.Code
	case g == nil:
	case simple:
		if len(g.members) > 0 {
			return g, kerr.UnknownMemberID.Code
		}
	default:
		m, code := g.memberFor(req.MemberID, req.InstanceID, req.Generation, true)
		if m != nil {
			m.lastSeen = now
		}
		if code == 0 && g.state == StateCompletingRebalance {
			code = kerr.RebalanceInProgress.Code
		}
		return g, code
	}
	return g, 0
}

// acceptCommits checks each partition the request commits (the last entry
// of a partition named twice): metadata within offset.metadata.max.bytes,
// a partition that exists. It answers the refused ones in ans and returns
// the accepted ones with the records that store them.
func (c *Coordinator) acceptCommits(req *kmsg.OffsetCommitRequest, ans *commitAnswer, now time.Time) ([]accepted, []record) {
	var ok []accepted
	var recs []record
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if !ans.isLast(tp, i, j) {
				continue
			}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case len(meta) > c.opts.OffsetMetadataMaxBytes:
				ans.codes[i][j] = kerr.OffsetMetadataTooLarge.Code
			case !c.opts.Storage.PartitionExists(t.Topic, p.Partition):
				ans.codes[i][j] = kerr.UnknownTopicOrPartition.Code
			default:
				o := committed{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: meta, commitMs: now.UnixMilli()}
				ok = append(ok, accepted{i, j, tp, o})
				recs = append(recs, record{key: offsetKey(req.Group, t.Topic, p.Partition), value: offsetValue(o)})
			}
		}
	}
	return ok, recs
}

// storeCommits appends the accepted offsets' records to the offsets topic.
// A non-zero code means nothing was stored: INVALID_COMMIT_OFFSET_SIZE when
// they would take the coordinator past group.coordinator.max.bytes or do not
// fit one batch of the offsets topic, the Kafka code a failed append
// carries (Storage.Append: NOT_COORDINATOR, REQUEST_TIMED_OUT,
// COORDINATOR_NOT_AVAILABLE in cluster mode), else COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) storeCommits(g *group, id string, ok []accepted, recs []record) int16 {
	if grow := c.commitGrowth(g, id, ok); grow > 0 && c.mem.used+grow > c.opts.MaxCoordinatorBytes {
		c.logger.Warn("offset commit refused: the coordinator holds group.coordinator.max.bytes; the client gets INVALID_COMMIT_OFFSET_SIZE",
			"group", id, "partitions", len(ok), "need", c.mem.used+grow, "limit", c.opts.MaxCoordinatorBytes)
		return kerr.InvalidCommitOffsetSize.Code
	}
	if err := c.appendRecords(id, recs); err != nil {
		if errors.Is(err, ErrRecordTooLarge) {
			// Kafka's answer to a commit whose records the log refuses
			// for their size.
			c.logger.Warn("offset commit refused: its records do not fit one batch of the offsets topic; the client gets INVALID_COMMIT_OFFSET_SIZE",
				"group", id, "partitions", len(ok), "err", err)
			return kerr.InvalidCommitOffsetSize.Code
		}
		c.logger.Error("store offsets", "group", id, "err", err)
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
			// A replicated append's failure, mapped by Storage
			// (NOT_COORDINATOR, REQUEST_TIMED_OUT, ...).
			return ke.Code
		}
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// applyCommits sets the stored offsets in the group (created if a simple
// commit is its first use) and queues an Empty group's offset expiry.
func (c *Coordinator) applyCommits(g *group, id string, ok []accepted, now time.Time) {
	if len(ok) > 0 && g == nil {
		g = c.groupOrNew(id, now)
	}
	for _, a := range ok {
		g.setOffset(a.tp, a.o)
	}
	if len(ok) > 0 && g.state == StateEmpty && g.expiry.pos == 0 {
		// Commits only add newer offsets: a group already queued keeps
		// its (earlier or equal) expiry time.
		c.rescheduleExpiry(g, now)
	}
	c.commits.Add(int64(len(ok)))
}

// commitGrowth is how many bytes storing the accepted offsets adds to what
// the coordinator holds (negative when they replace longer ones).
func (c *Coordinator) commitGrowth(g *group, id string, ok []accepted) int64 {
	var grow int64
	if g == nil && len(ok) > 0 {
		grow += groupOverhead + int64(len(id))
	}
	for _, a := range ok {
		grow += offsetSize(a.tp, a.o)
		if g != nil {
			if old, had := g.offsets[a.tp]; had {
				grow -= offsetSize(a.tp, old)
			}
		}
	}
	return grow
}

// accepted is a partition of an OffsetCommit to store: where it is in the
// request and answer, and what is committed.
type accepted struct {
	i, j int
	tp   topicPartition
	o    committed
}

// fetchedPartition is one answer of FetchOffsets.
type fetchedPartition struct {
	partition   int32
	offset      int64
	leaderEpoch int32
	metadata    string
	errorCode   int16 // UNSTABLE_OFFSET_COMMIT (require_stable, a transaction holds an offset)
}

type fetchedTopic struct {
	topic      string
	partitions []fetchedPartition
}

// fetchGroup returns the committed offsets of the requested partitions (all
// committed ones when all is set); -1 where nothing is committed.
func (c *Coordinator) fetchGroup(id string, topics map[string][]int32, order []string, all, requireStable bool) []fetchedTopic {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[id]
	if all {
		byTopic := map[string][]int32{}
		if g != nil {
			for tp := range g.offsets {
				byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
			}
		}
		order = order[:0]
		for t, ps := range byTopic {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			order = append(order, t)
		}
		sort.Strings(order)
		topics = byTopic
	}
	out := make([]fetchedTopic, 0, len(order))
	for _, t := range order {
		ft := fetchedTopic{topic: t}
		for _, p := range topics[t] {
			fp := fetchedPartition{partition: p, offset: -1, leaderEpoch: -1}
			if g != nil {
				if o, ok := g.offsets[topicPartition{t, p}]; ok {
					fp.offset, fp.leaderEpoch, fp.metadata = o.offset, o.leaderEpoch, o.metadata
				}
			}
			if requireStable && len(c.pending) > 0 && c.unstableLocked(id, topicPartition{t, p}) {
				fp.errorCode = kerr.UnstableOffsetCommit.Code
			}
			ft.partitions = append(ft.partitions, fp)
		}
		out = append(out, ft)
	}
	return out
}

// dedupeTopics turns a request's topic list into a de-duplicated map and
// its order.
func dedupeTopics[T any](ts []T, name func(T) string, parts func(T) []int32) (map[string][]int32, []string) {
	m := map[string][]int32{}
	var order []string
	seen := map[topicPartition]bool{}
	for _, t := range ts {
		n := name(t)
		if _, ok := m[n]; !ok {
			order = append(order, n)
			m[n] = nil
		}
		for _, p := range parts(t) {
			if !seen[topicPartition{n, p}] {
				seen[topicPartition{n, p}] = true
				m[n] = append(m[n], p)
			}
		}
	}
	return m, order
}

// FetchOffsets serves OffsetFetch (v1-7: one group; v8: several).
func (c *Coordinator) FetchOffsets(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		if req.Group == "" {
			resp.ErrorCode = kerr.InvalidGroupID.Code
			return resp
		}
		topics, order := dedupeTopics(req.Topics, func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic },
			func(t kmsg.OffsetFetchRequestTopic) []int32 { return t.Partitions })
		for _, ft := range c.fetchGroup(req.Group, topics, order, req.Topics == nil, req.RequireStable) {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = ft.topic
			for _, fp := range ft.partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = fp.partition, fp.offset, fp.leaderEpoch, fp.errorCode
				meta := fp.metadata
				rp.Metadata = &meta
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	seen := map[string]bool{}
	for _, rg := range req.Groups {
		if seen[rg.Group] {
			continue
		}
		seen[rg.Group] = true
		sg := kmsg.NewOffsetFetchResponseGroup()
		sg.Group = rg.Group
		if rg.Group == "" {
			sg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, sg)
			continue
		}
		topics, order := dedupeTopics(rg.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic },
			func(t kmsg.OffsetFetchRequestGroupTopic) []int32 { return t.Partitions })
		for _, ft := range c.fetchGroup(rg.Group, topics, order, rg.Topics == nil, req.RequireStable) {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = ft.topic
			for _, fp := range ft.partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = fp.partition, fp.offset, fp.leaderEpoch, fp.errorCode
				meta := fp.metadata
				rp.Metadata = &meta
				rt.Partitions = append(rt.Partitions, rp)
			}
			sg.Topics = append(sg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}

// expireOffsetsLocked deletes the offsets of groups that have been Empty
// for offsets.retention.minutes (for groups that never had members: each
// offset that old), with tombstones, and forgets groups left with nothing.
// It looks only at the groups whose expiry is due (schedule.go).
func (c *Coordinator) expireOffsetsLocked(now time.Time) {
	for _, g := range c.expiries.popDue(now) {
		c.tickVisits.Add(1)
		c.expireGroup(g, now)
		if c.groups[g.id] != g {
			continue
		}
		if at, ok := g.expiryAt(c.opts.OffsetsRetention); ok {
			if !at.After(now) {
				at = now.Add(c.opts.OffsetsRetentionCheck) // retried at the next check
			}
			c.expiries.set(g, at)
		}
	}
}

// expireGroup expires what retention says of one group.
func (c *Coordinator) expireGroup(g *group, now time.Time) {
	retention := c.opts.OffsetsRetention
	if g.state != StateEmpty {
		return
	}
	if len(g.offsets) == 0 && len(g.pending) == 0 && now.Sub(g.stateSince) >= retention {
		// An empty group without offsets: only its metadata record is left.
		if err := c.appendRecords(g.id, []record{{key: groupKey(g.id)}}); err != nil {
			c.logger.Error("remove empty group (retried at the next check)", "group", g.id, "err", err)
			return
		}
		c.forget(g)
		return
	}
	var recs []record
	var expired []topicPartition
	for tp, o := range g.offsets {
		old := now.Sub(g.stateSince) >= retention
		if g.protocolType == "" {
			old = now.Sub(time.UnixMilli(o.commitMs)) >= retention
		}
		if old {
			expired = append(expired, tp)
			recs = append(recs, record{key: offsetKey(g.id, tp.topic, tp.partition)})
		}
	}
	if len(expired) == 0 {
		return
	}
	if len(expired) == len(g.offsets) {
		recs = append(recs, record{key: groupKey(g.id)})
	}
	sort.Slice(recs, func(i, j int) bool { return string(recs[i].key) < string(recs[j].key) })
	if err := c.appendTombstones(g.id, recs); err != nil {
		c.logger.Error("expire offsets (retried at the next check)", "group", g.id, "err", err)
		return
	}
	for _, tp := range expired {
		g.dropOffset(tp)
	}
	c.logger.Info("expired committed offsets of an empty group", "group", g.id, "partitions", len(expired))
	c.dropIfUnused(g)
}
