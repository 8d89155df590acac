package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Move is one partition's replica move: the replica set it should end
// with, preferred leader first.
type Move struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// reassignmentFile is Kafka's reassignment JSON
// ({"version":1,"partitions":[{"topic","partition","replicas"}]}); its
// log_dirs are read and ignored.
type reassignmentFile struct {
	Version    int    `json:"version"`
	Partitions []Move `json:"partitions"`
}

// ReadMoves reads a reassignment JSON file in Kafka's format
// (kafka-reassign-partitions --reassignment-json-file).
func ReadMoves(path string) ([]Move, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kafka: reassignment file: %w", err)
	}
	var f reassignmentFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("kafka: reassignment file %s: %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("kafka: reassignment file %s: version %d, want 1", path, f.Version)
	}
	if len(f.Partitions) == 0 {
		return nil, fmt.Errorf("kafka: reassignment file %s lists no partition", path)
	}
	seen := map[string]bool{}
	for _, m := range f.Partitions {
		k := fmt.Sprintf("%s-%d", m.Topic, m.Partition)
		switch {
		case m.Topic == "" || m.Partition < 0:
			return nil, fmt.Errorf("kafka: reassignment file %s: a partition without a topic or with a negative number", path)
		case len(m.Replicas) == 0:
			return nil, fmt.Errorf("kafka: reassignment file %s: %s has no replicas", path, k)
		case seen[k]:
			return nil, fmt.Errorf("kafka: reassignment file %s: %s is listed twice", path, k)
		}
		seen[k] = true
	}
	return f.Partitions, nil
}

// Reassign starts the moves (AlterPartitionReassignments) and writes one
// line per partition; it fails when any partition was refused.
func (a *Admin) Reassign(ctx context.Context, moves []Move, w io.Writer) error {
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		req.Assign(m.Topic, m.Partition, m.Replicas)
	}
	return a.alterAssignments(ctx, req, "moving to %v", moves, w)
}

// CancelReassign cancels the moves of the partitions named (their
// replicas are ignored): each goes back to the replicas it had.
func (a *Admin) CancelReassign(ctx context.Context, moves []Move, w io.Writer) error {
	var req kadm.AlterPartitionAssignmentsReq
	for _, m := range moves {
		req.CancelAssign(m.Topic, m.Partition)
	}
	return a.alterAssignments(ctx, req, "cancelled", moves, w)
}

func (a *Admin) alterAssignments(ctx context.Context, req kadm.AlterPartitionAssignmentsReq, done string, moves []Move, w io.Writer) error {
	resp, err := a.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("kafka: reassign: %w", err)
	}
	target := map[string][]int32{}
	for _, m := range moves {
		target[fmt.Sprintf("%s-%d", m.Topic, m.Partition)] = m.Replicas
	}
	refused := 0
	for _, r := range resp.Sorted() {
		k := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
		if r.Err != nil {
			refused++
			fmt.Fprintf(w, "%s: refused: %v %s\n", k, r.Err, r.ErrMessage)
			continue
		}
		if done == "cancelled" {
			fmt.Fprintf(w, "%s: move cancelled\n", k)
		} else {
			fmt.Fprintf(w, "%s: "+done+"\n", k, target[k])
		}
	}
	if refused > 0 {
		return fmt.Errorf("kafka: reassign: %d of %d partitions refused", refused, len(moves))
	}
	return nil
}

// ErrMovesInProgress: VerifyReassign found moves still running (or a
// partition whose replicas are not the target with none running).
var ErrMovesInProgress = errors.New("kafka: reassignment not complete")

// VerifyReassign writes, per partition, whether its move is still in
// progress, completed (its replicas are the target), or neither (no move
// runs and its replicas differ); it returns ErrMovesInProgress unless all
// completed.
func (a *Admin) VerifyReassign(ctx context.Context, moves []Move, w io.Writer) error {
	set := kadm.TopicsSet{}
	var topics []string
	for _, m := range moves {
		set.Add(m.Topic, m.Partition)
		if !slices.Contains(topics, m.Topic) {
			topics = append(topics, m.Topic)
		}
	}
	listed, err := a.adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return fmt.Errorf("kafka: verify reassignment: %w", err)
	}
	md, err := a.adm.Metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: verify reassignment: %w", err)
	}
	sort.Slice(moves, func(i, j int) bool {
		if moves[i].Topic != moves[j].Topic {
			return moves[i].Topic < moves[j].Topic
		}
		return moves[i].Partition < moves[j].Partition
	})
	incomplete := 0
	for _, m := range moves {
		k := fmt.Sprintf("%s-%d", m.Topic, m.Partition)
		if l, ok := listed[m.Topic][m.Partition]; ok {
			incomplete++
			fmt.Fprintf(w, "%s: in progress (replicas %v, adding %v, removing %v)\n", k, l.Replicas, l.AddingReplicas, l.RemovingReplicas)
			continue
		}
		p, ok := md.Topics[m.Topic].Partitions[m.Partition]
		switch {
		case !ok:
			incomplete++
			fmt.Fprintf(w, "%s: no such partition\n", k)
		case slices.Equal(p.Replicas, m.Replicas):
			fmt.Fprintf(w, "%s: completed (replicas %v, leader %d, isr %v)\n", k, p.Replicas, p.Leader, p.ISR)
		default:
			incomplete++
			fmt.Fprintf(w, "%s: no move in progress, but its replicas are %v, not %v\n", k, p.Replicas, m.Replicas)
		}
	}
	if incomplete > 0 {
		return fmt.Errorf("%w: %d of %d partitions", ErrMovesInProgress, incomplete, len(moves))
	}
	return nil
}
