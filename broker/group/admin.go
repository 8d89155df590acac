package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe serves DescribeGroups. An unknown group is reported Dead.
func (c *Coordinator) Describe(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range req.Groups {
		if seen[id] {
			continue
		}
		seen[id] = true
		sg := kmsg.NewDescribeGroupsResponseGroup()
		sg.Group = id
		sg.AuthorizedOperations = -2147483648
		g := c.groups[id]
		switch {
		case id == "":
			sg.ErrorCode = kerr.InvalidGroupID.Code
		case g == nil:
			sg.State = string(StateDead)
		default:
			sg.State, sg.ProtocolType = string(g.state), g.protocolType
			if g.state == StateStable || g.state == StateCompletingRebalance {
				sg.Protocol = g.protocol
			}
			for _, m := range g.sortedMembers() {
				sm := kmsg.NewDescribeGroupsResponseGroupMember()
				sm.MemberID, sm.InstanceID, sm.ClientID, sm.ClientHost = m.id, m.instancePtr(), m.clientID, m.clientHost
				if sg.Protocol != "" {
					sm.ProtocolMetadata = m.metadataFor(g.protocol)
				}
				if g.state == StateStable {
					sm.MemberAssignment = m.assignment
				}
				sg.Members = append(sg.Members, sm)
			}
		}
		resp.Groups = append(resp.Groups, sg)
	}
	return resp
}

// List serves ListGroups (v4: filtered by state, case-insensitively as
// Kafka does).
func (c *Coordinator) List(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	states := map[string]bool{}
	for _, s := range req.StatesFilter {
		states[lower(s)] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.sortedGroups() {
		if len(states) > 0 && !states[lower(string(g.state))] {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, g.protocolType, string(g.state), "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func lower(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch >= 'A' && ch <= 'Z' {
			b[i] = ch + 'a' - 'A'
		}
	}
	return string(b)
}

// Delete serves DeleteGroups: an Empty group's offsets and metadata are
// removed with tombstones.
func (c *Coordinator) Delete(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range req.Groups {
		if seen[id] {
			continue
		}
		seen[id] = true
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		rg.ErrorCode = c.deleteLocked(id)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) deleteLocked(id string) int16 {
	if id == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.groups[id]
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	if g.state != StateEmpty {
		return kerr.NonEmptyGroup.Code
	}
	recs := make([]record, 0, len(g.offsets)+1)
	for tp := range g.offsets {
		recs = append(recs, record{key: offsetKey(id, tp.topic, tp.partition)})
	}
	recs = append(recs, record{key: groupKey(id)})
	if err := c.appendTombstones(id, recs); err != nil {
		c.logger.Error("delete group", "group", id, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	c.forget(g)
	c.logger.Info("deleted group", "group", id)
	return 0
}
