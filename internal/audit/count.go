package audit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/writers"
)

// Tier names a hop of the data's path.
type Tier string

// The tiers.
const (
	TierProducer Tier = "producer"
	// TierBroker is the records a partition leader appended, by record
	// time; TierBrokerClock the same records by the broker's clock at the
	// append (shown, never balanced: its windows are not the producers').
	TierBroker      Tier = "broker"
	TierBrokerClock Tier = "broker-clock"
	// TierMirror is the records `sluice mirror` copied, counted in the
	// target transaction that holds the copies.
	TierMirror Tier = "mirror"
	TierLoad   Tier = "load"
	// TierSourceBroker is the broker tier of the source cluster of a
	// mirror (`sluice audit --source-bootstrap`: its broker counts
	// relabelled, so they do not add to the target's).
	TierSourceBroker      Tier = "source-broker"
	TierSourceBrokerClock Tier = "source-broker-clock"
)

// informational reports tiers shown beside the books but never balanced.
func informational(t Tier) bool { return t == TierBrokerClock || t == TierSourceBrokerClock }

// tierRank orders the tiers along the data's path.
func tierRank(t Tier) int {
	switch t {
	case TierProducer:
		return 0
	case TierSourceBroker:
		return 1
	case TierSourceBrokerClock:
		return 2
	case TierMirror:
		return 3
	case TierBroker:
		return 4
	case TierBrokerClock:
		return 5
	case TierLoad:
		return 6
	}
	return 7
}

// Topic is the audit topic's name.
const Topic = "_audit"

// DefaultWindow is the window width when none is given.
const DefaultWindow = 10 * time.Minute

// FormatVersion is the version of the records written.
const FormatVersion = 1

// MaxCells bounds the (topic, window) cells one Counter holds: a record for
// a new cell beyond it is not counted but counted in Dropped (and Flush
// reports it), so a producer of wild timestamps cannot grow it unbounded.
// Published cells of windows that ended more than Retain ago are let go
// (Reporter.Flush), so the cells of a long-lived producer do not reach it
// by time passing.
const MaxCells = 1 << 16

// Retain is how long after its window's end a published cell stays in
// memory. A record for a window let go is counted in a new cell under a
// key of its own (the origin with an eviction epoch, "<origin>~<epoch>"),
// so it never replaces the count already published.
const Retain = time.Hour

// ErrDropped reports records a Counter could not count (MaxCells).
var ErrDropped = errors.New("audit: records not counted: too many windows")

// Count is one (tier, topic, window, origin)'s cumulative count: the value
// of an _audit record.
type Count struct {
	Version int    `json:"version"`
	Tier    Tier   `json:"tier"`
	Topic   string `json:"topic"`
	// WindowStart is the window's start in Unix ms; -1: records without a
	// timestamp.
	WindowStart int64  `json:"window_start_ms"`
	WindowMs    int64  `json:"window_ms"`
	Origin      string `json:"origin"`
	Messages    int64  `json:"messages"`
	Bytes       int64  `json:"bytes"`
	Malformed   int64  `json:"malformed,omitempty"`
	// Filtered and DeadLettered are the load tier's records not loaded by
	// the job's where and on_bad_record: dead_letter.
	Filtered     int64     `json:"filtered,omitempty"`
	DeadLettered int64     `json:"dead_lettered,omitempty"`
	Updated      time.Time `json:"updated"`
}

// Key is the record key compaction keeps the latest count of.
func (c Count) Key() string {
	return string(c.Tier) + "/" + c.Topic + "/" + strconv.FormatInt(c.WindowStart, 10) + "/" + c.Origin
}

// NewOrigin names a counting instance: host/pid/random, unique per process.
func NewOrigin() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// WindowStart returns the start (Unix ms) of the window of width w holding
// a record of time ts, or -1 for a record without a timestamp.
func WindowStart(ts time.Time, w time.Duration) int64 {
	return writers.AuditStart(ts, w.Milliseconds()) // one rule for every tier
}

type cellKey struct {
	topic string
	start int64
}

type cell struct {
	messages, bytes, malformed int64
	dirty                      bool
	// epoch > 0: the cell's window may have been let go before (evict);
	// its key's origin carries the epoch.
	epoch int
}

// Counter counts records of one tier and origin per (topic, window). It is
// safe for concurrent use.
type Counter struct {
	tier   Tier
	origin string
	window time.Duration
	now    func() time.Time

	mu sync.Mutex
	// Guarded by mu.
	cells   map[cellKey]*cell
	dropped int64
	// max is MaxCells (a test lowers it).
	max int
	// evictedBefore: a window starting before it (Unix ms) may have been
	// let go; epoch counts the evict calls that let cells go.
	evictedBefore int64
	epoch         int
}

// NewCounter returns a counter of tier for origin ("" is NewOrigin()) in
// windows of width window (0 is DefaultWindow; it must be whole
// milliseconds).
func NewCounter(tier Tier, origin string, window time.Duration) (*Counter, error) {
	if window == 0 {
		window = DefaultWindow
	}
	if window < time.Millisecond || window%time.Millisecond != 0 {
		return nil, fmt.Errorf("audit: window %s: must be whole milliseconds, at least 1ms", window)
	}
	if origin == "" {
		origin = NewOrigin()
	}
	return &Counter{tier: tier, origin: origin, window: window, now: time.Now, cells: map[cellKey]*cell{}, max: MaxCells}, nil
}

// Origin returns the counter's origin.
func (c *Counter) Origin() string { return c.origin }

// Window returns the counter's window width.
func (c *Counter) Window() time.Duration { return c.window }

// Add counts one record of topic with timestamp ts and size bytes.
func (c *Counter) Add(topic string, ts time.Time, bytes int64) { c.add(topic, ts, 1, bytes, false) }

// AddN counts n records of topic in the window of ts, bytes in all.
func (c *Counter) AddN(topic string, ts time.Time, n, bytes int64) { c.add(topic, ts, n, bytes, false) }

// AddMalformed counts one record of topic the tier could not read.
func (c *Counter) AddMalformed(topic string, ts time.Time) { c.add(topic, ts, 1, 0, true) }

func (c *Counter) add(topic string, ts time.Time, n, bytes int64, malformed bool) {
	k := cellKey{topic, WindowStart(ts, c.window)}
	c.mu.Lock()
	defer c.mu.Unlock()
	ce := c.cells[k]
	if ce == nil {
		if len(c.cells) >= c.max {
			c.dropped += n
			return
		}
		ce = &cell{}
		if k.start >= 0 && k.start < c.evictedBefore {
			ce.epoch = c.epoch // its earlier count (if any) is published under another key
		}
		c.cells[k] = ce
	}
	if malformed {
		ce.malformed += n
	} else {
		ce.messages += n
		ce.bytes += bytes
	}
	ce.dirty = true
}

// Dropped returns how many records were not counted (MaxCells).
func (c *Counter) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

// Counts returns the cumulative count of every cell in memory (see
// Retain), sorted by topic and window.
func (c *Counter) Counts() []Count { return c.collect(false) }

// changed returns the cells counted into since the last changed call
// (whose counts are then taken as published: call markDirty on failure).
func (c *Counter) changed() []Count { return c.collect(true) }

func (c *Counter) collect(onlyDirty bool) []Count {
	now := c.now().UTC()
	c.mu.Lock()
	out := make([]Count, 0, len(c.cells))
	for k, ce := range c.cells {
		if onlyDirty && !ce.dirty {
			continue
		}
		if onlyDirty {
			ce.dirty = false
		}
		origin := c.origin
		if ce.epoch > 0 {
			origin += "~" + strconv.Itoa(ce.epoch)
		}
		out = append(out, Count{Version: FormatVersion, Tier: c.tier, Topic: k.topic, WindowStart: k.start,
			WindowMs: c.window.Milliseconds(), Origin: origin, Messages: ce.messages, Bytes: ce.bytes,
			Malformed: ce.malformed, Updated: now})
	}
	c.mu.Unlock()
	sortCounts(out)
	return out
}

// evict lets go of the published cells whose window ended more than Retain
// ago (call it after a publish succeeded). It returns how many it let go.
func (c *Counter) evict() int {
	cutoff := c.now().Add(-Retain).UnixMilli()
	w := c.window.Milliseconds()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, ce := range c.cells {
		if !ce.dirty && k.start >= 0 && k.start+w <= cutoff {
			delete(c.cells, k)
			n++
		}
	}
	if n > 0 {
		c.epoch++
		c.evictedBefore = max(c.evictedBefore, cutoff)
	}
	return n
}

// markDirty marks cells of counts as not published.
func (c *Counter) markDirty(counts []Count) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range counts {
		if ce := c.cells[cellKey{n.Topic, n.WindowStart}]; ce != nil {
			ce.dirty = true
		}
	}
}

func sortCounts(cs []Count) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.WindowStart != b.WindowStart {
			return a.WindowStart < b.WindowStart
		}
		if a.Tier != b.Tier {
			return a.Tier < b.Tier
		}
		return a.Origin < b.Origin
	})
}
