package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxHistory is how many checkpoints one partition's checkpoints record
// keeps (one per checkpoint interval: 256 × 5 s is about 21 minutes).
const maxHistory = 256

// maxStateRecord bounds one record read from the checkpoint topic; a larger
// one is refused as foreign.
const maxStateRecord = 1 << 20

// Partition names one source partition.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) String() string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// Mapping says that the source records below Source are in the target
// below Target, and those at or above Source at or above Target.
type Mapping struct {
	Source int64 `json:"s"`
	Target int64 `json:"t"`
}

// Position is a partition's committed mirror position: the next source
// offset to copy and the target's offset after the last copied record.
type Position struct {
	V int `json:"v"`
	Mapping
	// CommittedMs is when the transaction that wrote it was begun to be
	// committed (Unix milliseconds, the mirror's clock).
	CommittedMs int64 `json:"at"`
	// TopicID is the source topic's ID (base64) when the source has IDs: a
	// topic recreated under the same name has another, and is refused.
	TopicID string `json:"id,omitempty"`
}

// Checkpoints is a partition's checkpoint history: the mirror's first
// mapping of the partition and the last maxHistory checkpoints, oldest first.
type Checkpoints struct {
	V       int       `json:"v"`
	First   Mapping   `json:"first"`
	History []Mapping `json:"history"`
	// LastMs is when the newest checkpoint was written (Unix milliseconds).
	LastMs int64 `json:"at"`
}

// add appends m unless it equals the newest entry, dropping the oldest
// beyond maxHistory.
func (c *Checkpoints) add(m Mapping, at time.Time) {
	if n := len(c.History); n > 0 && c.History[n-1] == m {
		return
	}
	c.History = append(c.History, m)
	if len(c.History) > maxHistory {
		c.History = append(c.History[:0:0], c.History[len(c.History)-maxHistory:]...)
	}
	c.LastMs = at.UnixMilli()
}

// Translate returns the target offset at which a consumer whose source
// position is offset resumes without skipping a record, and how many
// source offsets it may reread (offset minus the mapping used). A mapping
// at or below offset is taken from the history or from pos (the committed
// position, itself a mapping); when offset is below every known mapping,
// the first one is used and reread is negative: -n means that the n source
// offsets from offset to First.Source were never mirrored.
func (c *Checkpoints) Translate(offset int64, pos *Position) (target, reread int64) {
	best, found := Mapping{}, false
	consider := func(m Mapping) {
		if m.Source <= offset && (!found || m.Source > best.Source) {
			best, found = m, true
		}
	}
	consider(c.First)
	for _, m := range c.History {
		consider(m)
	}
	if pos != nil {
		consider(pos.Mapping)
	}
	if !found {
		return c.First.Target, offset - c.First.Source
	}
	return best.Target, offset - best.Source
}

// State is what the checkpoint topic holds: per source partition the
// committed position and the checkpoint history.
type State struct {
	Positions   map[Partition]*Position
	Checkpoints map[Partition]*Checkpoints
	// Tasks is the task count of the last run that took the name over (0:
	// none recorded, a mirror of before tasks: its one id is the control id).
	Tasks int
}

func newState() *State {
	return &State{Positions: map[Partition]*Position{}, Checkpoints: map[Partition]*Checkpoints{}}
}

// Sorted returns the partitions that have a position or checkpoints, by topic then partition.
func (s *State) Sorted() []Partition {
	seen := map[Partition]bool{}
	for p := range s.Positions {
		seen[p] = true
	}
	for p := range s.Checkpoints {
		seen[p] = true
	}
	out := make([]Partition, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

const (
	positionKind    = "position"
	checkpointsKind = "checkpoints"
	tasksKind       = "tasks"
	recordVersion   = 1
)

// tasksKey is the key of the task-count record (kind/topic/partition like
// the others; the kind tells it apart from a topic named "-").
var tasksKey = []byte(tasksKind + "/-/0")

// tasksValue is the task-count record's value.
type tasksValue struct {
	V     int `json:"v"`
	Tasks int `json:"n"`
}

func tasksRecord(topic string, n int) *kgo.Record {
	v, _ := json.Marshal(tasksValue{V: recordVersion, Tasks: n})
	return &kgo.Record{Topic: topic, Partition: 0, Key: tasksKey, Value: v}
}

func stateKey(kind string, p Partition) []byte {
	return []byte(kind + "/" + p.Topic + "/" + strconv.Itoa(int(p.Partition)))
}

// parseKey splits "kind/topic/partition". Topic names cannot hold '/'.
func parseKey(key []byte) (kind string, p Partition, err error) {
	parts := strings.Split(string(key), "/")
	if len(parts) != 3 || parts[1] == "" {
		return "", p, fmt.Errorf("%w: key %q is not kind/topic/partition", ErrBadState, key)
	}
	n, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || n < 0 {
		return "", p, fmt.Errorf("%w: key %q: bad partition", ErrBadState, key)
	}
	return parts[0], Partition{parts[1], int32(n)}, nil
}

func positionRecord(topic string, p Partition, pos Position) *kgo.Record {
	pos.V = recordVersion
	v, _ := json.Marshal(pos)
	return &kgo.Record{Topic: topic, Partition: 0, Key: stateKey(positionKind, p), Value: v}
}

func checkpointsRecord(topic string, p Partition, c *Checkpoints) *kgo.Record {
	c.V = recordVersion
	v, _ := json.Marshal(c)
	return &kgo.Record{Topic: topic, Partition: 0, Key: stateKey(checkpointsKind, p), Value: v}
}

// apply folds one record of the checkpoint topic into s. A record of a
// newer version or an unknown kind is an error: a newer mirror owns the
// topic and this one must not write it.
func (s *State) apply(r *kgo.Record) error {
	if len(r.Value) > maxStateRecord {
		return fmt.Errorf("%w: record at offset %d is %d bytes", ErrBadState, r.Offset, len(r.Value))
	}
	kind, p, err := parseKey(r.Key)
	if err != nil {
		return err
	}
	if r.Value == nil { // a tombstone forgets the partition's record
		if kind == tasksKind {
			s.Tasks = 0
		} else if kind == positionKind {
			delete(s.Positions, p)
		} else {
			delete(s.Checkpoints, p)
		}
		return nil
	}
	switch kind {
	case positionKind:
		var pos Position
		if err := json.Unmarshal(r.Value, &pos); err != nil || pos.V != recordVersion {
			return fmt.Errorf("%w: position of %s at offset %d: version %d, %v", ErrBadState, p, r.Offset, pos.V, err)
		}
		s.Positions[p] = &pos
	case checkpointsKind:
		var c Checkpoints
		if err := json.Unmarshal(r.Value, &c); err != nil || c.V != recordVersion {
			return fmt.Errorf("%w: checkpoints of %s at offset %d: version %d, %v", ErrBadState, p, r.Offset, c.V, err)
		}
		s.Checkpoints[p] = &c
	case tasksKind:
		var tv tasksValue
		if err := json.Unmarshal(r.Value, &tv); err != nil || tv.V != recordVersion || tv.Tasks < 1 {
			return fmt.Errorf("%w: task count at offset %d: version %d, %d tasks, %v", ErrBadState, r.Offset, tv.V, tv.Tasks, err)
		}
		s.Tasks = tv.Tasks
	default:
		return fmt.Errorf("%w: unknown record kind %q at offset %d", ErrBadState, kind, r.Offset)
	}
	return nil
}

// CheckpointTopic is the name of the checkpoint topic of the mirror name.
func CheckpointTopic(name string) string { return name + ".checkpoints" }

// checkpointSegmentBytes is the checkpoint topic's segment.bytes.
// Compaction never touches the active segment: with the default 1 GiB, the
// position records of every transaction (one per partition, five a second)
// pile up uncompacted, and every session start, status and translate
// reads them all. 8 MiB bounds that to a few segments.
const checkpointSegmentBytes = "8388608"

// ensureCheckpointTopic creates the compacted one-partition checkpoint
// topic on the target unless it exists.
func ensureCheckpointTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	cleanup, segment := "compact", checkpointSegmentBytes
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &cleanup, "segment.bytes": &segment}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("mirror: create checkpoint topic %s on the target: %w", topic, err)
	}
	return nil
}

// How far a read of a transactional topic goes (readState, waitStable).
type readMode int

const (
	// readQuiet waits up to 5 s for the transactions open at the start to
	// end, then reads what is committed (status, translate: a live mirror
	// commits every commit interval).
	readQuiet readMode = iota
	// readAll waits until the transactions open at the start have ended,
	// up to stableWait (a task's start: its own id is fenced, the other
	// tasks' transactions end within a commit).
	readAll
	// readStable reads what is committed now (the take-over: what it needs
	// precedes every open transaction).
	readStable
)

// stableWait bounds readAll: longer than the target producers'
// transaction timeout (60 s), after which the coordinator aborts a
// transaction whose producer died without being fenced.
const stableWait = 75 * time.Second

// ReadState reads the committed records of the checkpoint topic up to its
// last stable offset, waiting up to 5 s for the transactions open when
// called to end. The caller should first have fenced any other instance
// (InitProducerId), so that no transaction of the topic stays open. A
// missing topic is an empty state. client are the options of the target's
// clients (seeds and security: kafka.ClientOptions).
func ReadState(ctx context.Context, client []kgo.Opt, topic string) (*State, error) {
	return readState(ctx, client, topic, readQuiet)
}

// waitStable lists topic's end offsets and, unless mode is readStable,
// waits until its last stable offsets reach them (readQuiet: at most 5 s;
// readAll: at most stableWait, then an error). It returns the last stable
// offsets to read up to; missing reports a topic that does not exist.
func waitStable(ctx context.Context, adm *kadm.Client, topic string, mode readMode) error {
	_, _, err := stableEnds(ctx, adm, topic, mode)
	return err
}

func stableEnds(ctx context.Context, adm *kadm.Client, topic string, mode readMode) (kadm.ListedOffsets, bool, error) {
	latest, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = latest.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("mirror: list the end of %s: %w", topic, err)
	}
	start := time.Now()
	for {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = stable.Error()
		}
		if err != nil {
			return nil, false, fmt.Errorf("mirror: list the last stable offsets of %s: %w", topic, err)
		}
		behind := ""
		stable.Each(func(o kadm.ListedOffset) {
			if l, ok := latest.Lookup(topic, o.Partition); ok && o.Offset < l.Offset && behind == "" {
				behind = fmt.Sprintf("partition %d: last stable offset %d, end %d", o.Partition, o.Offset, l.Offset)
			}
		})
		waited := time.Since(start)
		switch {
		case behind == "" || mode == readStable:
			return stable, false, nil
		case mode == readQuiet && waited >= 5*time.Second:
			return stable, false, nil // a transaction still open after 5 s belongs to a live instance: read what is committed
		case mode == readAll && waited >= stableWait:
			return nil, false, fmt.Errorf("mirror: %s: a transaction stayed open for %s (%s): is a mirror of another name or an older run writing it?",
				topic, stableWait, behind)
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func readState(ctx context.Context, client []kgo.Opt, topic string, mode readMode) (*State, error) {
	adm, cl, err := adminClient(client)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	st := newState()
	ends, missing, err := stableEnds(ctx, adm, topic, mode)
	if err != nil || missing {
		return st, err
	}
	end, _ := ends.Lookup(topic, 0)
	start, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("mirror: list the start of %s: %w", topic, err)
	}
	first, _ := start.Lookup(topic, 0)
	if end.Offset <= first.Offset {
		return st, nil
	}
	rd, err := kgo.NewClient(with(client, []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(first.Offset)}})}, nil)...)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	defer rd.Close()
	for {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if mode == readStable {
			// An aborted transaction's records just below the last
			// stable offset, its marker above it, are never delivered:
			// a pause of 2 s means everything deliverable was read.
			pctx, cancel = context.WithTimeout(ctx, 2*time.Second)
		}
		fs := rd.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if timedOut && fs.NumRecords() == 0 {
			return st, nil
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("mirror: read %s: %w", topic, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		done := false
		var aerr error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				if r.Offset >= end.Offset {
					done = true
					break // committed after the read began: not asked for
				}
				if aerr == nil && !r.Attrs.IsControl() {
					aerr = st.apply(r)
				}
				if r.Offset+1 >= end.Offset {
					done = true
				}
			}
		})
		if aerr != nil {
			return nil, aerr
		}
		if done {
			return st, nil
		}
	}
}

func adminClient(client []kgo.Opt) (*kadm.Client, *kgo.Client, error) {
	cl, err := kgo.NewClient(client...)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: %w", err)
	}
	return kadm.NewClient(cl), cl, nil
}
