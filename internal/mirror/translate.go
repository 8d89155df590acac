package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafka"
)

// TranslateOptions name a group to move from the source to the target.
type TranslateOptions struct {
	From, To                 string
	FromSecurity, ToSecurity kafka.Security
	// Name is the mirror's name (its checkpoint topic on the target).
	Name string
	// Group is the consumer group, the same on both clusters.
	Group string
	// DryRun prints the translation without committing it.
	DryRun bool
	// ClientOpts are added to every franz-go client.
	ClientOpts []kgo.Opt
}

// Translated is one partition's translation.
type Translated struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Source is the group's committed offset on the source.
	Source int64 `json:"source_offset"`
	// Target is the offset committed for the group on the target.
	Target int64 `json:"target_offset"`
	// Reread is how many source offsets below Source the target offset
	// resumes at (at most one checkpoint interval's when the group is older
	// than the mirror's newest checkpoint). Negative: that many source
	// offsets from Source on were never mirrored.
	Reread int64 `json:"reread_offsets"`
}

// Translate reads Group's committed offsets on the source, maps each
// through the mirror's checkpoints (rounding down to the newest mapping at
// or below it: nothing is skipped) and commits the result for Group on the
// target. Partitions the mirror has no mapping for are left out and
// reported in the error. The group must have no members on the target.
func Translate(ctx context.Context, opts TranslateOptions) ([]Translated, error) {
	if opts.Group == "" {
		return nil, fmt.Errorf("%w: --group is required", ErrBadInput)
	}
	if opts.Name == "" {
		opts.Name = "mirror"
	}
	from, err := sideOptions("--from", opts.From, opts.FromSecurity)
	if err != nil {
		return nil, err
	}
	to, err := sideOptions("--to", opts.To, opts.ToSecurity)
	if err != nil {
		return nil, err
	}
	to = with(to, nil, opts.ClientOpts)
	st, err := ReadState(ctx, to, CheckpointTopic(opts.Name))
	if err != nil {
		return nil, err
	}
	src, srcCl, err := adminClient(with(from, nil, opts.ClientOpts))
	if err != nil {
		return nil, err
	}
	defer srcCl.Close()
	committed, err := src.FetchOffsets(ctx, opts.Group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: fetch the offsets of group %s on the source: %w", opts.Group, err)
	}
	var out []Translated
	var unmapped []string
	toCommit := kadm.Offsets{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At < 0 {
			return
		}
		tp := Partition{o.Topic, o.Partition}
		c, pos := st.Checkpoints[tp], st.Positions[tp]
		if c == nil {
			if pos == nil || pos.Target < 0 || o.At < pos.Source {
				unmapped = append(unmapped, tp.String())
				return
			}
			c = &Checkpoints{First: pos.Mapping}
		}
		target, reread := c.Translate(o.At, pos)
		out = append(out, Translated{Topic: o.Topic, Partition: o.Partition, Source: o.At, Target: target, Reread: reread})
		toCommit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: target, LeaderEpoch: -1})
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	if !opts.DryRun && len(toCommit) > 0 {
		dst, dstCl, err := adminClient(to)
		if err != nil {
			return nil, err
		}
		defer dstCl.Close()
		if err := dst.CommitAllOffsets(ctx, opts.Group, toCommit); err != nil {
			return out, fmt.Errorf("mirror: commit the translated offsets of group %s on the target (is a consumer of it running there?): %w", opts.Group, err)
		}
	}
	if len(unmapped) > 0 {
		sort.Strings(unmapped)
		return out, fmt.Errorf("mirror: no checkpoint of mirror %s maps %v (not mirrored yet?): left out", opts.Name, unmapped)
	}
	return out, nil
}

// WriteTranslated prints translations as a table or JSON.
func WriteTranslated(w io.Writer, ts []Translated, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(ts)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-OFFSET\tREREAD")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", t.Topic, t.Partition, t.Source, t.Target, t.Reread)
	}
	return tw.Flush()
}

// PartitionStatus is one source partition's mirror status.
type PartitionStatus struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Position is the committed next source offset; TargetOffset the
	// target's offset after the last copied record (-1: none yet).
	Position     int64 `json:"position"`
	TargetOffset int64 `json:"target_offset"`
	// HighWatermark is the source's (-1 when --from was not given or the
	// source did not answer); Lag is HighWatermark minus Position.
	HighWatermark int64 `json:"source_high_watermark"`
	Lag           int64 `json:"lag"`
	// Committed is when the position was committed.
	Committed time.Time `json:"committed"`
	// Checkpoint is the newest checkpoint and when it was written.
	Checkpoint   *Mapping  `json:"last_checkpoint,omitempty"`
	CheckpointAt time.Time `json:"last_checkpoint_at,omitzero"`
}

// StatusOptions say which mirror to describe.
type StatusOptions struct {
	// To is the target (required); From, when set, gives the lag.
	From, To                 string
	FromSecurity, ToSecurity kafka.Security
	Name                     string
	ClientOpts               []kgo.Opt
}

// Status reads the mirror's committed positions and checkpoints from the
// target and, when From is set, the source's high watermarks.
func Status(ctx context.Context, opts StatusOptions) ([]PartitionStatus, error) {
	if opts.Name == "" {
		opts.Name = "mirror"
	}
	to, err := sideOptions("--to", opts.To, opts.ToSecurity)
	if err != nil {
		return nil, err
	}
	st, err := ReadState(ctx, with(to, nil, opts.ClientOpts), CheckpointTopic(opts.Name))
	if err != nil {
		return nil, err
	}
	parts := st.Sorted()
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w: the target holds no position of mirror %q (topic %s is missing or empty)", ErrBadInput, opts.Name, CheckpointTopic(opts.Name))
	}
	var hwm kadm.ListedOffsets
	if opts.From != "" {
		from, err := sideOptions("--from", opts.From, opts.FromSecurity)
		if err != nil {
			return nil, err
		}
		src, cl, err := adminClient(with(from, nil, opts.ClientOpts))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		topics := map[string]bool{}
		var names []string
		for _, p := range parts {
			if !topics[p.Topic] {
				topics[p.Topic] = true
				names = append(names, p.Topic)
			}
		}
		if hwm, err = src.ListEndOffsets(ctx, names...); err != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("mirror: list the source's high watermarks: %w", err)
		}
	}
	out := make([]PartitionStatus, 0, len(parts))
	for _, p := range parts {
		ps := PartitionStatus{Topic: p.Topic, Partition: p.Partition, TargetOffset: -1, HighWatermark: -1, Lag: -1}
		if pos := st.Positions[p]; pos != nil {
			ps.Position, ps.TargetOffset = pos.Source, pos.Target
			ps.Committed = time.UnixMilli(pos.CommittedMs).UTC()
		}
		if c := st.Checkpoints[p]; c != nil && len(c.History) > 0 {
			last := c.History[len(c.History)-1]
			ps.Checkpoint, ps.CheckpointAt = &last, time.UnixMilli(c.LastMs).UTC()
		}
		if o, ok := hwm.Lookup(p.Topic, p.Partition); ok && o.Err == nil {
			ps.HighWatermark = o.Offset
			ps.Lag = max(o.Offset-ps.Position, 0)
		}
		out = append(out, ps)
	}
	return out, nil
}

// WriteStatus prints statuses as a table or JSON.
func WriteStatus(w io.Writer, ss []PartitionStatus, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(ss)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tPOSITION\tTARGET-OFFSET\tSOURCE-HWM\tLAG\tCOMMITTED\tLAST-CHECKPOINT")
	for _, s := range ss {
		hwm, lag := "-", "-"
		if s.HighWatermark >= 0 {
			hwm, lag = fmt.Sprint(s.HighWatermark), fmt.Sprint(s.Lag)
		}
		ckpt := "-"
		if s.Checkpoint != nil {
			ckpt = fmt.Sprintf("%d→%d at %s", s.Checkpoint.Source, s.Checkpoint.Target, s.CheckpointAt.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Topic, s.Partition, s.Position, s.TargetOffset, hwm, lag,
			s.Committed.Format(time.RFC3339), ckpt)
	}
	return tw.Flush()
}
