package group

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxProtocols bounds the protocols (assignors) one member may offer.
const maxProtocols = 64

// Client names the connection a request came from.
type Client struct {
	ID   string // the request header's client id
	Host string // the remote address
}

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// Join serves JoinGroup. It returns when the join phase ends (every member
// rejoined, or the rebalance timeout passed) or ctx ends.
func (c *Coordinator) Join(ctx context.Context, req *kmsg.JoinGroupRequest, client Client) *kmsg.JoinGroupResponse {
	fail := func(code int16) *kmsg.JoinGroupResponse { return joinError(req.Version, code, req.MemberID) }
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	session := msDuration(req.SessionTimeoutMillis)
	if session < c.opts.MinSessionTimeout || session > c.opts.MaxSessionTimeout {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	rebalance := msDuration(req.RebalanceTimeoutMillis)
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	var protocols []protocol
	seen := map[string]bool{}
	for _, p := range req.Protocols {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		protocols = append(protocols, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	if len(protocols) == 0 || len(protocols) > maxProtocols || req.ProtocolType == "" {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	instanceID := ""
	if req.InstanceID != nil {
		instanceID = *req.InstanceID
	}

	c.mu.Lock()
	now := c.clock.Now()
	g := c.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			c.mu.Unlock()
			return fail(kerr.UnknownMemberID.Code)
		}
		g = c.groupOrNew(req.Group, now)
	}
	if !g.supportsProtocols(req.ProtocolType, protocols, req.MemberID) {
		c.dropIfUnused(g)
		c.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	fill := func(m *member) {
		m.clientID, m.clientHost, m.protocolType, m.protocols = client.ID, client.Host, req.ProtocolType, protocols
		m.sessionTimeout, m.rebalanceTimeout, m.lastSeen = session, rebalance, now
	}
	var m *member
	var immediate *kmsg.JoinGroupResponse
	switch {
	case req.MemberID == "" && instanceID != "" && g.static[instanceID] != "":
		m, immediate = c.rejoinStatic(g, g.members[g.static[instanceID]], req, fill, now)
	case req.MemberID == "":
		if len(g.members)+len(g.pending) >= c.opts.MaxGroupSize {
			c.mu.Unlock()
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		prefix := client.ID
		if instanceID != "" {
			prefix = instanceID
		}
		id := newMemberID(prefix)
		if req.Version >= 4 && instanceID == "" {
			// KIP-394: the member learns its id first, so that a join
			// that times out on the client does not leave a ghost member.
			g.pending[id] = now.Add(session)
			c.mu.Unlock()
			resp := joinError(req.Version, kerr.MemberIDRequired.Code, id)
			return resp
		}
		m = c.addMember(g, id, instanceID, fill, now)
	default:
		if instanceID != "" && g.static[instanceID] != "" && g.static[instanceID] != req.MemberID {
			c.mu.Unlock()
			return fail(kerr.FencedInstanceID.Code)
		}
		m = g.members[req.MemberID]
		if m == nil {
			if _, ok := g.pending[req.MemberID]; !ok {
				c.mu.Unlock()
				return fail(kerr.UnknownMemberID.Code)
			}
			delete(g.pending, req.MemberID)
			m = c.addMember(g, req.MemberID, instanceID, fill, now)
			break
		}
		if m.instanceID != instanceID {
			c.mu.Unlock()
			return fail(kerr.FencedInstanceID.Code)
		}
		same := sameProtocols(m.protocols, protocols)
		fill(m)
		switch g.state {
		case StateCompletingRebalance, StateStable:
			if same && (g.state == StateCompletingRebalance || m.id != g.leader) {
				// A follower that lost the answer: send it again.
				immediate = c.joinResponse(g, m, req.Version)
			} else {
				c.prepareRebalance(g, now, "member "+m.id+" rejoined with new metadata")
			}
		}
	}
	if immediate != nil {
		c.mu.Unlock()
		return immediate
	}
	if m.joinWait != nil {
		m.joinWait <- joinError(m.joinVer, kerr.RebalanceInProgress.Code, m.id)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joined, m.joinWait, m.joinVer = true, ch, req.Version
	c.maybeCompleteJoin(g, now)
	c.mu.Unlock()

	select {
	case resp := <-ch:
		return resp
	case <-ctx.Done():
		c.mu.Lock()
		if m.joinWait == ch {
			m.joinWait = nil
		}
		c.mu.Unlock()
		select {
		case resp := <-ch:
			return resp
		default:
			return fail(kerr.RebalanceInProgress.Code)
		}
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
func (c *Coordinator) addMember(g *group, id, instanceID string, fill func(*member), now time.Time) *member {
	m := &member{id: id, instanceID: instanceID}
	fill(m)
	g.members[id] = m
	if instanceID != "" {
		g.static[instanceID] = id
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
		c.prepareRebalance(g, now, "member "+id+" joined")
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
// instance id): it gets a new member id, the old one is fenced. A Stable
// group whose follower comes back with the same metadata keeps its
// assignment without a rebalance (the point of static membership).
func (c *Coordinator) rejoinStatic(g *group, old *member, req *kmsg.JoinGroupRequest, fill func(*member), now time.Time) (*member, *kmsg.JoinGroupResponse) {
	prefix := old.instanceID
	m := &member{id: newMemberID(prefix), instanceID: old.instanceID, assignment: old.assignment, synced: old.synced}
	fill(m)
	same := sameProtocols(old.protocols, m.protocols)
	wasLeader := g.leader == old.id
	g.removeMember(old, kerr.FencedInstanceID.Code)
	g.members[m.id] = m
	g.static[m.instanceID] = m.id
	if wasLeader {
		g.leader = m.id
	}
	c.logger.Info("static member rejoined", "group", g.id, "instance", m.instanceID, "old_member", old.id, "member", m.id)
	if g.state == StateStable && same && !wasLeader {
		return m, c.joinResponse(g, m, req.Version)
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
func (c *Coordinator) Sync(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	c.mu.Lock()
	now := c.clock.Now()
	g := c.groups[req.Group]
	if g == nil || g.state == StateEmpty {
		c.mu.Unlock()
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	m, code := g.memberFor(req.MemberID, req.InstanceID, req.Generation, true)
	if code == 0 && ((req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol)) {
		code = kerr.InconsistentGroupProtocol.Code
	}
	if code != 0 {
		c.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	m.lastSeen = now
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	switch g.state {
	case StatePreparingRebalance:
		c.mu.Unlock()
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp
	case StateStable:
		resp.MemberAssignment = m.assignment
		c.mu.Unlock()
		return resp
	}
	// CompletingRebalance.
	m.synced = true
	if m.id != g.leader {
		if m.syncWait != nil {
			old := kmsg.NewPtrSyncGroupResponse()
			old.ErrorCode = kerr.RebalanceInProgress.Code
			m.syncWait <- old
		}
		ch := make(chan *kmsg.SyncGroupResponse, 1)
		m.syncWait = ch
		c.mu.Unlock()
		var got *kmsg.SyncGroupResponse
		select {
		case got = <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			if m.syncWait == ch {
				m.syncWait = nil
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
	assign := make(map[string][]byte, len(req.GroupAssignment))
	for _, a := range req.GroupAssignment {
		if _, ok := g.members[a.MemberID]; ok {
			assign[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	for id, o := range g.members {
		o.assignment = assign[id]
		if o.assignment == nil {
			o.assignment = []byte{}
		}
	}
	g.setState(StateStable, now)
	if err := c.appendRecords(g.id, []record{{key: groupKey(g.id), value: g.metadataValue()}}); err != nil {
		c.logger.Error("store group assignment; rebalancing", "group", g.id, "err", err)
		c.prepareRebalance(g, now, "could not store the assignment")
		c.mu.Unlock()
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	for _, o := range g.members {
		if o.syncWait != nil {
			r := kmsg.NewPtrSyncGroupResponse()
			r.MemberAssignment = o.assignment
			o.syncWait <- r
			o.syncWait = nil
		}
	}
	resp.MemberAssignment = m.assignment
	c.mu.Unlock()
	return resp
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
		delete(g.pending, memberID)
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
