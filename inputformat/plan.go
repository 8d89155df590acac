package inputformat

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Start policies for a partition that has no checkpoint.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

// Out-of-range policies for a checkpoint below the log start offset.
const (
	OutOfRangeFail = "fail"
	OutOfRangeSkip = "skip"
)

// PartitionOffsets are a partition's bounds read from the cluster.
type PartitionOffsets struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// LogStart is the first offset still in the log.
	LogStart int64 `json:"log_start"`
	// End is the high watermark, or the last stable offset under
	// read_committed: where a plan made now ends.
	End int64 `json:"end"`
	// LeaderEpoch is the leader epoch at End (-1 when the cluster does not
	// say): within one topic's life it never goes down.
	LeaderEpoch int32 `json:"leader_epoch"`
}

// Checkpoint is a partition's committed position: the end of its newest
// commit. Known is false for a partition never loaded.
type Checkpoint struct {
	Offset int64
	Known  bool
}

// PlanOptions are the inputs of a plan besides the partitions' offsets.
type PlanOptions struct {
	// MaxRecordsPerTask bounds the offsets of one split (> 0).
	MaxRecordsPerTask int64
	// Start applies to a partition with no checkpoint: StartEarliest or
	// StartLatest.
	Start string
	// OnOutOfRange applies to a checkpoint below the log start:
	// OutOfRangeFail or OutOfRangeSkip.
	OnOutOfRange string
	// Begun names the topics whose start the job decided already (its
	// first run planned them): a partition of theirs with no checkpoint
	// appeared since, and starts at its log start whatever Start says, so
	// that nothing produced to it before this plan is skipped.
	Begun map[string]bool
}

// Range is an offset range [Start, End).
type Range struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// PartitionPlan is what a plan decided for one partition.
type PartitionPlan struct {
	PartitionOffsets
	// Checkpoint is the committed position (when CheckpointKnown).
	Checkpoint      int64 `json:"checkpoint"`
	CheckpointKnown bool  `json:"checkpoint_known"`
	// Start is where loading starts: the checkpoint, or the start policy's
	// offset for a new partition, or the log start after a skip.
	Start int64 `json:"start"`
	// Origin is true when Start is not a checkpoint: the first commit of
	// this partition fixes it.
	Origin bool `json:"origin"`
	// Skipped is the range lost to retention under OutOfRangeSkip.
	Skipped *Range `json:"skipped,omitempty"`
	// New is true for a partition that appeared after the job's first
	// run planned its topic: it starts at its log start (see PlanOptions.Begun).
	New bool `json:"new,omitempty"`
}

// Lag is the number of offsets not yet loaded at planning.
func (p PartitionPlan) Lag() int64 { return p.End - p.Start }

// Plan is the splits of one run and how they were chosen.
type Plan struct {
	Partitions []PartitionPlan `json:"partitions"`
	Splits     []Split         `json:"splits"`
	// Topics is what the planner found of each topic's identity (filled by
	// the loader, which keeps the identities with its checkpoints).
	Topics []TopicPlan `json:"topics,omitempty"`
}

// TopicPlan is what a plan found of one topic's identity.
type TopicPlan struct {
	Topic string `json:"topic"`
	// ID is the cluster's topic id (hex; empty where the cluster has none).
	ID         string `json:"id,omitempty"`
	Partitions int    `json:"partitions"`
	// Incarnation counts the times the job started the topic over
	// (on_topic_recreated: restart); 0 for the topic it first loaded.
	Incarnation int `json:"incarnation"`
	// Recreated says why the topic is not the one the checkpoints are of
	// ("" when it is); Restart is true when the plan starts it over.
	Recreated string `json:"recreated,omitempty"`
	Restart   bool   `json:"restart,omitempty"`
	// NewPartitions lists the partitions that appeared since the job's
	// first run planned the topic.
	NewPartitions []int32 `json:"new_partitions,omitempty"`
}

// Records returns the number of offsets the plan's splits cover.
func (p *Plan) Records() int64 {
	var n int64
	for _, s := range p.Splits {
		n += s.Len()
	}
	return n
}

// Cut makes a plan from the partitions' offsets and checkpoints. It is a
// pure function: the same inputs give the same plan. parts need not be
// sorted; checkpoint returns the committed position of a partition.
func Cut(parts []PartitionOffsets, checkpoint func(topic string, partition int32) (Checkpoint, error), opts PlanOptions) (*Plan, error) {
	if opts.MaxRecordsPerTask <= 0 {
		return nil, fmt.Errorf("%w: max records per task %d", ErrSplit, opts.MaxRecordsPerTask)
	}
	parts = append([]PartitionOffsets(nil), parts...)
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].Topic != parts[j].Topic {
			return parts[i].Topic < parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	plan := &Plan{}
	for _, po := range parts {
		cp, err := checkpoint(po.Topic, po.Partition)
		if err != nil {
			return nil, err
		}
		pp := PartitionPlan{PartitionOffsets: po, Checkpoint: cp.Offset, CheckpointKnown: cp.Known}
		switch {
		case cp.Known:
			pp.Start = cp.Offset
		case opts.Begun[po.Topic]:
			pp.Start, pp.Origin, pp.New = po.LogStart, true, true
		case opts.Start == StartLatest:
			pp.Start, pp.Origin = po.End, true
		case opts.Start == StartEarliest || opts.Start == "":
			pp.Start, pp.Origin = po.LogStart, true
		default:
			return nil, fmt.Errorf("%w: start policy %q", ErrSplit, opts.Start)
		}
		if pp.Start < po.LogStart {
			if opts.OnOutOfRange != OutOfRangeSkip {
				return nil, fmt.Errorf("%w: %s/%d: checkpoint %d is below the log start offset %d: offsets [%d, %d) were deleted before they were loaded; "+
					"set source.on_offset_out_of_range: skip to go on from %d (the loss is recorded in the run report)",
					ErrOutOfRange, po.Topic, po.Partition, pp.Start, po.LogStart, pp.Start, po.LogStart, po.LogStart)
			}
			pp.Skipped = &Range{Start: pp.Start, End: po.LogStart}
			pp.Start = po.LogStart
		}
		if pp.Start > po.End {
			return nil, fmt.Errorf("%w: %s/%d: checkpoint %d is beyond the log end %d (was the topic recreated, or did an unclean leader change lose records?)",
				ErrTruncated, po.Topic, po.Partition, pp.Start, po.End)
		}
		for s := pp.Start; s < po.End; s += opts.MaxRecordsPerTask {
			plan.Splits = append(plan.Splits, Split{Topic: po.Topic, Partition: po.Partition, Start: s, End: min(s+opts.MaxRecordsPerTask, po.End)})
		}
		plan.Partitions = append(plan.Partitions, pp)
	}
	return plan, nil
}

// ListOffsets reads the log start and end (high watermark, or last stable
// offset when readCommitted) of every partition of topics.
func ListOffsets(ctx context.Context, adm *kadm.Client, topics []string, readCommitted bool) ([]PartitionOffsets, error) {
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("inputformat: listing log start offsets: %w", err)
	}
	var ends kadm.ListedOffsets
	if readCommitted {
		ends, err = adm.ListCommittedOffsets(ctx, topics...)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("inputformat: listing end offsets: %w", err)
	}
	var out []PartitionOffsets
	for _, t := range topics {
		sp, ok := starts[t]
		if !ok || len(sp) == 0 {
			return nil, fmt.Errorf("%w: %q: the cluster has no such topic (check source.topics and source.bootstrap)", ErrNoTopic, t)
		}
		for p, so := range sp {
			if so.Err != nil {
				if errors.Is(so.Err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("%w: %q: the cluster has no such topic (check source.topics and source.bootstrap)", ErrNoTopic, t)
				}
				return nil, fmt.Errorf("inputformat: log start of %s/%d: %w", t, p, so.Err)
			}
			eo, ok := ends.Lookup(t, p)
			if !ok {
				return nil, fmt.Errorf("inputformat: no end offset for %s/%d", t, p)
			}
			if eo.Err != nil {
				return nil, fmt.Errorf("inputformat: end offset of %s/%d: %w", t, p, eo.Err)
			}
			out = append(out, PartitionOffsets{Topic: t, Partition: p, LogStart: so.Offset, End: eo.Offset, LeaderEpoch: eo.LeaderEpoch})
		}
	}
	return out, nil
}

// TopicIDs returns the cluster's id of each topic ("" where the cluster
// has no topic ids: Kafka before 2.8) and its partition count.
func TopicIDs(ctx context.Context, adm *kadm.Client, topics []string) (map[string]TopicPlan, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("inputformat: reading topic metadata: %w", err)
	}
	out := make(map[string]TopicPlan, len(topics))
	for _, t := range topics {
		td, ok := md.Topics[t]
		if !ok || td.Err != nil {
			if ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("inputformat: metadata of %s: %w", t, td.Err)
			}
			return nil, fmt.Errorf("%w: %q: the cluster has no such topic (check source.topics and source.bootstrap)", ErrNoTopic, t)
		}
		tp := TopicPlan{Topic: t, Partitions: len(td.Partitions)}
		if td.ID != (kadm.TopicID{}) {
			tp.ID = hex.EncodeToString(td.ID[:])
		}
		out[t] = tp
	}
	return out, nil
}
