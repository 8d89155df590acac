package group

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state, named as Kafka names it.
type State string

// The states of a classic group (see doc.go for the transitions).
const (
	StateEmpty               State = "Empty"
	StatePreparingRebalance  State = "PreparingRebalance"
	StateCompletingRebalance State = "CompletingRebalance"
	StateStable              State = "Stable"
	StateDead                State = "Dead"
)

type topicPartition struct {
	topic     string
	partition int32
}

// committed is one committed offset.
type committed struct {
	offset      int64
	leaderEpoch int32
	metadata    string
	commitMs    int64
}

type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a group. Guarded by Coordinator.mu.
type member struct {
	id, instanceID       string // instanceID "" = dynamic member
	clientID, clientHost string
	protocolType         string
	protocols            []protocol
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	assignment           []byte
	lastSeen             time.Time

	joined   bool                         // sent JoinGroup in the current rebalance
	synced   bool                         // sent SyncGroup in the current generation
	joinWait chan *kmsg.JoinGroupResponse // a JoinGroup waiting for the join phase to end
	joinVer  int16
	syncWait chan *kmsg.SyncGroupResponse // a follower's SyncGroup waiting for the leader

	bytes, recordBytes int64 // size() and recordSize() as counted in the group (memory.go)
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

func (m *member) instancePtr() *string {
	if m.instanceID == "" {
		return nil
	}
	s := m.instanceID
	return &s
}

// group is one consumer group. Guarded by Coordinator.mu.
type group struct {
	id           string
	state        State
	stateSince   time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	pending      map[string]time.Time // member ids handed out with MEMBER_ID_REQUIRED -> expiry
	static       map[string]string    // instance id -> member id
	offsets      map[topicPartition]committed

	rebalanceStart    time.Time
	rebalanceDeadline time.Time // the join phase ends here whoever has not joined
	joinReadyAt       time.Time // initial rebalance delay: not before this
	syncDeadline      time.Time // members that have not synced by then are removed

	// Bytes held (memory.go): memberBytes counts members and pending ids
	// (bounded by Options.MaxGroupMetadataBytes), offsetBytes committed
	// offsets, recordBytes bounds the members' part of the group record;
	// mem is the coordinator's total, which these changes update too.
	memberBytes, offsetBytes, recordBytes int64
	mem                                   *memory

	timer  queueSlot // in Coordinator.timers while the group has a deadline (schedule.go)
	expiry queueSlot // in Coordinator.expiries while Empty with something to expire
}

// newGroup returns an Empty group, counting its bytes in mem.
func newGroup(id string, now time.Time, mem *memory) *group {
	g := &group{id: id, state: StateEmpty, stateSince: now, members: map[string]*member{},
		pending: map[string]time.Time{}, static: map[string]string{}, offsets: map[topicPartition]committed{}, mem: mem}
	mem.used += g.footprint()
	return g
}

func (g *group) setState(s State, now time.Time) {
	if g.state != s {
		g.state, g.stateSince = s, now
	}
}

// resetMembership forgets members and protocol (a group tombstone).
func (g *group) resetMembership() {
	for _, m := range g.members {
		g.unaccount(m)
	}
	for id := range g.pending {
		g.dropPending(id)
	}
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
	g.protocolType, g.protocol, g.leader, g.generation = "", "", "", 0
	g.state = StateEmpty
}

// restore applies a stored GroupMetadataValue: the members of the last
// generation come back Stable with their sessions restarted at now, so a
// broker restart does not force a rebalance.
func (g *group) restore(v *kmsg.GroupMetadataValue, now time.Time) {
	g.resetMembership()
	g.protocolType, g.generation = v.ProtocolType, v.Generation
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	g.stateSince = now
	if v.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, vm := range v.Members {
		m := &member{id: vm.MemberID, clientID: vm.ClientID, clientHost: vm.ClientHost, protocolType: v.ProtocolType,
			protocols:      []protocol{{name: g.protocol, metadata: vm.Subscription}},
			sessionTimeout: time.Duration(vm.SessionTimeoutMillis) * time.Millisecond, assignment: vm.Assignment,
			lastSeen: now, synced: true}
		m.rebalanceTimeout = m.sessionTimeout
		if vm.RebalanceTimeoutMillis > 0 {
			m.rebalanceTimeout = time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond
		}
		if vm.InstanceID != nil && *vm.InstanceID != "" {
			m.instanceID = *vm.InstanceID
			g.static[m.instanceID] = m.id
		}
		if prev := g.members[m.id]; prev != nil {
			g.unaccount(prev) // a member listed twice: the last entry wins
		}
		g.members[m.id] = m
		g.account(m)
	}
	if len(g.members) > 0 {
		g.state = StateStable
	}
}

// metadataValue is the group's GroupMetadataValue record.
func (g *group) metadataValue() []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = valueGroupMetadata
	v.ProtocolType, v.Generation = g.protocolType, g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID, vm.ClientID, vm.ClientHost = m.id, m.instancePtr(), m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription, vm.Assignment = m.metadataFor(g.protocol), m.assignment
		v.Members = append(v.Members, vm)
	}
	return v.AppendTo(nil)
}

func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// supportsProtocols reports whether a joining member fits the group: same
// protocol type and at least one protocol every member supports.
func (g *group) supportsProtocols(protocolType string, protocols []protocol, except string) bool {
	others := 0
	for _, m := range g.members {
		if m.id != except {
			others++
		}
	}
	if others == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		ok := true
		for _, m := range g.members {
			if m.id != except && !m.hasProtocol(p.name) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func (m *member) hasProtocol(name string) bool {
	for _, p := range m.protocols {
		if p.name == name {
			return true
		}
	}
	return false
}

// selectProtocol is Kafka's vote: among the protocols every member
// supports, each member votes for the first of its own list; most votes win
// (ties: the member order's first choice).
func (g *group) selectProtocol() string {
	members := g.sortedMembers()
	votes := map[string]int{}
	var order []string
	for _, m := range members {
		for _, p := range m.protocols {
			all := true
			for _, o := range members {
				if !o.hasProtocol(p.name) {
					all = false
					break
				}
			}
			if all {
				if _, seen := votes[p.name]; !seen {
					order = append(order, p.name)
				}
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, name := range order {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// allJoined reports whether every member has rejoined and no member id
// handed out is still expected.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if !m.joined {
			return false
		}
	}
	return true
}

// removeMember drops a member, answering its waiting requests with code.
func (g *group) removeMember(m *member, code int16) {
	if m.joinWait != nil {
		resp := joinError(m.joinVer, code, m.id)
		m.joinWait <- resp
		m.joinWait = nil
	}
	if m.syncWait != nil {
		resp := kmsg.NewPtrSyncGroupResponse()
		resp.ErrorCode = code
		m.syncWait <- resp
		m.syncWait = nil
	}
	delete(g.members, m.id)
	g.unaccount(m)
	if m.instanceID != "" && g.static[m.instanceID] == m.id {
		delete(g.static, m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
	}
}

func joinError(version int16, code int16, memberID string) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, memberID
	return resp
}

// prepareRebalance starts a join phase: every member must rejoin within
// the largest rebalance timeout. Syncs waiting for the leader are told to
// rejoin.
func (c *Coordinator) prepareRebalance(g *group, now time.Time, reason string) {
	if g.state == StatePreparingRebalance {
		return
	}
	initial := g.state == StateEmpty
	for _, m := range g.members {
		if m.syncWait != nil {
			resp := kmsg.NewPtrSyncGroupResponse()
			resp.ErrorCode = kerr.RebalanceInProgress.Code
			m.syncWait <- resp
			m.syncWait = nil
		}
		m.joined = m.joinWait != nil
	}
	g.setState(StatePreparingRebalance, now)
	g.rebalanceStart = now
	g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	g.joinReadyAt = now
	if initial {
		g.joinReadyAt = now.Add(c.opts.InitialRebalanceDelay)
	}
	c.logger.Info("group rebalancing", "group", g.id, "generation", g.generation, "members", len(g.members), "reason", reason)
}

// maybeCompleteJoin ends the join phase when everyone has joined (and the
// initial delay is over) or the rebalance timeout passed.
func (c *Coordinator) maybeCompleteJoin(g *group, now time.Time) {
	if g.state != StatePreparingRebalance {
		return
	}
	if (g.allJoined() && !now.Before(g.joinReadyAt)) || !now.Before(g.rebalanceDeadline) {
		c.completeJoin(g, now)
	}
}

// completeJoin removes members that did not rejoin, starts the next
// generation and answers every waiting JoinGroup; the leader gets the
// member list to assign.
func (c *Coordinator) completeJoin(g *group, now time.Time) {
	for _, m := range g.sortedMembers() {
		if !m.joined {
			c.logger.Info("removing member that did not rejoin in time", "group", g.id, "member", m.id)
			g.removeMember(m, kerr.UnknownMemberID.Code)
		}
	}
	for id := range g.pending {
		g.dropPending(id)
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(StateEmpty, now)
		if err := c.appendRecords(g.id, []record{{key: groupKey(g.id), value: g.metadataValue()}}); err != nil {
			c.logger.Error("store group metadata", "group", g.id, "err", err)
		}
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.sortedMembers()[0].id
	}
	g.setState(StateCompletingRebalance, now)
	c.generations.Add(1)
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, m := range g.members {
		m.joined, m.synced, m.lastSeen = false, false, now
		if m.joinWait != nil {
			m.joinWait <- c.joinResponse(g, m, m.joinVer)
			m.joinWait = nil
		}
	}
	c.logger.Info("group formed a generation", "group", g.id, "generation", g.generation, "protocol", g.protocol, "members", len(g.members), "leader", g.leader)
}

// joinResponse is the answer of a completed join for member m.
func (c *Coordinator) joinResponse(g *group, m *member, version int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.Generation, resp.LeaderID, resp.MemberID = g.generation, g.leader, m.id
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = o.id, o.instancePtr(), o.metadataFor(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

// tickGroup applies the passage of time to one group (Tick then requeues
// it, or forgets it when nothing is left).
func (c *Coordinator) tickGroup(g *group, now time.Time) {
	for id, deadline := range g.pending {
		if !now.Before(deadline) {
			g.dropPending(id)
		}
	}
	expired := false
	for _, m := range g.sortedMembers() {
		if m.joinWait != nil || m.syncWait != nil {
			continue // a waiting request is a live session
		}
		if now.Sub(m.lastSeen) >= m.sessionTimeout {
			c.logger.Info("member session expired", "group", g.id, "member", m.id, "session_timeout", m.sessionTimeout)
			g.removeMember(m, kerr.UnknownMemberID.Code)
			expired = true
		}
	}
	if g.state == StateCompletingRebalance && !now.Before(g.syncDeadline) {
		for _, m := range g.sortedMembers() {
			if !m.synced {
				c.logger.Info("member did not sync in time", "group", g.id, "member", m.id)
				g.removeMember(m, kerr.UnknownMemberID.Code)
				expired = true
			}
		}
	}
	if expired {
		c.membershipChanged(g, now, "member left or expired")
	}
	c.maybeCompleteJoin(g, now)
}

// membershipChanged reacts to a removed member: a rebalance, or Empty.
func (c *Coordinator) membershipChanged(g *group, now time.Time, reason string) {
	switch g.state {
	case StateStable, StateCompletingRebalance:
		if len(g.members) == 0 {
			g.generation++
			g.protocol, g.leader = "", ""
			g.setState(StateEmpty, now)
			if err := c.appendRecords(g.id, []record{{key: groupKey(g.id), value: g.metadataValue()}}); err != nil {
				c.logger.Error("store group metadata", "group", g.id, "err", err)
			}
			return
		}
		c.prepareRebalance(g, now, reason)
	case StatePreparingRebalance:
		c.maybeCompleteJoin(g, now)
	}
}
