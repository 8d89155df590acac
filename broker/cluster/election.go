package cluster

import "slices"

// liveness is what the controller knows of the brokers when it decides.
type liveness struct {
	live         map[int32]bool // registered in /brokers/ids
	shuttingDown map[int32]bool // asked for a controlled shutdown (and still live)
}

// eligible reports whether b may be made leader: live and not shutting down.
func (l liveness) eligible(b int32) bool { return l.live[b] && !l.shuttingDown[b] }

// decision says how decide may move a partition's leader.
type decision struct {
	unclean   bool // unclean.leader.election.enable: a live non-ISR replica may lead when no ISR member is live
	preferred bool // move the leadership to the preferred replica when it is eligible and in the ISR
	// (never while the partition is moving: its first replica is then a target
	// replica that may still be catching up, and the move picks the leader)
}

// decide returns the state the controller should write for s given the
// brokers' liveness, and whether it differs from s. The rules, in order:
//
//  1. Leader dead or none: the first replica in assignment order that is
//     eligible and in the ISR leads; else, with unclean election, the first
//     eligible replica leads with ISR = {itself}; else the partition is
//     offline (leader -1). Dead members leave the ISR, except that an ISR
//     with no live member is kept as it is ("last replica standing", as
//     Kafka does): the replicas in it hold every committed record, so the
//     first of them to return may lead again without loss.
//  2. Leader shutting down (controlled shutdown): the first other eligible
//     ISR member leads; with none the leader stays (the partition would go
//     offline otherwise).
//  3. Preferred election: the first replica of the assignment leads when it
//     is eligible and in the ISR.
//  4. A live leader's ISR loses its dead members and the members shutting
//     down (they are about to stop; acks=all must not wait for them).
//
// A leader that is not an assigned replica any more (a cancelled move
// took it out) counts as dead, and ISR members that are not assigned
// replicas leave the ISR.
//
// Each change of leader, to -1 included, bumps the leader epoch by one; a
// change of ISR alone does not.
func decide(s PartitionState, l liveness, d decision) (PartitionState, bool) {
	next := s
	next.ISR = slices.Clone(s.ISR)
	next.ISR = slices.DeleteFunc(next.ISR, func(b int32) bool { return !slices.Contains(s.Replicas, b) })
	inISR := func(b int32) bool { return slices.Contains(next.ISR, b) }
	pick := func(ok func(int32) bool) int32 {
		for _, r := range s.Replicas {
			if ok(r) {
				return r
			}
		}
		return -1
	}
	setLeader := func(b int32) {
		if b != next.Leader {
			next.Leader = b
			next.LeaderEpoch++
		}
	}
	switch {
	case s.Leader < 0 || !l.live[s.Leader] || !slices.Contains(s.Replicas, s.Leader):
		if c := pick(func(b int32) bool { return l.eligible(b) && inISR(b) }); c >= 0 {
			setLeader(c)
		} else if c := pick(l.eligible); d.unclean && c >= 0 {
			setLeader(c)
			next.ISR = []int32{c}
		} else {
			setLeader(-1)
		}
	case l.shuttingDown[s.Leader]:
		if c := pick(func(b int32) bool { return b != s.Leader && l.eligible(b) && inISR(b) }); c >= 0 {
			setLeader(c)
		}
	case d.preferred && !s.moving() && len(s.Replicas) > 0 && s.Replicas[0] != s.Leader && l.eligible(s.Replicas[0]) && inISR(s.Replicas[0]):
		setLeader(s.Replicas[0])
	}
	if next.Leader >= 0 {
		next.ISR = slices.DeleteFunc(next.ISR, func(b int32) bool {
			return b != next.Leader && (!l.live[b] || l.shuttingDown[b])
		})
	} else if slices.ContainsFunc(next.ISR, func(b int32) bool { return l.live[b] }) {
		next.ISR = slices.DeleteFunc(next.ISR, func(b int32) bool { return !l.live[b] })
	}
	return next, next.Leader != s.Leader || !slices.Equal(next.ISR, s.ISR)
}

// initialState is the state of a new partition: the first eligible
// replica leads, every live replica is in the ISR (a new partition is
// empty, so all are in sync), leader epoch 0. ok is false when no replica
// is live: the partition waits, without a state, for one to register.
func initialState(topic string, p int32, replicas []int32, l liveness) (PartitionState, bool) {
	s := PartitionState{Topic: topic, Partition: p, Leader: -1, Replicas: replicas, ISR: []int32{}}
	for _, r := range replicas {
		if l.live[r] {
			s.ISR = append(s.ISR, r)
			if s.Leader < 0 && !l.shuttingDown[r] {
				s.Leader = r
			}
		}
	}
	if s.Leader < 0 && len(s.ISR) > 0 {
		s.Leader = s.ISR[0]
	}
	return s, len(s.ISR) > 0
}
