package group

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxProtocols bounds the protocols (assignors) one member may offer; a
// longer list, or a protocol type or name over maxNameBytes, is answered
// INCONSISTENT_GROUP_PROTOCOL.
const maxProtocols = 64

// Client names the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // the remote address
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// joining is a JoinGroup's validated fields.
type joining struct {
	session, rebalance time.Duration
	protocols          []protocol
	instanceID         string
	protocolType       string
	client             Client
}

// fill sets what a join tells about member m.
func (j *joining) fill(m *member, now time.Time) {
	m.clientID, m.clientHost, m.protocolType, m.protocols = j.client.ID, j.client.Host, j.protocolType, j.protocols
	m.sessionTimeout, m.rebalanceTimeout, m.lastSeen = j.session, j.rebalance, now
}

// parseJoin validates a JoinGroup; a non-zero code is the answer.
func (c *Coordinator) parseJoin(req *kmsg.JoinGroupRequest, client Client) (joining, int16) {
	if req.Group == "" {
		return joining{}, kerr.InvalidGroupID.Code
	}
	j := joining{session: msDuration(req.SessionTimeoutMillis), rebalance: msDuration(req.RebalanceTimeoutMillis),
		protocolType: req.ProtocolType, client: client}
	if j.session < c.opts.MinSessionTimeout || j.session > c.opts.MaxSessionTimeout {
		return joining{}, kerr.InvalidSessionTimeout.Code
	}
	if req.Version == 0 || j.rebalance <= 0 {
		j.rebalance = j.session
	}
	if req.ProtocolType == "" || len(req.ProtocolType) > maxNameBytes {
		return joining{}, kerr.InconsistentGroupProtocol.Code
	}
	seen := map[string]bool{}
	for _, p := range req.Protocols {
		if seen[p.Name] {
			continue
		}
		if len(j.protocols) == maxProtocols || len(p.Name) > maxNameBytes {
			return joining{}, kerr.InconsistentGroupProtocol.Code
		}
		seen[p.Name] = true
		j.protocols = append(j.protocols, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	if len(j.protocols) == 0 {
		return joining{}, kerr.InconsistentGroupProtocol.Code
	}
	if req.InstanceID != nil {
		j.instanceID = *req.InstanceID
	}
	return j, 0
}

// Join serves JoinGroup. It returns when the join phase ends (every member
// rejoined, or the rebalance timeout passed) or ctx ends. A member that
// would take the group or the coordinator past a bound (memory.go) is
// answered at once: GROUP_MAX_SIZE_REACHED past group.max.size,
// MESSAGE_TOO_LARGE past a byte bound; it is not in the group afterwards.
//
// The phases: validate the request (parseJoin), apply it to the group under
// the lock (enterJoin), wait for the join phase to end (awaitJoin).
func (c *Coordinator) Join(ctx context.Context, req *kmsg.JoinGroupRequest, client Client) *kmsg.JoinGroupResponse {
	j, code := c.parseJoin(req, client)
	if code != 0 {
		return joinError(req.Version, code, req.MemberID)
	}
	g, m, ch, resp := c.enterJoin(req, &j)
	if resp != nil {
		return resp
	}
	return c.awaitJoin(ctx, req, g, m, ch)
}

// enterJoin applies a validated join to its group. It returns the answer to
// send at once, or the member that now waits for the join phase to end and
// the channel its answer will come on: a join the member had waiting is
// answered REBALANCE_IN_PROGRESS, and the join phase ends now if this member
// was the last one it waited for.
func (c *Coordinator) enterJoin(req *kmsg.JoinGroupRequest, j *joining) (*group, *member, chan *kmsg.JoinGroupResponse, *kmsg.JoinGroupResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	g, m, resp := c.joinLocked(req, j, now)
	if resp != nil {
		if g != nil {
			c.reschedule(g, now)
		}
		return g, nil, nil, resp
	}
	if m.joinWait != nil {
		m.joinWait <- joinError(m.joinVer, kerr.RebalanceInProgress.Code, m.id)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joined, m.joinWait, m.joinVer = true, ch, req.Version
	c.maybeCompleteJoin(g, now)
	c.reschedule(g, now)
	return g, m, ch, nil
}

// awaitJoin waits for m's answer on ch. If ctx ends first, m stops waiting
// (its session counts again) and the answer is REBALANCE_IN_PROGRESS, unless
// the join phase ended meanwhile.
func (c *Coordinator) awaitJoin(ctx context.Context, req *kmsg.JoinGroupRequest, g *group, m *member, ch chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	select {
	case resp := <-ch:
		return resp
	case <-ctx.Done():
		c.mu.Lock()
		if m.joinWait == ch {
			m.joinWait = nil
			c.reschedule(g, c.clock.Now()) // its session counts again
		}
		c.mu.Unlock()
		select {
		case resp := <-ch:
			return resp
		default:
			return joinError(req.Version, kerr.RebalanceInProgress.Code, req.MemberID)
		}
	}
}

// joinLocked applies a join to the group: it returns the member that now
// waits for the join phase to end, or the answer to send at once (g is the
// group the join touched, nil if none). Each kind of join has its function:
// a static member that restarted, a new member, a member that learnt its id
// (KIP-394) and a member that rejoins.
func (c *Coordinator) joinLocked(req *kmsg.JoinGroupRequest, j *joining, now time.Time) (*group, *member, *kmsg.JoinGroupResponse) {
	g, code := c.groupForJoin(req, j, now)
	if code != 0 {
		return g, nil, joinError(req.Version, code, req.MemberID)
	}
	cand := &member{instanceID: j.instanceID}
	j.fill(cand, now)
	switch {
	case req.MemberID == "" && j.instanceID != "" && g.static[j.instanceID] != "":
		return c.joinRestartedStatic(g, cand, req, now)
	case req.MemberID == "":
		return c.joinNewMember(g, cand, req, j, now)
	case j.instanceID != "" && g.static[j.instanceID] != "" && g.static[j.instanceID] != req.MemberID:
		return g, nil, joinError(req.Version, kerr.FencedInstanceID.Code, req.MemberID)
	case g.members[req.MemberID] == nil:
		return c.joinPendingMember(g, cand, req, now)
	}
	return c.rejoinMember(g, g.members[req.MemberID], cand, req, j, now)
}

// groupForJoin returns the group a join names, created for a join without a
// member id. A join with a member id for an unknown group is answered
// UNKNOWN_MEMBER_ID (g nil), one whose protocols the group cannot take
// INCONSISTENT_GROUP_PROTOCOL.
func (c *Coordinator) groupForJoin(req *kmsg.JoinGroupRequest, j *joining, now time.Time) (*group, int16) {
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			return nil, kerr.UnknownMemberID.Code
		}
		g = c.groupOrNew(req.Group, now)
	}
	if !g.supportsProtocols(req.ProtocolType, j.protocols, req.MemberID) {
		c.dropIfUnused(g)
		return g, kerr.InconsistentGroupProtocol.Code
	}
	return g, 0
}

// joinRestartedStatic admits cand, a static member that restarted (no member
// id, a known instance id), in place of its old self, under a new member id
// and with its old assignment (rejoinStatic).
func (c *Coordinator) joinRestartedStatic(g *group, cand *member, req *kmsg.JoinGroupRequest, now time.Time) (*group, *member, *kmsg.JoinGroupResponse) {
	old := g.members[g.static[cand.instanceID]]
	cand.id, cand.assignment, cand.synced = newMemberID(cand.instanceID), old.assignment, old.synced
	if code := c.admitOrRefuse(g, cand, old, now); code != 0 {
		return g, nil, joinError(req.Version, code, req.MemberID)
	}
	m, immediate := c.rejoinStatic(g, old, cand, req.Version, now)
	if immediate != nil {
		return g, nil, immediate
	}
	return g, m, nil
}

// joinNewMember gives cand, a join without a member id, its id and admits it
// within group.max.size and the byte bounds. From JoinGroup v4 a dynamic
// member is only told its id (MEMBER_ID_REQUIRED) and kept pending until it
// joins again with it.
func (c *Coordinator) joinNewMember(g *group, cand *member, req *kmsg.JoinGroupRequest, j *joining, now time.Time) (*group, *member, *kmsg.JoinGroupResponse) {
	if len(g.members)+len(g.pending) >= c.opts.MaxGroupSize {
		c.refuse(g, cand, nil, refusal{kerr.GroupMaxSizeReached.Code, "group.max.size",
			int64(len(g.members) + len(g.pending) + 1), int64(c.opts.MaxGroupSize)}, now)
		return g, nil, joinError(req.Version, kerr.GroupMaxSizeReached.Code, req.MemberID)
	}
	prefix := j.client.ID
	if j.instanceID != "" {
		prefix = j.instanceID
	}
	cand.id = newMemberID(prefix)
	if code := c.admitOrRefuse(g, cand, nil, now); code != 0 {
		return g, nil, joinError(req.Version, code, req.MemberID)
	}
	if req.Version >= 4 && j.instanceID == "" {
		// KIP-394: the member learns its id first, so that a join
		// that times out on the client does not leave a ghost member.
		g.addPending(cand.id, now.Add(j.session))
		return g, nil, joinError(req.Version, kerr.MemberIDRequired.Code, cand.id)
	}
	return g, c.addMember(g, cand, now), nil
}

// joinPendingMember admits cand, a join with the member id a MEMBER_ID_REQUIRED
// answer gave it; an id that is neither a member's nor pending is answered
// UNKNOWN_MEMBER_ID.
func (c *Coordinator) joinPendingMember(g *group, cand *member, req *kmsg.JoinGroupRequest, now time.Time) (*group, *member, *kmsg.JoinGroupResponse) {
	if _, ok := g.pending[req.MemberID]; !ok {
		return g, nil, joinError(req.Version, kerr.UnknownMemberID.Code, req.MemberID)
	}
	g.dropPending(req.MemberID)
	cand.id = req.MemberID
	if code := c.admitOrRefuse(g, cand, nil, now); code != 0 {
		return g, nil, joinError(req.Version, code, req.MemberID)
	}
	return g, c.addMember(g, cand, now), nil
}

// rejoinMember applies the join of m, a member of g, whose new fields cand
// holds. A member whose metadata did not change and that only lost its
// answer gets it again at once; otherwise a rebalance starts (if one is not
// under way) and m waits for it.
func (c *Coordinator) rejoinMember(g *group, m, cand *member, req *kmsg.JoinGroupRequest, j *joining, now time.Time) (*group, *member, *kmsg.JoinGroupResponse) {
	if m.instanceID != j.instanceID {
		return g, nil, joinError(req.Version, kerr.FencedInstanceID.Code, req.MemberID)
	}
	cand.id, cand.assignment = m.id, m.assignment
	if code := c.admitOrRefuse(g, cand, m, now); code != 0 {
		return g, nil, joinError(req.Version, code, req.MemberID)
	}
	same := sameProtocols(m.protocols, j.protocols)
	j.fill(m, now)
	g.account(m)
	switch g.state {
	case StateCompletingRebalance, StateStable:
		if same && (g.state == StateCompletingRebalance || m.id != g.leader) {
			// A follower that lost the answer: send it again.
			return g, nil, c.joinResponse(g, m, req.Version)
		}
		c.prepareRebalance(g, now, "member "+m.id+" rejoined with new metadata")
	}
	return g, m, nil
}

// admitOrRefuse admits cand to g in place of old (nil for a new member), or
// refuses it (refuse) and returns the code to answer with.
func (c *Coordinator) admitOrRefuse(g *group, cand, old *member, now time.Time) int16 {
	if r, ok := c.admit(g, cand, old); !ok {
		c.refuse(g, cand, old, r, now)
		return r.code
	}
	return 0
}

// refuse logs a join that does not fit a bound; the member it would have
// replaced (old, if any) leaves the group.
func (c *Coordinator) refuse(g *group, cand, old *member, r refusal, now time.Time) {
	c.logger.Warn("join refused: the member does not fit a bound; the client gets "+kerr.ErrorForCode(r.code).Error(),
		"group", g.id, "member", cand.id, "client", cand.clientID, "bound", r.bound, "need", r.need, "limit", r.limit)
	if old != nil {
		g.removeMember(old, r.code)
		c.membershipChanged(g, now, "member "+old.id+" refused: over "+r.bound)
	}
}

func sameProtocols(a, b []protocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !bytes.Equal(a[i].metadata, b[i].metadata) {
			return false
		}
	}
	return true
}

// addMember adds a new member and starts (or extends) a join phase.
func (c *Coordinator) addMember(g *group, m *member, now time.Time) *member {
	g.members[m.id] = m
	g.account(m)
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if len(g.members) == 1 {
		g.protocolType = m.protocolType
	}
	if g.state == StatePreparingRebalance {
		if g.joinReadyAt.After(now) {
			// Initial delay: every new member extends it, up to the
			// rebalance timeout.
			g.joinReadyAt = minTime(now.Add(c.opts.InitialRebalanceDelay), g.rebalanceStart.Add(m.rebalanceTimeout))
		}
		g.rebalanceDeadline = maxTime(g.rebalanceDeadline, now.Add(m.rebalanceTimeout))
	} else {
		c.prepareRebalance(g, now, "member "+m.id+" joined")
	}
	return m
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rejoinStatic handles a static member that restarted (no member id, known
// instance id): it comes back as m, with a new member id; the old one is
// fenced. A Stable group whose follower comes back with the same metadata
// keeps its assignment without a rebalance (the point of static
// membership).
func (c *Coordinator) rejoinStatic(g *group, old, m *member, version int16, now time.Time) (*member, *kmsg.JoinGroupResponse) {
	same := sameProtocols(old.protocols, m.protocols)
	wasLeader := g.leader == old.id
	g.removeMember(old, kerr.FencedInstanceID.Code)
	g.members[m.id] = m
	g.account(m)
	g.static[m.instanceID] = m.id
	if wasLeader {
		g.leader = m.id
	}
	c.logger.Info("static member rejoined", "group", g.id, "instance", m.instanceID, "old_member", old.id, "member", m.id)
	if g.state == StateStable && same && !wasLeader {
		return m, c.joinResponse(g, m, version)
	}
	if g.state != StatePreparingRebalance {
		c.prepareRebalance(g, now, "static member "+m.instanceID+" rejoined")
	}
	return m, nil
}

// memberFor finds the member a request names, checking static fencing and
// the generation (gen < 0 skips the generation check).
func (g *group) memberFor(memberID string, instanceID *string, gen int32, checkGen bool) (*member, int16) {
	if instanceID != nil && *instanceID != "" {
		if cur, ok := g.static[*instanceID]; ok && cur != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if checkGen && gen != g.generation {
		return m, kerr.IllegalGeneration.Code
	}
	return m, 0
}

// Sync serves SyncGroup: the leader hands in the assignment; followers wait
// for it.
//
// The phases: check the member and answer what the group's state answers
// at once (syncLocked); a follower then waits for the leader's assignment
// (awaitAssignment), the leader stores it and hands it out
// (leaderSyncLocked).
func (c *Coordinator) Sync(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	c.mu.Lock()
	g, m, wait := c.syncLocked(req, resp)
	c.mu.Unlock()
	if wait == nil {
		return resp
	}
	return c.awaitAssignment(ctx, g, m, wait, resp)
}

// syncLocked applies a SyncGroup to its group and answers it in resp, or,
// for a follower while the group completes a rebalance, returns the channel
// the leader's assignment will come on (a sync the follower had waiting is
// answered REBALANCE_IN_PROGRESS).
func (c *Coordinator) syncLocked(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) (*group, *member, chan *kmsg.SyncGroupResponse) {
	now := c.clock.Now()
	g := c.groups[req.Group]
	if g == nil || g.state == StateEmpty {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil, nil, nil
	}
	m, code := g.memberFor(req.MemberID, req.InstanceID, req.Generation, true)
	if code == 0 && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol)) {
		code = kerr.InconsistentGroupProtocol.Code
	}
	if code != 0 {
		resp.ErrorCode = code
		return nil, nil, nil
	}
	m.lastSeen = now
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	switch g.state {
	case StatePreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return nil, nil, nil
	case StateStable:
		resp.MemberAssignment = m.assignment
		return nil, nil, nil
	}
	// CompletingRebalance.
	m.synced = true
	if m.id == g.leader {
		c.leaderSyncLocked(g, m, req.GroupAssignment, resp, now)
		return nil, nil, nil
	}
	if m.syncWait != nil {
		old := kmsg.NewPtrSyncGroupResponse()
		old.ErrorCode = kerr.RebalanceInProgress.Code
		m.syncWait <- old
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	m.syncWait = ch
	return g, m, ch
}

// awaitAssignment waits for a follower's assignment on ch and answers resp
// with it. If ctx ends first, m stops waiting (its session counts again) and
// the answer is REBALANCE_IN_PROGRESS, unless the assignment came meanwhile.
func (c *Coordinator) awaitAssignment(ctx context.Context, g *group, m *member, ch chan *kmsg.SyncGroupResponse, resp *kmsg.SyncGroupResponse) *kmsg.SyncGroupResponse {
	var got *kmsg.SyncGroupResponse
	select {
	case got = <-ch:
	case <-ctx.Done():
		c.mu.Lock()
		if m.syncWait == ch {
			m.syncWait = nil
			c.reschedule(g, c.clock.Now()) // its session counts again
		}
		c.mu.Unlock()
		select {
		case got = <-ch:
		default:
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			return resp
		}
	}
	resp.ErrorCode, resp.MemberAssignment = got.ErrorCode, got.MemberAssignment
	return resp
}

// leaderSyncLocked applies the leader m's assignment (assign) and answers
// every waiting follower with its part, and resp with the leader's. If the
// assignment cannot be stored, a new join phase starts and resp carries the
// code (as do the waiting followers' answers when it is MESSAGE_TOO_LARGE).
func (c *Coordinator) leaderSyncLocked(g *group, m *member, assignment []kmsg.SyncGroupRequestGroupAssignment, resp *kmsg.SyncGroupResponse, now time.Time) {
	if code := c.assign(g, assignment, now); code != 0 {
		// Followers waiting for the assignment get the same error (the
		// join phase that follows tells the others to rejoin).
		for _, o := range g.members {
			if o.syncWait != nil && code == kerr.MessageTooLarge.Code {
				r := kmsg.NewPtrSyncGroupResponse()
				r.ErrorCode = code
				o.syncWait <- r
				o.syncWait = nil
			}
		}
		c.prepareRebalance(g, now, "the assignment could not be stored")
		c.reschedule(g, now)
		resp.ErrorCode = code
		return
	}
	for _, o := range g.members {
		if o.syncWait != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.MemberAssignment = o.assignment
			o.syncWait <- r
			o.syncWait = nil
		}
	}
	c.reschedule(g, now)
	resp.MemberAssignment = m.assignment
}

// assign applies the leader's assignment, makes the group Stable and stores
// its record. A non-zero code means nothing changed: MESSAGE_TOO_LARGE when
// the assignments take the group past group.max.metadata.bytes, the
// coordinator past group.coordinator.max.bytes or the record past the
// offsets topic's max.message.bytes; COORDINATOR_NOT_AVAILABLE when the
// record could not be stored.
func (c *Coordinator) assign(g *group, leader []kmsg.SyncGroupRequestGroupAssignment, now time.Time) int16 {
	assigned := make(map[string][]byte, len(g.members))
	var grow int64
	for _, a := range leader {
		if o, ok := g.members[a.MemberID]; ok {
			if prev, dup := assigned[a.MemberID]; dup {
				grow -= int64(len(prev) - len(o.assignment)) // the last entry wins
			}
			assigned[a.MemberID] = a.MemberAssignment
			grow += int64(len(a.MemberAssignment) - len(o.assignment))
		}
	}
	for id, o := range g.members {
		if _, ok := assigned[id]; !ok {
			grow -= int64(len(o.assignment))
		}
	}
	tooLarge := func(bound string, need, limit int64) int16 {
		c.logger.Warn("assignment refused: it does not fit a bound; the members get MESSAGE_TOO_LARGE and rejoin",
			"group", g.id, "generation", g.generation, "bound", bound, "need", need, "limit", limit)
		return kerr.MessageTooLarge.Code
	}
	if need := g.memberBytes + grow; need > c.opts.MaxGroupMetadataBytes {
		return tooLarge("group.max.metadata.bytes", need, c.opts.MaxGroupMetadataBytes)
	}
	if need := c.mem.used + grow; grow > 0 && need > c.opts.MaxCoordinatorBytes {
		return tooLarge("group.coordinator.max.bytes", need, c.opts.MaxCoordinatorBytes)
	}
	previous := make(map[string][]byte, len(g.members))
	for id, o := range g.members {
		previous[id] = o.assignment
		o.assignment = bytes.Clone(assigned[id])
		if o.assignment == nil {
			o.assignment = []byte{}
		}
		g.account(o)
	}
	state, since := g.state, g.stateSince
	g.setState(StateStable, now)
	err := c.appendRecords(g.id, []record{{key: groupKey(g.id), value: g.metadataValue()}})
	if err == nil {
		return 0
	}
	for id, o := range g.members {
		o.assignment = previous[id]
		g.account(o)
	}
	g.state, g.stateSince = state, since
	if errors.Is(err, ErrRecordTooLarge) {
		c.logger.Warn("assignment refused: the group record does not fit the offsets topic; the members get MESSAGE_TOO_LARGE and rejoin",
			"group", g.id, "generation", g.generation, "bound", "max.message.bytes of "+OffsetsTopic, "err", err)
		return kerr.MessageTooLarge.Code
	}
	c.logger.Error("store group assignment; rebalancing", "group", g.id, "err", err)
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		// A replicated append's failure (Storage.Append), as Kafka's
		// storeGroup maps it: a timeout is REBALANCE_IN_PROGRESS.
		if ke.Code == kerr.RequestTimedOut.Code {
			return kerr.RebalanceInProgress.Code
		}
		return ke.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// Heartbeat serves Heartbeat: it keeps the member's session alive and tells
// it when to rejoin.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[req.Group]
	if g == nil || g.state == StateEmpty {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	m, code := g.memberFor(req.MemberID, req.InstanceID, req.Generation, true)
	if m != nil {
		m.lastSeen = c.clock.Now()
	}
	if code == 0 && g.state == StatePreparingRebalance {
		code = kerr.RebalanceInProgress.Code
	}
	resp.ErrorCode = code
	return resp
}

// Leave serves LeaveGroup (v0-2: one member; v3+: a batch, by member id or
// instance id).
func (c *Coordinator) Leave(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	g := c.groups[req.Group]
	changed := false
	seen := map[[2]string]bool{}
	for _, lm := range leaving {
		instance := ""
		if lm.InstanceID != nil {
			instance = *lm.InstanceID
		}
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		key := [2]string{lm.MemberID, instance}
		if seen[key] {
			continue
		}
		seen[key] = true
		rm.ErrorCode = c.leaveOne(g, lm.MemberID, instance, &changed)
		resp.Members = append(resp.Members, rm)
	}
	if req.Version < 3 && len(resp.Members) == 1 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	if changed {
		c.membershipChanged(g, now, "member left")
		c.reschedule(g, now)
	}
	return resp
}

func (c *Coordinator) leaveOne(g *group, memberID, instance string, changed *bool) int16 {
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if instance != "" {
		cur, ok := g.static[instance]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		if memberID != "" && cur != memberID {
			return kerr.FencedInstanceID.Code
		}
		memberID = cur
	}
	if _, ok := g.pending[memberID]; ok {
		g.dropPending(memberID)
		*changed = true
		return 0
	}
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	c.logger.Info("member left", "group", g.id, "member", memberID)
	g.removeMember(m, kerr.UnknownMemberID.Code)
	*changed = true
	return 0
}
