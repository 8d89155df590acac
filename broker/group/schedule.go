package group

import (
	"container/heap"
	"time"
)

// Time-driven work is found through two queues, so that what Tick costs
// depends on the groups that have something due, not on how many groups
// exist (an Empty group that only holds offsets costs nothing at rest):
//
//	timers    groups with members, pending member ids or a join or sync
//	          phase, by their earliest deadline (nextDeadline)
//	expiries  Empty groups with something offsets.retention.minutes may
//	          expire, by when it expires (expiryAt); looked at only every
//	          offsets.retention.check.interval.ms
//
// A queued time may be earlier than the group's real deadline (a heartbeat
// moves a session deadline later without touching the queue): the group is
// then visited early, finds nothing due and is queued again at its real
// deadline. It is never later: every change that brings a deadline forward
// or gives a group its first one (Join, Sync, Leave, a wait that ends, a
// commit to an Empty group, loading) requeues the group.

// queueSlot is a group's place in one deadlineQueue.
type queueSlot struct {
	at  time.Time
	pos int // index in the queue + 1; 0 = not queued
}

// deadlineQueue is a min-heap of groups by slot(g).at (ties by group id).
type deadlineQueue struct {
	groups []*group
	slot   func(*group) *queueSlot
}

func (q *deadlineQueue) Len() int { return len(q.groups) }

func (q *deadlineQueue) Less(i, j int) bool {
	a, b := q.slot(q.groups[i]), q.slot(q.groups[j])
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return q.groups[i].id < q.groups[j].id
}

func (q *deadlineQueue) Swap(i, j int) {
	q.groups[i], q.groups[j] = q.groups[j], q.groups[i]
	q.slot(q.groups[i]).pos = i + 1
	q.slot(q.groups[j]).pos = j + 1
}

func (q *deadlineQueue) Push(x any) {
	g := x.(*group)
	q.groups = append(q.groups, g)
	q.slot(g).pos = len(q.groups)
}

func (q *deadlineQueue) Pop() any {
	g := q.groups[len(q.groups)-1]
	q.groups[len(q.groups)-1] = nil
	q.groups = q.groups[:len(q.groups)-1]
	q.slot(g).pos = 0
	return g
}

// set queues g at at, or moves it there.
func (q *deadlineQueue) set(g *group, at time.Time) {
	s := q.slot(g)
	s.at = at
	if s.pos == 0 {
		heap.Push(q, g)
		return
	}
	heap.Fix(q, s.pos-1)
}

// remove takes g out of the queue if it is in.
func (q *deadlineQueue) remove(g *group) {
	if s := q.slot(g); s.pos != 0 {
		heap.Remove(q, s.pos-1)
	}
}

// popDue removes and returns the groups queued at or before now, earliest
// first.
func (q *deadlineQueue) popDue(now time.Time) []*group {
	var due []*group
	for len(q.groups) > 0 && !now.Before(q.slot(q.groups[0]).at) {
		due = append(due, heap.Pop(q).(*group))
	}
	return due
}

// nextDeadline is the earliest time at which tickGroup has something to do
// for g: a pending member id expires, a member's session ends, the join
// phase may end, the sync phase ends. ok is false when nothing is due ever
// (an Empty group without pending ids, or a Stable one whose members all
// wait in a request: their answers requeue it).
func (g *group) nextDeadline(now time.Time) (at time.Time, ok bool) {
	take := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	for _, t := range g.pending {
		take(t)
	}
	for _, m := range g.members {
		if m.joinWait == nil && m.syncWait == nil {
			take(m.lastSeen.Add(m.sessionTimeout))
		}
	}
	switch g.state {
	case StatePreparingRebalance:
		take(g.rebalanceDeadline)
		if g.joinReadyAt.After(now) {
			take(g.joinReadyAt)
		}
	case StateCompletingRebalance:
		take(g.syncDeadline)
	}
	return at, ok
}

// expiryAt is when offsets.retention.minutes may expire something of g: an
// Empty group that had members expires whole retention after it became
// Empty; one that never had members expires offset by offset, retention
// after each commit. ok is false for a group that is not Empty.
func (g *group) expiryAt(retention time.Duration) (at time.Time, ok bool) {
	if g.state != StateEmpty {
		return time.Time{}, false
	}
	if g.protocolType != "" || len(g.offsets) == 0 {
		return g.stateSince.Add(retention), true
	}
	first := true
	var oldest int64
	for _, o := range g.offsets {
		if first || o.commitMs < oldest {
			oldest, first = o.commitMs, false
		}
	}
	return time.UnixMilli(oldest).Add(retention), true
}

// reschedule requeues g after a change: in timers at its next deadline, in
// expiries at its expiry. A group left with nothing (never stored, no
// members, pending ids or offsets) is forgotten.
func (c *Coordinator) reschedule(g *group, now time.Time) {
	if c.groups[g.id] != g {
		return // forgotten already
	}
	if g.state == StateEmpty && len(g.members) == 0 && len(g.pending) == 0 && len(g.offsets) == 0 && g.generation == 0 {
		// A join that never completed (MEMBER_ID_REQUIRED and gone):
		// nothing was stored, nothing to keep.
		c.forget(g)
		return
	}
	if at, ok := g.nextDeadline(now); ok {
		c.timers.set(g, at)
	} else {
		c.timers.remove(g)
	}
	c.rescheduleExpiry(g, now)
}

// rescheduleExpiry requeues g in expiries; an expiry already due is looked
// at by the next check.
func (c *Coordinator) rescheduleExpiry(g *group, now time.Time) {
	at, ok := g.expiryAt(c.opts.OffsetsRetention)
	if !ok {
		c.expiries.remove(g)
		return
	}
	c.expiries.set(g, at)
}

// forget drops g from the coordinator: its map entry, its queues and the
// bytes it held.
func (c *Coordinator) forget(g *group) {
	if c.groups[g.id] != g {
		return
	}
	delete(c.groups, g.id)
	c.timers.remove(g)
	c.expiries.remove(g)
	c.mem.used -= g.footprint()
	g.mem = &memory{} // whatever still touches g no longer counts here
}
