package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"time"
)

// A Nemesis injects one kind of fault and heals it, in the manner of
// Jepsen's start/stop nemesis pairs: Start chooses its target with rng
// (so a seed replays the same choices) and returns what it did; Heal undoes
// whatever Start did and is harmless when nothing is in force. A Nemesis is
// driven by one Schedule at a time.
type Nemesis interface {
	// Name names the fault ("kill", "pause", "partition", ...).
	Name() string
	// Start injects the fault on a target chosen by rng, or on target when
	// it is not empty, and says what it did.
	Start(rng *rand.Rand, target string) (string, error)
	// Heal undoes the fault.
	Heal() error
}

// pick returns target when given, else one of names chosen by rng.
func pick(rng *rand.Rand, names []string, target string) (string, error) {
	if target != "" {
		for _, n := range names {
			if n == target {
				return target, nil
			}
		}
		return "", fmt.Errorf("harness: %q is not one of %v", target, names)
	}
	if len(names) == 0 {
		return "", errors.New("harness: a nemesis with no targets")
	}
	return names[rng.Intn(len(names))], nil
}

func nodeNames(nodes []*Node) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}

func findNode(nodes []*Node, name string) *Node {
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Kill is kill -9 of one of Nodes; Heal starts it again.
type Kill struct {
	Nodes []*Node
	down  []*Node
}

// Name implements Nemesis.
func (k *Kill) Name() string { return "kill" }

// Start implements Nemesis.
func (k *Kill) Start(rng *rand.Rand, target string) (string, error) {
	name, err := pick(rng, nodeNames(k.Nodes), target)
	if err != nil {
		return "", err
	}
	n := findNode(k.Nodes, name)
	if err := n.Kill(); err != nil {
		return "", err
	}
	k.down = append(k.down, n)
	return name, nil
}

// Heal implements Nemesis.
func (k *Kill) Heal() error {
	var errs []error
	for _, n := range k.down {
		if !n.Running() {
			errs = append(errs, n.Start())
		}
	}
	k.down = nil
	return errors.Join(errs...)
}

// Pause is SIGSTOP of one of Nodes; Heal sends SIGCONT.
type Pause struct {
	Nodes  []*Node
	paused []*Node
}

// Name implements Nemesis.
func (p *Pause) Name() string { return "pause" }

// Start implements Nemesis.
func (p *Pause) Start(rng *rand.Rand, target string) (string, error) {
	name, err := pick(rng, nodeNames(p.Nodes), target)
	if err != nil {
		return "", err
	}
	n := findNode(p.Nodes, name)
	if err := n.Pause(); err != nil {
		return "", err
	}
	p.paused = append(p.paused, n)
	return name, nil
}

// Heal implements Nemesis.
func (p *Pause) Heal() error {
	var errs []error
	for _, n := range p.paused {
		if n.Paused() {
			errs = append(errs, n.Resume())
		}
	}
	p.paused = nil
	return errors.Join(errs...)
}

// Isolate cuts one of Nodes off from every other address in Peers (both
// ways, or only its outgoing packets when OneWay), through Net.
type Isolate struct {
	Net    *Network
	Nodes  []*Node
	Peers  []string // addresses, the test's ClientAddr among them if clients are to be cut too
	OneWay bool
}

// Name implements Nemesis.
func (p *Isolate) Name() string {
	if p.OneWay {
		return "cut-out"
	}
	return "partition"
}

// Start implements Nemesis.
func (p *Isolate) Start(rng *rand.Rand, target string) (string, error) {
	name, err := pick(rng, nodeNames(p.Nodes), target)
	if err != nil {
		return "", err
	}
	n := findNode(p.Nodes, name)
	var others []string
	for _, a := range p.Peers {
		if a != n.Addr {
			others = append(others, a)
		}
	}
	if p.OneWay {
		for _, o := range others {
			if err := p.Net.Cut(n.Addr, o); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%s (%s) -> %v dropped", name, n.Addr, others), nil
	}
	if err := p.Net.Partition([]string{n.Addr}, others); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (%s) <-/-> %v", name, n.Addr, others), nil
}

// Heal implements Nemesis.
func (p *Isolate) Heal() error { return p.Net.Heal() }

// Lose drops Percent of the packets to and from one of Nodes.
type Lose struct {
	Net     *Network
	Nodes   []*Node
	Percent int
}

// Name implements Nemesis.
func (l *Lose) Name() string { return "lossy" }

// Start implements Nemesis.
func (l *Lose) Start(rng *rand.Rand, target string) (string, error) {
	name, err := pick(rng, nodeNames(l.Nodes), target)
	if err != nil {
		return "", err
	}
	n := findNode(l.Nodes, name)
	if err := l.Net.Lossy(n.Addr, l.Percent); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (%s) loses %d%%", name, n.Addr, l.Percent), nil
}

// Heal implements Nemesis.
func (l *Lose) Heal() error { return l.Net.Heal() }

// Slow delays the links through one of Proxies (named by the key) by Delay.
type Slow struct {
	Proxies map[string]*Proxy
	Delay   time.Duration
	slowed  []*Proxy
}

// Name implements Nemesis.
func (s *Slow) Name() string { return "slow" }

// Start implements Nemesis.
func (s *Slow) Start(rng *rand.Rand, target string) (string, error) {
	names := make([]string, 0, len(s.Proxies))
	for k := range s.Proxies {
		names = append(names, k)
	}
	slices.Sort(names)
	name, err := pick(rng, names, target)
	if err != nil {
		return "", err
	}
	p := s.Proxies[name]
	p.SetDelay(s.Delay)
	s.slowed = append(s.slowed, p)
	return fmt.Sprintf("%s delayed %s each way", name, s.Delay), nil
}

// Heal implements Nemesis.
func (s *Slow) Heal() error {
	for _, p := range s.slowed {
		p.SetDelay(0)
	}
	s.slowed = nil
	return nil
}

// Full fills one of Disks, leaving nothing free; Heal frees it.
type Full struct {
	Disks  map[string]*Disk
	filled []*Disk
}

// Name implements Nemesis.
func (f *Full) Name() string { return "disk-full" }

// Start implements Nemesis.
func (f *Full) Start(rng *rand.Rand, target string) (string, error) {
	names := make([]string, 0, len(f.Disks))
	for k := range f.Disks {
		names = append(names, k)
	}
	slices.Sort(names)
	name, err := pick(rng, names, target)
	if err != nil {
		return "", err
	}
	d := f.Disks[name]
	if err := d.Fill(0); err != nil {
		return "", err
	}
	f.filled = append(f.filled, d)
	return fmt.Sprintf("%s full (%d bytes)", name, d.Size), nil
}

// Heal implements Nemesis.
func (f *Full) Heal() error {
	var errs []error
	for _, d := range f.filled {
		errs = append(errs, d.Release())
	}
	f.filled = nil
	return errors.Join(errs...)
}

// SlowDisk slows one of Disks (loop disks) for the node of the same name
// in Nodes: its writes to the disk are limited to IOPS a second
// (Disk.Throttle); Heal lifts the limit.
type SlowDisk struct {
	Disks  map[string]*Disk
	Nodes  []*Node
	IOPS   int
	slowed []*Disk
}

// Name implements Nemesis.
func (s *SlowDisk) Name() string { return "slow-disk" }

// Start implements Nemesis.
func (s *SlowDisk) Start(rng *rand.Rand, target string) (string, error) {
	names := make([]string, 0, len(s.Disks))
	for k := range s.Disks {
		names = append(names, k)
	}
	slices.Sort(names)
	name, err := pick(rng, names, target)
	if err != nil {
		return "", err
	}
	n := findNode(s.Nodes, name)
	if n == nil || n.PID() <= 0 {
		return "", fmt.Errorf("harness: slow-disk: node %s is not running", name)
	}
	d := s.Disks[name]
	if err := d.Throttle([]int{n.PID()}, s.IOPS); err != nil {
		return "", err
	}
	s.slowed = append(s.slowed, d)
	return fmt.Sprintf("%s's disk: %d writes/s", name, s.IOPS), nil
}

// Heal implements Nemesis.
func (s *SlowDisk) Heal() error {
	var errs []error
	for _, d := range s.slowed {
		errs = append(errs, d.Unthrottle())
	}
	s.slowed = nil
	return errors.Join(errs...)
}

// ClockJump moves an injected clock forward by By: for code that takes a
// clock (libfaketime cannot move a Go binary's clock; see the package doc).
// Heal does nothing: time does not go back.
type ClockJump struct {
	By      time.Duration
	Advance func(time.Duration)
}

// Name implements Nemesis.
func (c *ClockJump) Name() string { return "clock-jump" }

// Start implements Nemesis.
func (c *ClockJump) Start(*rand.Rand, string) (string, error) {
	c.Advance(c.By)
	return fmt.Sprintf("clock +%s", c.By), nil
}

// Heal implements Nemesis.
func (c *ClockJump) Heal() error { return nil }

// Aimed is Nemesis on the target Target finds when the fault starts (the
// node that leads now, say) instead of one drawn at random, under its own
// name As ("kill-leader") so a schedule can hold both.
type Aimed struct {
	As      string
	Nemesis Nemesis
	Target  func() (string, error)
}

// Name implements Nemesis.
func (a *Aimed) Name() string { return a.As }

// Start implements Nemesis; a target given by the schedule wins.
func (a *Aimed) Start(rng *rand.Rand, target string) (string, error) {
	if target == "" {
		t, err := a.Target()
		if err != nil {
			return "", fmt.Errorf("harness: %s: no target: %w", a.As, err)
		}
		target = t
	}
	return a.Nemesis.Start(rng, target)
}

// Heal implements Nemesis.
func (a *Aimed) Heal() error { return a.Nemesis.Heal() }

// Step is one fault of a schedule: at At (since the schedule began) Nemesis
// starts (on Target, or a target it picks), and Hold later it heals.
type Step struct {
	At      time.Duration `json:"at"`
	Hold    time.Duration `json:"hold"`
	Nemesis string        `json:"nemesis"`
	Target  string        `json:"target,omitempty"`
}

func (s Step) String() string {
	t := s.Target
	if t == "" {
		t = "(random)"
	}
	return fmt.Sprintf("%8s +%-7s %-11s %s", s.At.Truncate(time.Millisecond), s.Hold.Truncate(time.Millisecond), s.Nemesis, t)
}

// RandomSchedule lays faults drawn from names over total: a quiet gap, a fault
// held for a while, healed, a gap, ... Gaps and holds are drawn around
// interval. The first len(names) faults are each name once, in a random
// order, so even a short run exercises every nemesis; the rest are drawn
// at random. The same rng state gives the same schedule.
func RandomSchedule(rng *rand.Rand, total, interval time.Duration, names ...string) []Step {
	var steps []Step
	if len(names) == 0 || interval <= 0 {
		return nil
	}
	first := append([]string(nil), names...)
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	at := time.Duration(0)
	for {
		gap := interval/2 + time.Duration(rng.Int63n(int64(interval)))
		hold := interval/2 + time.Duration(rng.Int63n(int64(interval/2)+1))
		if at+gap+hold > total {
			return steps
		}
		at += gap
		name := names[rng.Intn(len(names))]
		if len(steps) < len(first) {
			name = first[len(steps)]
		}
		steps = append(steps, Step{At: at, Hold: hold, Nemesis: name})
		at += hold
	}
}

// Schedule plays steps with the nemeses named in them, logging each fault and
// heal to events. Steps must not overlap (RandomSchedule's never do).
type Schedule struct {
	Steps   []Step
	Nemeses []Nemesis
	Rand    *rand.Rand
	Events  *Events

	mu   sync.Mutex // guards errs
	errs []error
}

// ErrSchedule wraps a nemesis that failed to start or heal.
var ErrSchedule = errors.New("harness: schedule")

// Play runs the steps in order until they are done or ctx ends, then heals
// every nemesis. It returns the errors of nemeses that failed.
func (s *Schedule) Play(ctx context.Context) error {
	byName := map[string]Nemesis{}
	for _, n := range s.Nemeses {
		byName[n.Name()] = n
	}
	begin := time.Now()
	s.Events.add("schedule", "begins", fmt.Sprintf("%d faults planned", len(s.Steps)))
	defer s.healAll()
	for _, st := range s.Steps {
		n, ok := byName[st.Nemesis]
		if !ok {
			s.fail(fmt.Errorf("%w: no nemesis %q", ErrSchedule, st.Nemesis))
			continue
		}
		if !waitUntil(ctx, begin.Add(st.At)) {
			break
		}
		what, err := n.Start(s.Rand, st.Target)
		if err != nil {
			s.fail(fmt.Errorf("%w: %s: %v", ErrSchedule, st.Nemesis, err))
			s.Events.add(st.Nemesis, "failed", err.Error())
			continue
		}
		s.Events.add(st.Nemesis, "fault", what)
		ok = waitUntil(ctx, time.Now().Add(st.Hold))
		if err := n.Heal(); err != nil {
			s.fail(fmt.Errorf("%w: heal %s: %v", ErrSchedule, st.Nemesis, err))
		}
		s.Events.add(st.Nemesis, "healed", "")
		if !ok {
			break
		}
	}
	return s.Err()
}

func (s *Schedule) healAll() {
	defer s.Events.add("schedule", "ends", "every nemesis healed")
	for _, n := range s.Nemeses {
		if err := n.Heal(); err != nil {
			s.fail(fmt.Errorf("%w: final heal %s: %v", ErrSchedule, n.Name(), err))
		}
	}
}

func (s *Schedule) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

// Err is what went wrong so far.
func (s *Schedule) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// String is the steps one a line.
func (s *Schedule) String() string {
	var b strings.Builder
	for _, st := range s.Steps {
		b.WriteString(st.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// waitUntil waits for the deadline (a schedule's timing is the point, not a
// wait for some condition); it reports false if ctx ended first.
func waitUntil(ctx context.Context, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ClockStep steps the clock of one of Clocks by By (negative: back), the
// target given by the schedule or found by Target when the fault starts
// (the leading scheduler), under its own name As ("clock-back"); Heal
// steps it by -By, as NTP puts a clock right: a second jump, the other way.
type ClockStep struct {
	As     string
	By     time.Duration
	Clocks map[string]*Stepped
	Target func() (string, error)
	moved  []*Stepped
}

// Name implements Nemesis.
func (c *ClockStep) Name() string { return c.As }

// Start implements Nemesis.
func (c *ClockStep) Start(rng *rand.Rand, target string) (string, error) {
	if target == "" && c.Target != nil {
		t, err := c.Target()
		if err != nil {
			return "", fmt.Errorf("harness: %s: no target: %w", c.As, err)
		}
		target = t
	}
	names := make([]string, 0, len(c.Clocks))
	for k := range c.Clocks {
		names = append(names, k)
	}
	slices.Sort(names)
	name, err := pick(rng, names, target)
	if err != nil {
		return "", err
	}
	clk := c.Clocks[name]
	clk.Step(c.By)
	c.moved = append(c.moved, clk)
	return fmt.Sprintf("%s's clock %+v (now %+v off)", name, c.By, clk.Offset()), nil
}

// Heal implements Nemesis.
func (c *ClockStep) Heal() error {
	for _, clk := range c.moved {
		clk.Step(-c.By)
	}
	c.moved = nil
	return nil
}
