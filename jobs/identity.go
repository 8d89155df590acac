package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
)

// ErrTopicRecreated reports a topic deleted and created again under the
// same name since the job's checkpoints were made, under
// on_topic_recreated: fail.
var ErrTopicRecreated = errors.New("jobs: topic recreated")

// Topic identity. The checkpoints of a topic hold offsets of one topic's
// log; a topic deleted and created again under its name starts its offsets
// anew, and loading it from the old checkpoints would skip its first
// records in silence. So the job records the identity of each topic it
// loads, once, when it first plans it:
//
//	_sluice/topics/<topic>/<incarnation %06d>.json   {"topic", "incarnation", "id", "partitions",
//	                                                  "log_starts", "leader_epochs", "recorded"}
//
// created exclusively and never rewritten; the newest is the one the
// checkpoints under _sluice/commits/<topic>/ and _sluice/start/<topic>/
// are of. Each plan compares the cluster's topic with it. The topic was
// recreated when
//
//   - the cluster's topic id differs from the recorded one (Kafka 2.8+ and
//     sluice have topic ids); or, where either has none,
//   - a partition's log start offset or leader epoch is below the recorded
//     one (neither ever goes down within one topic's life);
//   - or the topic has fewer partitions than the job has loaded (a topic's
//     partitions are never removed).
//
// Then source.on_topic_recreated decides: fail (the default) stops the
// plan with an error naming the topic and what changed; restart starts the
// topic over: its checkpoints (commits and start records) are moved under
// _sluice/retired/<topic>/<incarnation %06d>/, its loaded files stay where
// they are, a record of the next incarnation is written, and every
// partition loads from its log start. Files of incarnation n > 0 are named
// <topic>+<partition>+<first>+<end>+i<n>.<ext>, so they never meet the
// older incarnation's files. A restart is in the run report's topics.
const (
	topicsDir  = "_sluice/topics"
	retiredDir = "_sluice/retired"
)

// topicRecord is one incarnation's identity record.
type topicRecord struct {
	Topic        string          `json:"topic"`
	Incarnation  int             `json:"incarnation"`
	ID           string          `json:"id,omitempty"`
	Partitions   int             `json:"partitions"`
	LogStarts    map[int32]int64 `json:"log_starts,omitempty"`
	LeaderEpochs map[int32]int32 `json:"leader_epochs,omitempty"`
	Recorded     time.Time       `json:"recorded"`
}

func topicRecordPath(topic string, inc int) string {
	return path.Join(topicsDir, topic, fmt.Sprintf("%06d.json", inc))
}

// incarnation returns the newest incarnation recorded for topic (-1 when
// the job never recorded one).
func (l *Loader) incarnation(topic string) (int, error) { return TopicIncarnation(l.fs, topic) }

// TopicIncarnation returns how many times the job whose output is fs
// started topic over (on_topic_recreated: restart): the checkpoints under
// _sluice/commits/<topic>/ are of that incarnation (-1 when the job never
// recorded the topic; 0 for the topic it first loaded).
func TopicIncarnation(fs vfs.FS, topic string) (int, error) {
	ents, err := fs.List(path.Join(topicsDir, topic))
	if errors.Is(err, vfs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("jobs: reading the identity of topic %s: %w", topic, err)
	}
	inc := -1
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name, ".json")); err == nil && strings.HasSuffix(e.Name, ".json") && n > inc {
			inc = n
		}
	}
	return inc, nil
}

// readTopicRecord returns the newest identity record of topic (nil when none).
func (l *Loader) readTopicRecord(topic string) (*topicRecord, error) {
	inc, err := l.incarnation(topic)
	if err != nil || inc < 0 {
		return nil, err
	}
	b, err := vfs.ReadFile(l.fs, topicRecordPath(topic, inc))
	if err != nil {
		return nil, fmt.Errorf("jobs: reading the identity of topic %s: %w", topic, err)
	}
	var r topicRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("jobs: the identity record %s is unreadable: %v", topicRecordPath(topic, inc), err)
	}
	r.Incarnation = inc
	return &r, nil
}

// startedPartitions lists the partitions of topic the job began to load
// (those with a start record).
func (l *Loader) startedPartitions(topic string) ([]int32, error) {
	ents, err := l.fs.List(path.Join(startDir, topic))
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int32
	for _, e := range ents {
		if p, err := strconv.ParseInt(e.Name, 10, 32); err == nil {
			out = append(out, int32(p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// topicPlans compares each topic of the job with its recorded identity:
// what changed, what on_topic_recreated makes of it, and which topics the
// job began already (their new partitions start at the log start).
func (l *Loader) topicPlans(ctx context.Context, parts []inputformat.PartitionOffsets) ([]inputformat.TopicPlan, map[string]bool, error) {
	ids, err := inputformat.TopicIDs(ctx, l.adm, l.spec.Topics())
	if err != nil {
		return nil, nil, err
	}
	byTopic := map[string][]inputformat.PartitionOffsets{}
	for _, p := range parts {
		byTopic[p.Topic] = append(byTopic[p.Topic], p)
	}
	begun := map[string]bool{}
	var out []inputformat.TopicPlan
	for _, t := range l.spec.Topics() {
		tp := ids[t]
		tp.Partitions = max(tp.Partitions, len(byTopic[t]))
		rec, err := l.readTopicRecord(t)
		if err != nil {
			return nil, nil, err
		}
		started, err := l.startedPartitions(t)
		if err != nil {
			return nil, nil, err
		}
		if rec != nil {
			tp.Incarnation = rec.Incarnation
		}
		begun[t] = rec != nil || len(started) > 0
		if why := recreatedBecause(rec, tp, byTopic[t], started); why != "" {
			tp.Recreated = why
			if l.spec.Source.OnTopicRecreated != TopicRecreatedRestart {
				return nil, nil, fmt.Errorf("%w: %s was deleted and created again since the job loaded it (%s): its new records would be loaded from the old topic's offsets. "+
					"Set source.on_topic_recreated: restart to load the new topic from its first offsets (the old topic's files stay; its checkpoints move to %s/%s/)",
					ErrTopicRecreated, t, why, retiredDir, t)
			}
			tp.Restart = true
			tp.Incarnation++
			begun[t] = true // every partition of the new topic loads from its log start
		}
		out = append(out, tp)
	}
	return out, begun, nil
}

// recreatedBecause says why the cluster's topic cur is not the one rec
// (and the started partitions) were recorded of, or "".
func recreatedBecause(rec *topicRecord, cur inputformat.TopicPlan, parts []inputformat.PartitionOffsets, started []int32) string {
	if n := len(started); n > 0 && int(started[n-1]) >= cur.Partitions {
		return fmt.Sprintf("it has %d partitions, and the job loaded partition %d", cur.Partitions, started[n-1])
	}
	if rec == nil {
		return ""
	}
	if rec.ID != "" && cur.ID != "" {
		if rec.ID != cur.ID {
			return fmt.Sprintf("its topic id is %s, the job's checkpoints are of topic id %s", cur.ID, rec.ID)
		}
		return ""
	}
	if cur.Partitions < rec.Partitions {
		return fmt.Sprintf("it has %d partitions, it had %d", cur.Partitions, rec.Partitions)
	}
	for _, p := range parts {
		if ls, ok := rec.LogStarts[p.Partition]; ok && p.LogStart < ls {
			return fmt.Sprintf("partition %d's log start offset went back from %d to %d", p.Partition, ls, p.LogStart)
		}
		if e, ok := rec.LeaderEpochs[p.Partition]; ok && p.LeaderEpoch >= 0 && e >= 0 && p.LeaderEpoch < e {
			return fmt.Sprintf("partition %d's leader epoch went back from %d to %d", p.Partition, e, p.LeaderEpoch)
		}
	}
	return ""
}

// recordTopics writes what a plan decided of the topics' identities:
// a restart retires the old incarnation's checkpoints first; a topic with
// no record gets its first. Prepare calls it before any start record.
func (l *Loader) recordTopics(plan *inputformat.Plan) error {
	for _, tp := range plan.Topics {
		inc, err := l.incarnation(tp.Topic)
		if err != nil {
			return err
		}
		switch {
		case tp.Restart && inc == tp.Incarnation:
			continue // done by a run that planned the same
		case tp.Restart:
			if err := l.retireTopic(tp.Topic, tp.Incarnation-1); err != nil {
				return err
			}
		case inc >= 0:
			continue
		}
		if err := l.writeTopicRecord(plan, tp); err != nil {
			return err
		}
		if tp.Restart {
			l.log.Warn("topic recreated: started over (on_topic_recreated: restart)", "topic", tp.Topic, "why", tp.Recreated, "incarnation", tp.Incarnation)
		}
	}
	return nil
}

func (l *Loader) writeTopicRecord(plan *inputformat.Plan, tp inputformat.TopicPlan) error {
	r := topicRecord{Topic: tp.Topic, Incarnation: tp.Incarnation, ID: tp.ID, Partitions: tp.Partitions,
		LogStarts: map[int32]int64{}, LeaderEpochs: map[int32]int32{}, Recorded: l.opts.Clock.Now().UTC()}
	for _, pp := range plan.Partitions {
		if pp.Topic == tp.Topic {
			r.LogStarts[pp.Partition] = pp.LogStart
			r.LeaderEpochs[pp.Partition] = pp.LeaderEpoch
		}
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	p := topicRecordPath(tp.Topic, tp.Incarnation)
	if err := l.fs.MkdirAll(path.Dir(p)); err != nil {
		return fmt.Errorf("jobs: recording topic %s: %w", tp.Topic, err)
	}
	err := l.fs.WriteExclusive(p, append(b, '\n'))
	if errors.Is(err, vfs.ErrExist) {
		got, rerr := l.readTopicRecord(tp.Topic)
		if rerr != nil {
			return rerr
		}
		if got.ID != tp.ID {
			return fmt.Errorf("%w: topic %s: another run recorded topic id %q meanwhile (this plan saw %q); plan again", ErrNotReady, tp.Topic, got.ID, tp.ID)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("jobs: recording topic %s: %w", tp.Topic, err)
	}
	return nil
}

// retireTopic moves the checkpoints of incarnation inc of topic (its
// commits and start records) under _sluice/retired/<topic>/<inc>/, after
// recovery finished or removed every attempt of it. Loaded files stay. It
// can be run again after a crash: what was moved is not there any more.
func (l *Loader) retireTopic(topic string, inc int) error {
	tmp := path.Join(writers.SluiceDir, "tmp", topic)
	ents, err := l.fs.List(tmp)
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		p, err := strconv.ParseInt(e.Name, 10, 32)
		if err != nil {
			continue
		}
		rep, err := l.store.Recover(topic, int32(p))
		if err != nil {
			return fmt.Errorf("jobs: recovering %s/%d before its restart: %w", topic, p, err)
		}
		if len(rep.Pending) > 0 {
			return fmt.Errorf("%w: %s/%d has live attempts of the old topic (%s); restart it once they end", ErrNotReady, topic, p, rep.Pending[0])
		}
	}
	dest := path.Join(retiredDir, topic, fmt.Sprintf("%06d", inc))
	commits := path.Join(writers.SluiceDir, "commits", topic)
	parts, err := l.fs.List(commits)
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	if err := l.fs.MkdirAll(path.Join(dest, "commits")); err != nil {
		return err
	}
	for _, e := range parts {
		if err := l.fs.RenameNoReplace(path.Join(commits, e.Name), path.Join(dest, "commits", e.Name)); err != nil {
			return fmt.Errorf("jobs: retiring the checkpoints of %s/%s: %w", topic, e.Name, err)
		}
	}
	if err := l.fs.RenameNoReplace(path.Join(startDir, topic), path.Join(dest, "start")); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("jobs: retiring the start records of %s: %w", topic, err)
	}
	l.log.Info("retired the checkpoints of a recreated topic", "topic", topic, "incarnation", inc, "to", dest)
	return nil
}
