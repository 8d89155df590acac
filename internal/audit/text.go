package audit

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText prints the report as a table: one line per (topic, window),
// each tier's count and its difference to the producer tier, the state
// and the reasons, then the notes and a summary line.
func (r *Report) WriteText(w io.Writer) error {
	tiers := map[Tier]bool{}
	for _, win := range r.Windows {
		for t := range win.Tiers {
			tiers[t] = true
		}
	}
	order := []Tier{TierProducer}
	var rest []Tier
	for t := range tiers {
		if t != TierProducer {
			rest = append(rest, t)
		}
	}
	sort.Slice(rest, func(i, j int) bool {
		return tierRank(rest[i]) < tierRank(rest[j]) || tierRank(rest[i]) == tierRank(rest[j]) && rest[i] < rest[j]
	})
	order = append(order, rest...)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"TOPIC", "WINDOW"}
	for _, t := range order {
		head = append(head, strings.ToUpper(string(t)))
		if t != TierProducer && !informational(t) {
			head = append(head, "DIFF")
		}
	}
	head = append(head, "STATE", "REASON")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, win := range r.Windows {
		name := "untimestamped"
		if !win.Untimestamped {
			name = win.Start.Format(time.RFC3339) + " +" + shortDuration(r.Window)
		}
		cols := []string{win.Topic, name}
		for _, t := range order {
			tc, ok := win.Tiers[t]
			switch {
			case t == TierProducer || informational(t):
				cols = append(cols, fmt.Sprint(tc.Messages))
			case t == TierLoad && tc.Filtered > 0:
				cols = append(cols, fmt.Sprintf("%d+%d filtered", tc.Messages, tc.Filtered), signed(win.Diff[t]))
			case ok || tiers[t]:
				cols = append(cols, fmt.Sprint(tc.Messages), signed(win.Diff[t]))
			}
		}
		cols = append(cols, win.State, strings.Join(win.Reasons, "; "))
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	_, err := fmt.Fprintf(w, "%d windows: %d balanced, %d pending, %d unbalanced\n", len(r.Windows), r.Balanced, r.Pending, r.Unbalanced)
	return err
}

func signed(d int64) string {
	if d > 0 {
		return fmt.Sprintf("+%d", d)
	}
	return fmt.Sprint(d)
}

func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
