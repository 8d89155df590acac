package audit

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// States of a window.
const (
	StateBalanced = "balanced" // every tier holds the producer tier's count
	StatePending  = "pending"  // not balanced yet, younger than the lateness
	StateMissing  = "missing"  // a tier holds fewer records, older than the lateness
	StateExtra    = "extra"    // a tier holds more records than the producers acknowledged
	// StateClock is a window only a broker's clock counted (records
	// appended then, whose record times are in other windows): shown,
	// not balanced.
	StateClock = "clock-only"
)

// Options of Balance.
type Options struct {
	// Window is the width balanced (0: DefaultWindow); every count's window
	// must divide it.
	Window time.Duration
	// Lateness: a window not balanced before its end plus Lateness is
	// pending, not missing.
	Lateness time.Duration
	// Now is the time the lateness is judged against.
	Now time.Time
	// Since leaves out the windows that ended before it (zero: none).
	Since time.Time
	// Topic restricts the report to one topic ("": every topic with
	// producer counts).
	Topic string
}

// TierCount is one tier's sum over origins of a window.
type TierCount struct {
	Messages     int64 `json:"messages"`
	Bytes        int64 `json:"bytes"`
	Malformed    int64 `json:"malformed,omitempty"`
	Filtered     int64 `json:"filtered,omitempty"`
	DeadLettered int64 `json:"dead_lettered,omitempty"`
	Origins      int   `json:"origins"`
}

// accounted is what the tier did with records as the producers meant:
// loaded, or filtered by the job's where.
func (t TierCount) accounted() int64 { return t.Messages + t.Filtered }

// Accounted is a count's records as the producers meant them (loaded, or
// filtered by the job's where): what balances the producer tier's Messages.
func (c Count) Accounted() int64 { return c.Messages + c.Filtered }

// Window is one (topic, window)'s line of the books.
type Window struct {
	Topic string    `json:"topic"`
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Untimestamped: the records without a timestamp (no Start, End).
	Untimestamped bool               `json:"untimestamped,omitempty"`
	Tiers         map[Tier]TierCount `json:"tiers"`
	// Diff is each tier's count (the load tier's loaded + filtered) minus
	// the producer tier's.
	Diff    map[Tier]int64 `json:"diff"`
	State   string         `json:"state"`
	Reasons []string       `json:"reasons,omitempty"`
}

// Report is the books of a Balance.
type Report struct {
	Window   time.Duration `json:"-"`
	Windows  []Window      `json:"windows"`
	Skips    []Skip        `json:"skipped_ranges,omitempty"`
	Balanced int           `json:"balanced"`
	Pending  int           `json:"pending"`
	// Unbalanced counts the windows missing or extra: the command fails.
	Unbalanced int `json:"unbalanced"`
	// Latest is, per tier and topic, the start of the newest balanced
	// window; Behind per tier and topic the windows not balanced past the
	// lateness (the metrics).
	Latest map[Tier]map[string]time.Time `json:"latest_balanced"`
	Behind map[Tier]map[string]int       `json:"unbalanced_by_tier"`
	Notes  []string                      `json:"notes,omitempty"`
}

type rowKey struct {
	topic string
	start int64
}

// Relabel returns counts with the broker tiers renamed to the source
// cluster's (TierSourceBroker, TierSourceBrokerClock) and every other tier
// but the producer's dropped: the tiers a mirror's source cluster holds
// (`sluice audit --source-bootstrap`).
func Relabel(counts []Count) []Count {
	out := make([]Count, 0, len(counts))
	for _, c := range counts {
		switch c.Tier {
		case TierProducer:
		case TierBroker:
			c.Tier = TierSourceBroker
		case TierBrokerClock:
			c.Tier = TierSourceBrokerClock
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

// Balance sums the counts of every tier per (topic, window) and compares
// each tier with the producer tier. load is the load tier (nil: none).
func Balance(counts []Count, load *Load, opts Options) (*Report, error) {
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	wms := opts.Window.Milliseconds()
	if wms <= 0 || opts.Window%time.Millisecond != 0 {
		return nil, fmt.Errorf("audit: window %s: must be whole milliseconds", opts.Window)
	}
	all := append([]Count(nil), counts...)
	rep := &Report{Window: opts.Window, Latest: map[Tier]map[string]time.Time{}, Behind: map[Tier]map[string]int{}}
	if load != nil {
		all = append(all, load.Counts...)
		for _, s := range load.Skips {
			if opts.Topic == "" || s.Topic == opts.Topic {
				rep.Skips = append(rep.Skips, s)
			}
		}
		if load.Uncounted > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%d loaded records are in manifests written before the audit: not counted", load.Uncounted))
		}
	}
	rows := map[rowKey]*Window{}
	origins := map[rowKey]map[Tier]map[string]bool{}
	tiersOf := map[string]map[Tier]bool{} // the tiers that counted a topic
	updated := map[string]time.Time{}     // newest count of a topic's untimestamped records
	for _, c := range all {
		if opts.Topic != "" && c.Topic != opts.Topic {
			continue
		}
		if c.WindowMs <= 0 || wms%c.WindowMs != 0 {
			return nil, fmt.Errorf("audit: %s counts of %s come in windows of %s, which do not divide the audit window %s: audit with a multiple of it (--window)",
				c.Tier, c.Topic, time.Duration(c.WindowMs)*time.Millisecond, opts.Window)
		}
		start := c.WindowStart
		if start >= 0 {
			start -= start % wms
		}
		k := rowKey{c.Topic, start}
		w := rows[k]
		if w == nil {
			w = &Window{Topic: c.Topic, Tiers: map[Tier]TierCount{}, Diff: map[Tier]int64{}, Untimestamped: start < 0}
			if start >= 0 {
				w.Start = time.UnixMilli(start).UTC()
				w.End = w.Start.Add(opts.Window)
			}
			rows[k] = w
			origins[k] = map[Tier]map[string]bool{}
		}
		tc := w.Tiers[c.Tier]
		tc.Messages += c.Messages
		tc.Bytes += c.Bytes
		tc.Malformed += c.Malformed
		tc.Filtered += c.Filtered
		tc.DeadLettered += c.DeadLettered
		if origins[k][c.Tier] == nil {
			origins[k][c.Tier] = map[string]bool{}
		}
		origins[k][c.Tier][c.Origin] = true
		tc.Origins = len(origins[k][c.Tier])
		w.Tiers[c.Tier] = tc
		if tiersOf[c.Topic] == nil {
			tiersOf[c.Topic] = map[Tier]bool{}
		}
		tiersOf[c.Topic][c.Tier] = true
		if start < 0 && c.Updated.After(updated[c.Topic]) {
			updated[c.Topic] = c.Updated
		}
	}
	if load != nil {
		for _, topic := range load.Topics {
			if tiersOf[topic] != nil {
				tiersOf[topic][TierLoad] = true
			}
		}
	}
	for topic, tiers := range tiersOf {
		if !tiers[TierProducer] {
			rep.Notes = append(rep.Notes, fmt.Sprintf("topic %s: no producer counts (its producers do not publish to %s): not balanced", topic, Topic))
		}
	}
	var out []Window
	for _, w := range rows {
		if !tiersOf[w.Topic][TierProducer] {
			continue
		}
		if !w.Untimestamped && !opts.Since.IsZero() && !w.End.After(opts.Since) {
			continue
		}
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		if out[i].Untimestamped != out[j].Untimestamped {
			return out[i].Untimestamped
		}
		return out[i].Start.Before(out[j].Start)
	})
	skipped := map[string]int64{}
	for _, s := range rep.Skips {
		skipped[s.Topic] += s.Records()
	}
	missing := map[string]int64{}
	for i := range out {
		w := &out[i]
		due := w.End.Add(opts.Lateness)
		if w.Untimestamped {
			due = updated[w.Topic].Add(opts.Lateness)
		}
		judge(w, tiersOf[w.Topic], rep, opts.Now.Before(due), skipped[w.Topic] > 0)
		if d := w.Diff[TierLoad]; d < 0 && w.State == StateMissing {
			missing[w.Topic] -= d
		}
	}
	rep.Windows = out
	for topic, n := range skipped {
		rep.Notes = append(rep.Notes, fmt.Sprintf("topic %s: %d records missing from the load tier past the lateness; %d offsets were deleted by retention before loading (%s)",
			topic, missing[topic], n, skipsOf(rep.Skips, topic)))
	}
	sort.Strings(rep.Notes)
	return rep, nil
}

// balancedTier reports whether a tier other than the informational ones
// counted the window.
func balancedTier(tiers map[Tier]TierCount) bool {
	for t := range tiers {
		if !informational(t) {
			return true
		}
	}
	return false
}

// judge sets w's Diff, State and Reasons and adds it to rep's sums.
func judge(w *Window, tiers map[Tier]bool, rep *Report, young, skips bool) {
	if !balancedTier(w.Tiers) {
		w.State = StateClock
		return
	}
	p := w.Tiers[TierProducer].Messages
	var names []Tier
	for t := range tiers {
		if t != TierProducer && !informational(t) {
			names = append(names, t)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		return tierRank(names[i]) < tierRank(names[j]) || tierRank(names[i]) == tierRank(names[j]) && names[i] < names[j]
	})
	w.State = StateBalanced
	for _, t := range names {
		tc := w.Tiers[t]
		d := tc.accounted() - p
		w.Diff[t] = d
		behind := false
		switch {
		case d == 0:
			if !w.Untimestamped && (rep.Latest[t] == nil || w.Start.After(rep.Latest[t][w.Topic])) {
				if rep.Latest[t] == nil {
					rep.Latest[t] = map[string]time.Time{}
				}
				rep.Latest[t][w.Topic] = w.Start
			}
			continue
		case young:
			if w.State == StateBalanced {
				w.State = StatePending
			}
		case d < 0:
			w.State, behind = StateMissing, true
		default:
			if w.State != StateMissing {
				w.State = StateExtra
			}
			behind = true
		}
		if behind {
			if rep.Behind[t] == nil {
				rep.Behind[t] = map[string]int{}
			}
			rep.Behind[t][w.Topic]++
		}
		w.Reasons = append(w.Reasons, reasons(t, tc, d, skips)...)
	}
	switch w.State {
	case StateBalanced:
		rep.Balanced++
	case StatePending:
		rep.Pending++
	default:
		rep.Unbalanced++
	}
}

func reasons(t Tier, tc TierCount, d int64, skips bool) []string {
	var rs []string
	if d > 0 {
		return []string{fmt.Sprintf("%s: %d more than the producers acknowledged (a producer that does not publish its counts, or a retried send)", t, d)}
	}
	if tc.DeadLettered > 0 {
		rs = append(rs, fmt.Sprintf("%s: %d dead-lettered", t, tc.DeadLettered))
	}
	if tc.Malformed > 0 {
		rs = append(rs, fmt.Sprintf("%s: %d malformed, skipped (on_bad_record: skip)", t, tc.Malformed))
	}
	if rest := -d - tc.DeadLettered - tc.Malformed; rest > 0 {
		switch {
		case t == TierLoad && skips:
			rs = append(rs, fmt.Sprintf("%s: %d deleted by retention before loading (the skipped ranges)", t, rest))
		case t == TierBroker || t == TierSourceBroker:
			rs = append(rs, fmt.Sprintf("%s: %d not counted (not appended, or appended since a broker's last publish before it died, or in a transaction open across a broker restart or leader change)", t, rest))
		default:
			rs = append(rs, fmt.Sprintf("%s: %d not there (yet)", t, rest))
		}
	}
	return rs
}

func skipsOf(skips []Skip, topic string) string {
	var b strings.Builder
	for _, s := range skips {
		if s.Topic != topic {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "partition %d [%d, %d)", s.Partition, s.Start, s.End)
	}
	return b.String()
}
