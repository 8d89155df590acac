package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/history"
)

// ConsumerConfig configures Consume.
type ConsumerConfig struct {
	Bootstrap []string
	Topic     string
	// Partitions are consumed, each from From (default: partition 0).
	Partitions []int32
	// From is the offset every partition starts at.
	From int64
	// Process is the history's process id.
	Process int
	// Until stops the consumer once it returns true for the number of
	// records polled so far (nil: run until ctx ends).
	Until func(polled int) bool
	// Options are extra franz-go options.
	Options []kgo.Opt
}

// pollWait bounds one poll, so that Until is asked again while nothing
// arrives.
const pollWait = 500 * time.Millisecond

func pollOnce(ctx context.Context, cl *kgo.Client) kgo.Fetches {
	ctx, cancel := context.WithTimeout(ctx, pollWait)
	defer cancel()
	return cl.PollFetches(ctx)
}

// pollRecords turns fetched records into history records.
func pollRecords(fs kgo.Fetches) []history.Record {
	var out []history.Record
	fs.EachRecord(func(r *kgo.Record) {
		out = append(out, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	})
	return out
}

// Consume reads the partitions from From, recording an assign and then
// every poll that returned records, until Until says so or ctx ends. It
// returns nil when stopped by Until or ctx.
func Consume(ctx context.Context, rec *history.Recorder, cfg ConsumerConfig) error {
	parts := cfg.Partitions
	if len(parts) == 0 {
		parts = []int32{0}
	}
	offs := map[int32]kgo.Offset{}
	var assign []history.Offset
	for _, p := range parts {
		offs[p] = kgo.NewOffset().At(cfg.From)
		assign = append(assign, history.Offset{Topic: cfg.Topic, Partition: p, Offset: cfg.From})
	}
	inv := rec.Invoke(cfg.Process, history.Assign)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offs}),
		kgo.FetchMaxWait(200 * time.Millisecond)}, cfg.Options...)...)
	if err != nil {
		inv.Complete(history.Op{Outcome: history.Fail, Error: err.Error()})
		return fmt.Errorf("workload: consumer: %w", err)
	}
	defer cl.Close()
	inv.Complete(history.Op{Outcome: history.OK, Offsets: assign})
	polled := 0
	for ctx.Err() == nil && (cfg.Until == nil || !cfg.Until(polled)) {
		inv := rec.Invoke(cfg.Process, history.Poll)
		fs := pollOnce(ctx, cl)
		if rs := pollRecords(fs); len(rs) > 0 {
			inv.Complete(history.Op{Outcome: history.OK, Records: rs})
			polled += len(rs)
		}
	}
	return nil
}

// GroupConfig configures ConsumeGroup.
type GroupConfig struct {
	Bootstrap []string
	Topic     string
	Group     string
	// Process is the history's process id.
	Process int
	// Until stops the member once it returns true for the number of
	// records it polled (nil: run until ctx ends).
	Until func(polled int) bool
	// NoRetention says nothing is ever deleted from the topic, so a
	// partition without a committed offset starts at offset 0: its assign
	// says 0 instead of -1 (unknown), and its first poll is checked for a
	// skip too.
	NoRetention bool
	// Options are extra franz-go options (session timeouts, balancers).
	Options []kgo.Opt
}

// ConsumeGroup runs one group member: at each assignment it records the
// committed offsets it starts from (a fetch-committed and an assign), then
// every poll, and after each poll a commit of what it polled (rebalances
// wait until that commit is done). It returns nil when stopped by Until or
// ctx; the member leaves the group on return.
//
// A commit is sent only under the group session (member id and
// generation) its records were polled in; otherwise it is refused before
// it is sent (ErrSessionChanged, recorded as failed). Kafka's coordinator
// checks a commit's member id and generation, not that the member owns the
// partitions it commits, and franz-go may send a commit under a session
// begun after the poll: an OffsetCommit answered UNKNOWN_MEMBER_ID makes it
// rejoin at once, as a new member, without dropping the partitions it
// held, so its next poll returns records of a partition another member
// now owns, and their commit, held until the rejoin completes, goes out
// under the new member id and generation, which the coordinator accepts —
// moving the group's offset back below the new owner's.
func ConsumeGroup(ctx context.Context, rec *history.Recorder, cfg GroupConfig) error {
	var fetchInv history.Pending
	var synced session // the session of the last completed join and sync
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap...), kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		// called after every sync, with what it added (perhaps nothing)
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, _ map[string][]int32) {
			synced.set(cl.GroupMetadata())
			fetchInv = rec.Invoke(cfg.Process, history.FetchCommitted)
		}),
		kgo.AdjustFetchOffsetsFn(func(_ context.Context, m map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			var committed, assign []history.Offset
			for t, ps := range m {
				for p, o := range ps {
					off := o.EpochOffset().Offset
					if off < 0 {
						off = -1 // nothing committed: the reset offset, unknown here
					}
					committed = append(committed, history.Offset{Topic: t, Partition: p, Offset: off})
					if off < 0 && cfg.NoRetention {
						off = 0 // the reset offset, the log start
					}
					assign = append(assign, history.Offset{Topic: t, Partition: p, Offset: off})
				}
			}
			inv := fetchInv
			if inv == (history.Pending{}) {
				inv = rec.Invoke(cfg.Process, history.FetchCommitted)
			}
			fetchInv = history.Pending{}
			inv.Complete(history.Op{Outcome: history.OK, Group: cfg.Group, Offsets: committed})
			rec.Invoke(cfg.Process, history.Assign).Complete(history.Op{Outcome: history.OK, Offsets: assign})
			return m, nil
		}),
	}
	cl, err := kgo.NewClient(append(opts, cfg.Options...)...)
	if err != nil {
		return fmt.Errorf("workload: group consumer: %w", err)
	}
	defer cl.Close()
	polled := 0
	for ctx.Err() == nil && (cfg.Until == nil || !cfg.Until(polled)) {
		inv := rec.Invoke(cfg.Process, history.Poll)
		fs := pollOnce(ctx, cl)
		rs := pollRecords(fs)
		if len(rs) > 0 {
			// The session the records were polled in. Read after the
			// poll, it cannot change before AllowRebalance: franz-go runs
			// a user's OnPartitionsAssigned (which sets synced) only while
			// no poll is held (BlockRebalanceOnPoll), and before it the
			// sync revokes what the new session lost, with its buffered
			// records. A join completed meanwhile shows in the commit
			// (sent != in), not here.
			in := synced.get()
			inv.Complete(history.Op{Outcome: history.OK, Records: rs, Member: in.member, Generation: in.generation})
			polled += len(rs)
			commitPolled(ctx, rec, cl, cfg, fs, in)
		}
		cl.AllowRebalance()
	}
	return nil
}

// ErrSessionChanged refuses a commit whose client would send it under
// another group session than the one its records were polled in.
var ErrSessionChanged = errors.New("workload: the group session changed since the poll: the commit was not sent")

// session is a group member id and generation.
type session struct {
	mu         sync.Mutex // guards the fields below
	member     string
	generation int32
}

func (s *session) set(member string, generation int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.member, s.generation = member, generation
}

// sessionID is a session's value.
type sessionID struct {
	member     string
	generation int32
}

func (s *session) get() sessionID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sessionID{s.member, s.generation}
}

// commitPolled commits the offsets after the records of fs, polled in
// session in, and records it: refused (ErrSessionChanged) if the client
// would send it under another session.
func commitPolled(ctx context.Context, rec *history.Recorder, cl *kgo.Client, cfg GroupConfig, fs kgo.Fetches, in sessionID) {
	type partition struct {
		topic string
		id    int32
	}
	next := map[partition]int64{}
	var recs []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		recs = append(recs, r)
		next[partition{r.Topic, r.Partition}] = r.Offset + 1
	})
	var offs []history.Offset
	for k, o := range next {
		offs = append(offs, history.Offset{Topic: k.topic, Partition: k.id, Offset: o})
	}
	inv := rec.Invoke(cfg.Process, history.Commit)
	var sent sessionID // set by franz-go just before it sends the commit
	err := cl.CommitRecords(kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		sent = sessionID{req.MemberID, req.Generation}
		if sent != in {
			return fmt.Errorf("%w (polled as %s in generation %d, to be sent as %s in %d)", ErrSessionChanged, in.member, in.generation, sent.member, sent.generation)
		}
		return nil
	}), recs...)
	op := history.Op{Outcome: history.OK, Group: cfg.Group, Offsets: offs, Member: sent.member, Generation: sent.generation}
	if err != nil {
		op.Outcome, op.Error = CommitOutcome(err), err.Error()
	}
	inv.Complete(op)
}

// CommitOutcome classifies a commit error: fail when the coordinator
// refused the member's generation or the commit was never sent
// (ErrSessionChanged), so it was not applied; unknown otherwise.
func CommitOutcome(err error) history.Outcome {
	for _, refused := range []error{kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress, kerr.FencedInstanceID, ErrSessionChanged} {
		if errors.Is(err, refused) {
			return history.Fail
		}
	}
	return history.Unknown
}
