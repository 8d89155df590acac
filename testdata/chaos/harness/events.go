package harness

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Event is one thing the harness did to the system under test: a process
// started or killed, a partition made or healed, a disk filled.
type Event struct {
	// At is when it happened, as time since the run began.
	At time.Duration `json:"at"`
	// Time is the wall-clock time, to match against process logs.
	Time time.Time `json:"time"`
	// Target names the node, link or disk it was done to.
	Target string `json:"target"`
	// What is the verb: started, killed, paused, partitioned, healed, ...
	What string `json:"what"`
	// Detail says more (the signal, the rule, the size).
	Detail string `json:"detail,omitempty"`
}

func (e Event) String() string {
	s := fmt.Sprintf("%9s  %-10s %-14s", e.At.Truncate(time.Millisecond), e.Target, e.What)
	if e.Detail != "" {
		s += " " + e.Detail
	}
	return s
}

// Events is the run's ordered log of events. The zero value is not usable;
// a Run makes one. Safe for concurrent use.
type Events struct {
	begin time.Time

	mu   sync.Mutex // guards list
	list []Event
}

func newEvents(begin time.Time) *Events { return &Events{begin: begin} }

func (e *Events) add(target, what, detail string) {
	if e == nil {
		return
	}
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, Event{At: now.Sub(e.begin), Time: now.UTC(), Target: target, What: what, Detail: detail})
}

// List returns a copy of the events so far.
func (e *Events) List() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.list...)
}

// String is the events one a line.
func (e *Events) String() string {
	var b strings.Builder
	for _, ev := range e.List() {
		b.WriteString(ev.String())
		b.WriteByte('\n')
	}
	return b.String()
}
