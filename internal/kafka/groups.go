package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// ErrGroupActive is returned by ResetOffsets for a group with members.
var ErrGroupActive = errors.New("kafka: group has active members")

// ListGroups writes one line per consumer group: name, state, protocol type.
func (a *Admin) ListGroups(ctx context.Context, w io.Writer) error {
	groups, err := a.adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("kafka: list groups: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL TYPE")
	for _, g := range groups.Sorted() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Group, g.State, g.ProtocolType)
	}
	return tw.Flush()
}

// DescribeGroups writes, for each group, its state and members (client,
// host, assigned partitions) and, per partition with a commit or an
// assignment, the committed offset, the log end and the lag.
func (a *Admin) DescribeGroups(ctx context.Context, groups []string, w io.Writer) error {
	if len(groups) == 0 {
		return badInput("name at least one group")
	}
	lags, err := a.adm.Lag(ctx, groups...)
	if err != nil {
		return fmt.Errorf("kafka: describe groups: %w", err)
	}
	var errs []error
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, name := range groups {
		l, ok := lags[name]
		if !ok || l.Error() != nil {
			reason := "not returned by the broker"
			if ok {
				reason = l.Error().Error()
			}
			errs = append(errs, fmt.Errorf("kafka: group %q: %s", name, reason))
			continue
		}
		if l.State == "Dead" {
			errs = append(errs, fmt.Errorf("kafka: group %q does not exist", name))
			continue
		}
		fmt.Fprintf(tw, "group %s\tstate %s\tprotocol %s\tmembers %d\n", name, l.State, orDash(l.Protocol), len(l.Members))
		if len(l.Members) > 0 {
			fmt.Fprintln(tw, "  member\tinstance\tclient\thost\tassigned")
		}
		for _, m := range l.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			var assigned []string
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range ca.Topics {
					ps := append([]int32(nil), t.Partitions...)
					sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
					assigned = append(assigned, fmt.Sprintf("%s%v", t.Topic, ps))
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, orDash(strings.Join(assigned, " ")))
		}
		fmt.Fprintln(tw, "  topic\tpartition\tcommitted\tend\tlag\tmember")
		for _, ml := range l.Lag.Sorted() {
			committed, lag := "-", "-"
			if ml.Commit.At >= 0 {
				committed = fmt.Sprint(ml.Commit.At)
			}
			if ml.Lag >= 0 && ml.Err == nil {
				lag = fmt.Sprint(ml.Lag)
			}
			member := "-"
			if ml.Member != nil {
				member = ml.Member.ClientID
				if member == "" {
					member = ml.Member.MemberID
				}
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%s\t%s\n", ml.Topic, ml.Partition, committed, ml.End.Offset, lag, member)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ResetSpec says where ResetOffsets moves a group's committed offsets.
// Exactly one of ToEarliest, ToLatest, ToOffset >= 0 or a non-zero
// ToDatetime is set.
type ResetSpec struct {
	Group      string
	Topics     []string // topics to reset; empty = every topic the group committed
	ToEarliest bool
	ToLatest   bool
	ToOffset   int64 // -1 = unset; clamped to [log start, log end]
	ToDatetime time.Time
	DryRun     bool // print the plan, commit nothing
}

func (s ResetSpec) validate() error {
	n := 0
	for _, set := range []bool{s.ToEarliest, s.ToLatest, s.ToOffset >= 0, !s.ToDatetime.IsZero()} {
		if set {
			n++
		}
	}
	if n != 1 {
		return badInput("give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime T")
	}
	if s.Group == "" {
		return badInput("name the group")
	}
	return nil
}

// ResetOffsets moves the committed offsets of a stopped group (no members)
// and writes the old and new offset of each partition.
func (a *Admin) ResetOffsets(ctx context.Context, spec ResetSpec, w io.Writer) error {
	if err := spec.validate(); err != nil {
		return err
	}
	described, err := a.adm.DescribeGroups(ctx, spec.Group)
	if err != nil {
		return fmt.Errorf("kafka: describe group %q: %w", spec.Group, err)
	}
	if d, ok := described[spec.Group]; ok && d.Err == nil && len(d.Members) > 0 {
		return fmt.Errorf("%w: group %q is %s with %d members; stop its consumers, then reset", ErrGroupActive, spec.Group, d.State, len(d.Members))
	}
	current, err := a.adm.FetchOffsets(ctx, spec.Group)
	if err != nil {
		return fmt.Errorf("kafka: committed offsets of %q: %w", spec.Group, err)
	}
	topics := spec.Topics
	if len(topics) == 0 {
		topics = current.Offsets().TopicsSet().Topics()
	}
	if len(topics) == 0 {
		return badInput("group %q has no committed offsets; name the topics with --topic", spec.Group)
	}
	starts, err := a.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: list start offsets: %w", err)
	}
	ends, err := a.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if !spec.ToDatetime.IsZero() {
		if atTime, err = a.adm.ListOffsetsAfterMilli(ctx, spec.ToDatetime.UnixMilli(), topics...); err != nil {
			return fmt.Errorf("kafka: offsets at %s: %w", spec.ToDatetime.Format(time.RFC3339), err)
		}
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("kafka: list end offsets: %w", err)
	}
	plan := kadm.Offsets{}
	var errs []error
	ends.Each(func(end kadm.ListedOffset) {
		start, _ := starts.Lookup(end.Topic, end.Partition)
		target := end.Offset
		switch {
		case spec.ToEarliest:
			target = start.Offset
		case spec.ToOffset >= 0:
			target = min(max(spec.ToOffset, start.Offset), end.Offset)
		case !spec.ToDatetime.IsZero():
			o, ok := atTime.Lookup(end.Topic, end.Partition)
			if !ok || o.Err != nil {
				errs = append(errs, fmt.Errorf("kafka: %s[%d]: no offset for %s", end.Topic, end.Partition, spec.ToDatetime.Format(time.RFC3339)))
				return
			}
			target = o.Offset
		}
		plan.Add(kadm.Offset{Topic: end.Topic, Partition: end.Partition, At: target, LeaderEpoch: -1})
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOLD\tNEW")
	plan.Each(func(o kadm.Offset) {
		old := "-"
		if c, ok := current.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			old = fmt.Sprint(c.At)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", o.Topic, o.Partition, old, o.At)
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	if spec.DryRun {
		return nil
	}
	resp, err := a.adm.CommitOffsets(ctx, spec.Group, plan)
	if err != nil {
		return fmt.Errorf("kafka: commit offsets of %q: %w", spec.Group, err)
	}
	if err := resp.Error(); err != nil {
		return fmt.Errorf("kafka: commit offsets of %q: %w", spec.Group, err)
	}
	return nil
}

// DeleteGroups deletes stopped groups with their committed offsets.
func (a *Admin) DeleteGroups(ctx context.Context, groups []string, w io.Writer) error {
	resp, err := a.adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("kafka: delete groups: %w", err)
	}
	var errs []error
	for _, g := range groups {
		r, ok := resp[g]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("kafka: group %q: not answered", g))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("kafka: delete group %q: %w", g, r.Err))
		default:
			fmt.Fprintf(w, "deleted group %s\n", g)
		}
	}
	return errors.Join(errs...)
}
