package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/internal/mutate"
)

var (
	// ErrBadInput is wrapped by every error a mirror's configuration caused.
	ErrBadInput = errors.New("mirror: bad input")
	// ErrBadState is wrapped when the checkpoint topic holds a record this
	// mirror cannot read (another program's, or a newer version's).
	ErrBadState = errors.New("mirror: unreadable checkpoint topic")
	// ErrFenced is wrapped when another instance with the same name took
	// over the transactional id: this one stops.
	ErrFenced = errors.New("mirror: fenced by another instance with the same name")
	// ErrSourceTruncated is wrapped when the source no longer holds the
	// committed position (retention or DeleteRecords removed it) and
	// OnOutOfRange is "fail", or when the position is beyond the source's end.
	ErrSourceTruncated = errors.New("mirror: the source no longer holds the mirror's position")
)

// Config configures a mirror. Zero values are the defaults noted.
type Config struct {
	// From and To are the source and target bootstrap lists (HOST:PORT,...);
	// FromSecurity and ToSecurity how to reach them (zero: PLAINTEXT).
	From, To                 string
	FromSecurity, ToSecurity kafka.Security
	// Selection chooses the source topics.
	Selection Selection
	// Name names the mirror: its transactional id (sluice-mirror.NAME) and
	// its checkpoint topic (NAME.checkpoints) on the target. Default "mirror".
	Name string
	// Start is where a partition without a committed position starts:
	// "earliest" (default) or "latest". Partitions and topics that appear
	// while the mirror runs always start at their earliest offset.
	Start string
	// OnOutOfRange is "fail" (default) or "skip": what to do when the
	// source's log start has passed the committed position.
	OnOutOfRange string
	// CommitInterval is how long one transaction collects records
	// (default 200 ms); MaxTxnRecords caps its records (default 50 000).
	CommitInterval time.Duration
	MaxTxnRecords  int
	// CheckpointInterval is how often checkpoints are written (default 5 s).
	CheckpointInterval time.Duration
	// RefreshInterval is how often the source's topics are listed for new
	// topics and partitions (default 10 s).
	RefreshInterval time.Duration
	// Compression is the target producer's codec (default none).
	Compression string
	// ExitWhenCaughtUp ends Run once every partition's committed position
	// reached the source's high watermark (benchmarks and tests).
	ExitWhenCaughtUp bool
	// Logger receives the mirror's log (nil discards it).
	Logger *slog.Logger
	// Progress receives a progress line every ProgressInterval (nil: none).
	Progress         io.Writer
	ProgressInterval time.Duration
	// Metrics records the mirror's metrics (nil: none).
	Metrics *Metrics
	// Audit publishes the mirror tier (internal/audit.Mirror): the records
	// copied per topic and window of AuditWindow (0: 10m), in the target's
	// _audit, in the transaction of the copies.
	Audit       bool
	AuditWindow time.Duration
	// ClientOpts are added to every franz-go client (tests: logging, timeouts).
	ClientOpts []kgo.Opt
}

// TransactionalID is the transactional id of the mirror name on the target.
func TransactionalID(name string) string { return "sluice-mirror." + name }

// Mirror copies the selected topics from one cluster to another.
type Mirror struct {
	cfg       Config
	log       *slog.Logger
	from, to  []kgo.Opt // seeds and security of each side (kafka.ClientOptions)
	codec     kgo.CompressionCodec
	ckptTopic string
	crash     *crashPoint // nil unless CrashEnv is set (test builds only)
}

// New checks cfg and returns a mirror; Run starts it.
func New(cfg Config) (*Mirror, error) {
	if cfg.Selection.Topics == nil {
		return nil, fmt.Errorf("%w: no --topics pattern", ErrBadInput)
	}
	if cfg.Name == "" {
		cfg.Name = "mirror"
	}
	if err := checkName(cfg.Name); err != nil {
		return nil, err
	}
	from, err := sideOptions("--from", cfg.From, cfg.FromSecurity)
	if err != nil {
		return nil, err
	}
	to, err := sideOptions("--to", cfg.To, cfg.ToSecurity)
	if err != nil {
		return nil, err
	}
	codec, err := kafka.ParseCompression(cfg.Compression)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	switch cfg.Start {
	case "":
		cfg.Start = "earliest"
	case "earliest", "latest":
	default:
		return nil, fmt.Errorf("%w: --start %q: use earliest or latest", ErrBadInput, cfg.Start)
	}
	switch cfg.OnOutOfRange {
	case "":
		cfg.OnOutOfRange = "fail"
	case "fail", "skip":
	default:
		return nil, fmt.Errorf("%w: --on-out-of-range %q: use fail or skip", ErrBadInput, cfg.OnOutOfRange)
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = 200 * time.Millisecond
	}
	if cfg.MaxTxnRecords <= 0 {
		cfg.MaxTxnRecords = 50_000
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = 5 * time.Second
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("mirror", cfg.Name)
	return &Mirror{cfg: cfg, log: log, from: from, to: to, codec: codec,
		ckptTopic: CheckpointTopic(cfg.Name), crash: crashFromEnv(log)}, nil
}

// sideOptions are the options every client of one cluster starts from:
// its seed brokers and security (kafka.ClientOptions, as every client of
// the tools).
func sideOptions(flag, bootstrap string, sec kafka.Security) ([]kgo.Opt, error) {
	opts, err := kafka.ClientOptions(bootstrap, sec)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadInput, flag, err)
	}
	return opts, nil
}

// with is side's options, then more, then the configured ClientOpts.
func with(side []kgo.Opt, more []kgo.Opt, extra []kgo.Opt) []kgo.Opt {
	return append(append(append([]kgo.Opt(nil), side...), more...), extra...)
}

// checkName accepts names that make a legal topic name with ".checkpoints".
func checkName(name string) error {
	if len(name) > 200 {
		return fmt.Errorf("%w: --name is longer than 200 characters", ErrBadInput)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: --name %q: use letters, digits, '.', '_' and '-'", ErrBadInput, name)
		}
	}
	return nil
}

// permanent reports errors a new session cannot cure.
func permanent(err error) bool {
	return errors.Is(err, ErrBadInput) || errors.Is(err, ErrBadState) || errors.Is(err, ErrFenced) ||
		errors.Is(err, ErrSourceTruncated)
}

// errCaughtUp ends a session when ExitWhenCaughtUp is set.
var errCaughtUp = errors.New("mirror: caught up")

// Run mirrors until ctx ends (nil), an error no restart can cure, or, with
// ExitWhenCaughtUp, the mirror has caught up. Any other failure (a broker
// gone, a transaction that did not commit) ends the session: its open
// transaction is aborted by the next session's fencing, and the next
// session resumes from the committed position.
func (m *Mirror) Run(ctx context.Context) error {
	var prog *kafka.Progress
	if m.cfg.Progress != nil {
		prog = kafka.StartProgress(m.cfg.Progress, "mirrored", m.cfg.ProgressInterval)
		defer prog.Stop()
	}
	backoff := 500 * time.Millisecond
	for {
		err := m.session(ctx, prog)
		if ctx.Err() != nil || errors.Is(err, errCaughtUp) {
			return nil
		}
		if err == nil || permanent(err) {
			return err
		}
		m.log.Warn("mirror session failed; resuming from the committed position", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		if backoff < 10*time.Second {
			backoff *= 2
		}
	}
}

// session is one fenced producer and one consumer, from the committed
// position until an error.
func (m *Mirror) session(ctx context.Context, prog *kafka.Progress) error {
	prod, err := kgo.NewClient(with(m.to, []kgo.Opt{
		kgo.TransactionalID(TransactionalID(m.cfg.Name)), kgo.TransactionTimeout(60 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(m.codec),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(2 * m.cfg.MaxTxnRecords),
		kgo.ProducerBatchMaxBytes(1 << 20)}, m.cfg.ClientOpts)...)
	if err != nil {
		return fmt.Errorf("%w: target client: %v", ErrBadInput, err)
	}
	defer prod.Close()
	// InitProducerId fences an older instance and aborts its open
	// transaction before the committed position is read.
	if _, _, err := prod.ProducerID(ctx); err != nil {
		return fenced(fmt.Errorf("mirror: init the transactional producer on the target: %w", err))
	}
	dst := kadm.NewClient(prod)
	if err := ensureCheckpointTopic(ctx, dst, m.ckptTopic); err != nil {
		return err
	}
	st, err := ReadState(ctx, with(m.to, nil, m.cfg.ClientOpts), m.ckptTopic)
	if err != nil {
		return err
	}
	srcCl, err := kgo.NewClient(with(m.from, nil, m.cfg.ClientOpts)...)
	if err != nil {
		return fmt.Errorf("%w: source client: %v", ErrBadInput, err)
	}
	defer srcCl.Close()
	s := &copySession{m: m, prod: prod, src: kadm.NewClient(srcCl), dst: dst, st: st, prog: prog,
		partitions: map[string]int32{}, ids: map[string]string{}, next: map[Partition]int64{}, target: map[Partition]int64{},
		hwm: map[Partition]int64{}, lastCkpt: map[Partition]int64{}, origin: map[Partition]Mapping{}}
	if m.cfg.Audit {
		if err := s.startAudit(ctx); err != nil {
			return err
		}
	}
	starts, err := s.refresh(ctx, true)
	if err != nil {
		return err
	}
	cons, err := kgo.NewClient(with(m.from, []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchMaxBytes(32 << 20),
		kgo.FetchMaxPartitionBytes(8 << 20), kgo.ConsumePartitions(starts)}, m.cfg.ClientOpts)...)
	if err != nil {
		return fmt.Errorf("%w: source consumer: %v", ErrBadInput, err)
	}
	defer cons.Close()
	s.cons = cons
	m.log.Info("mirror session started", "topics", len(s.partitions), "partitions", len(s.next),
		"checkpoint_topic", m.ckptTopic, "transactional_id", TransactionalID(m.cfg.Name))
	return s.loop(ctx)
}

// fenced marks the errors that say another producer owns the id.
func fenced(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		return fmt.Errorf("%w: %v", ErrFenced, err)
	}
	return err
}

// copySession is the state of one session; only its loop's goroutine uses it.
type copySession struct {
	m    *Mirror
	prod *kgo.Client
	cons *kgo.Client
	src  *kadm.Client
	dst  *kadm.Client
	st   *State
	prog *kafka.Progress

	partitions map[string]int32      // mirrored topics and their partition counts
	ids        map[string]string     // mirrored topics' source topic IDs ("": none)
	next       map[Partition]int64   // next source offset, committed
	target     map[Partition]int64   // target offset after the last committed copy
	hwm        map[Partition]int64   // the source's high watermark, last seen
	lastCkpt   map[Partition]int64   // source offset of the last checkpoint written
	origin     map[Partition]Mapping // where a partition without a position started
	ckptAt     time.Time             // when checkpoints were last written
	refreshAt  time.Time             // when topics were last listed
	audit      *audit.Mirror         // the mirror tier (nil: Config.Audit off)
	auditParts int                   // partitions of the target's _audit
	// auditDropped is the records the mirror tier could not count, as last logged.
	auditDropped int64
}

// startAudit starts the session's mirror tier from the counts committed in
// the target's _audit (read after InitProducerId aborted the last
// instance's open transaction), under the origin NAME/SOURCE-CLUSTER-ID.
func (s *copySession) startAudit(ctx context.Context) error {
	md, err := s.src.BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("mirror: the source's cluster id: %w", err)
	}
	cluster := md.Cluster
	if cluster == "" {
		cluster = s.m.cfg.From
	}
	tier, err := audit.NewMirror(audit.MirrorOrigin(s.m.cfg.Name, cluster), s.m.cfg.AuditWindow)
	if err != nil {
		return fmt.Errorf("%w: --audit-window: %v", ErrBadInput, err)
	}
	if err := audit.EnsureTopic(ctx, s.prod); err != nil {
		return err
	}
	tds, err := s.dst.ListTopics(ctx, audit.Topic)
	if err == nil {
		err = tds.Error()
	}
	if err != nil {
		return fmt.Errorf("mirror: the target's %s: %w", audit.Topic, err)
	}
	counts, err := audit.ReadCounts(ctx, with(s.m.to, nil, s.m.cfg.ClientOpts))
	if err != nil {
		return err
	}
	if err := tier.Restore(counts.Counts); err != nil {
		return fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	s.audit, s.auditParts = tier, len(tds[audit.Topic].Partitions)
	return nil
}

// refresh lists the source's topics, creates or grows them on the target
// and returns the start offsets of partitions not yet consumed. At the
// session's start (first) a partition resumes at its committed position.
func (s *copySession) refresh(ctx context.Context, first bool) (map[string]map[int32]kgo.Offset, error) {
	s.refreshAt = time.Now()
	topics, err := listSelected(ctx, s.src, s.m.cfg.Selection)
	if err != nil {
		return nil, err
	}
	var fresh []string
	for _, t := range topics {
		if t.name == s.m.ckptTopic {
			continue
		}
		if have, ok := s.partitions[t.name]; ok && have >= t.partitions {
			continue
		}
		created, err := ensureTargetTopic(ctx, s.src, s.dst, t)
		if err != nil {
			return nil, err
		}
		if created {
			s.m.log.Info("created target topic", "topic", t.name, "partitions", t.partitions)
		}
		fresh = append(fresh, t.name)
		if _, known := s.partitions[t.name]; !known && !first {
			s.m.log.Info("following a new topic", "topic", t.name, "partitions", t.partitions)
		}
		s.partitions[t.name] = t.partitions
		if t.id != (kadm.TopicID{}) {
			s.ids[t.name] = t.id.String()
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	startOffsets, err := s.src.ListStartOffsets(ctx, fresh...)
	if err == nil {
		err = startOffsets.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: list the source's log start offsets: %w", err)
	}
	endOffsets, err := s.src.ListEndOffsets(ctx, fresh...)
	if err == nil {
		err = endOffsets.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: list the source's end offsets: %w", err)
	}
	targetEnds, err := s.targetEnds(ctx, fresh)
	if err != nil {
		return nil, fmt.Errorf("mirror: list the target's end offsets: %w", err)
	}
	out := map[string]map[int32]kgo.Offset{}
	for _, topic := range fresh {
		for p := int32(0); p < s.partitions[topic]; p++ {
			tp := Partition{topic, p}
			if _, consuming := s.next[tp]; consuming {
				continue
			}
			lo, _ := startOffsets.Lookup(topic, p)
			hi, _ := endOffsets.Lookup(topic, p)
			s.hwm[tp] = hi.Offset
			at, err := s.startOf(tp, lo.Offset, hi.Offset, first)
			if err != nil {
				return nil, err
			}
			s.next[tp] = at
			if pos := s.st.Positions[tp]; pos != nil && pos.Target >= 0 {
				s.target[tp] = pos.Target
			} else {
				// The partition's origin: every source record from at on
				// lands at or after the target's end now.
				te, _ := targetEnds.Lookup(topic, p)
				s.target[tp] = te.Offset
				s.origin[tp] = Mapping{Source: at, Target: te.Offset}
			}
			if c := s.st.Checkpoints[tp]; c != nil && len(c.History) > 0 {
				s.lastCkpt[tp] = c.History[len(c.History)-1].Source
			} else {
				s.lastCkpt[tp] = -1
			}
			if out[topic] == nil {
				out[topic] = map[int32]kgo.Offset{}
			}
			out[topic][p] = kgo.NewOffset().At(at)
		}
	}
	return out, nil
}

// targetEnds lists the end offsets of topics on the target, waiting up to
// 10 s for topics just created to be known there (before, the session
// failed and the mirror began only after its 0.5 s backoff).
func (s *copySession) targetEnds(ctx context.Context, topics []string) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ends, err := s.dst.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return ends, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startOf is where partition tp resumes, given the source's log start and
// end offsets.
func (s *copySession) startOf(tp Partition, logStart, end int64, first bool) (int64, error) {
	pos := s.st.Positions[tp]
	if pos == nil {
		if first && s.m.cfg.Start == "latest" {
			return end, nil
		}
		return logStart, nil
	}
	if id := s.ids[tp.Topic]; pos.TopicID != "" && id != "" && pos.TopicID != id {
		return 0, fmt.Errorf("%w: %s: the topic was recreated (topic ID %s, the committed position's %s); delete %s on the target to start over",
			ErrSourceTruncated, tp, id, pos.TopicID, s.m.ckptTopic)
	}
	at := pos.Source
	if at > end {
		return 0, fmt.Errorf("%w: %s: the committed position %d is beyond the source's end %d (was the topic recreated? delete %s on the target to start over)",
			ErrSourceTruncated, tp, at, end, s.m.ckptTopic)
	}
	if at < logStart {
		if s.m.cfg.OnOutOfRange != "skip" {
			return 0, fmt.Errorf("%w: %s: the committed position %d is below the source's log start %d; %d offsets were deleted before they were copied (--on-out-of-range skip resumes at the log start)",
				ErrSourceTruncated, tp, at, logStart, logStart-at)
		}
		s.m.log.Warn("skipping offsets deleted at the source before they were copied", "partition", tp.String(),
			"from", at, "to", logStart, "skipped", logStart-at)
		if mt := s.m.cfg.Metrics; mt != nil {
			mt.skipped.WithLabelValues(tp.Topic).Add(float64(logStart - at))
		}
		return logStart, nil
	}
	return at, nil
}

// txn is what one transaction copied.
type txn struct {
	next    map[Partition]int64 // next source offset after this transaction
	last    map[Partition]int64 // highest target offset acknowledged
	records map[string]int64    // per topic
	bytes   map[string]int64
	n       int
	mu      sync.Mutex // guards err and last while records are in flight
	err     error
}

func (t *txn) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (s *copySession) loop(ctx context.Context) error {
	for {
		if err := s.prod.BeginTransaction(); err != nil {
			return fenced(fmt.Errorf("mirror: begin a transaction: %w", err))
		}
		t, err := s.collect(ctx)
		if err == nil {
			err = s.commit(ctx, t)
		}
		if s.audit != nil {
			s.audit.Ended(err == nil)
			if d := s.audit.Dropped(); d > s.auditDropped {
				s.m.log.Warn("audit: copied records not counted: the mirror tier holds at most audit.MaxCells (topic, window) counts",
					"not_counted", d, "max_cells", audit.MaxCells)
				s.auditDropped = d
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				s.abort()
			}
			return err
		}
		if s.m.cfg.ExitWhenCaughtUp && s.caughtUp() {
			return errCaughtUp
		}
		if time.Since(s.refreshAt) >= s.m.cfg.RefreshInterval {
			starts, err := s.refresh(ctx, false)
			if err != nil {
				return err
			}
			if len(starts) > 0 {
				s.cons.AddConsumePartitions(starts)
			}
		}
	}
}

// abort ends the open transaction on the way out (best effort: the next
// session's fencing aborts it anyway).
func (s *copySession) abort() {
	actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.prod.AbortBufferedRecords(actx)
	_ = s.prod.EndTransaction(actx, kgo.TryAbort)
	if mt := s.m.cfg.Metrics; mt != nil {
		mt.transactions.WithLabelValues("abort").Inc()
	}
}

func (s *copySession) caughtUp() bool {
	for tp, n := range s.next {
		if n < s.hwm[tp] {
			return false
		}
	}
	return true
}

// collect polls the source for one commit interval (or MaxTxnRecords) and
// produces each record into the open transaction, on the same topic and
// partition, with its key, value, headers and timestamp.
func (s *copySession) collect(ctx context.Context) (*txn, error) {
	t := &txn{next: map[Partition]int64{}, last: map[Partition]int64{}, records: map[string]int64{}, bytes: map[string]int64{}}
	deadline := time.Now().Add(s.m.cfg.CommitInterval)
	promise := func(r *kgo.Record, err error) {
		// Called from franz-go's goroutines; Flush returns after every
		// promise ran, so commit reads t after Flush.
		t.mu.Lock()
		defer t.mu.Unlock()
		if err != nil {
			if t.err == nil {
				t.err = err
			}
			return
		}
		tp := Partition{r.Topic, r.Partition}
		if last, ok := t.last[tp]; !ok || r.Offset > last {
			t.last[tp] = r.Offset
		}
	}
	for t.n < s.m.cfg.MaxTxnRecords && time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := s.cons.PollRecords(pctx, s.m.cfg.MaxTxnRecords-t.n)
		cancel()
		if err := ctx.Err(); err != nil {
			return t, err
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if ferr == nil {
				ferr = fmt.Errorf("mirror: fetch %s/%d from the source: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return t, ferr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			tp := Partition{p.Topic, p.Partition}
			if p.HighWatermark > s.hwm[tp] {
				s.hwm[tp] = p.HighWatermark
			}
			for _, r := range p.Records {
				t.next[tp] = r.Offset + 1
				if r.Attrs.IsControl() {
					continue
				}
				if s.audit != nil {
					s.audit.Copied(r)
				}
				out := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value,
					Headers: r.Headers, Timestamp: r.Timestamp}
				s.prod.Produce(ctx, out, promise)
				t.n++
				t.records[r.Topic]++
				t.bytes[r.Topic] += int64(len(r.Key) + len(r.Value))
			}
		})
	}
	return t, nil
}

// commit flushes the copied records, adds the position (and, when due, the
// checkpoint) records to the same transaction and commits it.
func (s *copySession) commit(ctx context.Context, t *txn) error {
	// A partition without a committed position gets one in this
	// transaction, copied or not: a restart must resume where this session
	// started it, not resolve --start latest (or a moved log start) again
	// and skip, uncounted, what arrived in between.
	for tp, next := range s.next {
		if _, ok := t.next[tp]; !ok && s.st.Positions[tp] == nil {
			t.next[tp] = next
		}
	}
	if len(t.next) == 0 {
		// Nothing was added: ending the empty transaction sends nothing.
		return fenced(s.prod.EndTransaction(ctx, kgo.TryCommit))
	}
	if err := s.prod.Flush(ctx); err != nil {
		return err
	}
	if err := t.failed(); err != nil {
		return fenced(fmt.Errorf("mirror: produce to the target: %w", err))
	}
	if mutate.Enabled(mutate.MirrorPosition) { // the unsafe way: the records commit without their position
		if err := s.prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fenced(err)
		}
		if err := s.prod.BeginTransaction(); err != nil {
			return fenced(err)
		}
	}
	s.m.crash.at(StageCopied)
	now := time.Now()
	ckptDue := now.Sub(s.ckptAt) >= s.m.cfg.CheckpointInterval
	targets := map[Partition]int64{}
	var state []*kgo.Record
	t.mu.Lock()
	for tp, next := range t.next {
		target := s.target[tp] // -1: no record copied yet, no mapping
		if last, ok := t.last[tp]; ok {
			target = last + 1
		}
		targets[tp] = target
		state = append(state, positionRecord(s.m.ckptTopic, tp, Position{Mapping: Mapping{Source: next, Target: target}, CommittedMs: now.UnixMilli(), TopicID: s.ids[tp.Topic]}))
	}
	t.mu.Unlock()
	if s.audit != nil { // the counts commit with the copies they count
		recs, err := s.audit.Records(now, s.auditParts)
		if err != nil {
			return err
		}
		state = append(state, recs...)
	}
	var ckpts map[Partition]*Checkpoints
	if ckptDue {
		ckpts = s.checkpoints(t, targets, now)
		for tp, c := range ckpts {
			state = append(state, checkpointsRecord(s.m.ckptTopic, tp, c))
		}
	}
	for _, r := range state {
		s.prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			t.mu.Lock()
			defer t.mu.Unlock()
			if err != nil && t.err == nil {
				t.err = err
			}
		})
	}
	if err := s.prod.Flush(ctx); err != nil {
		return err
	}
	if err := t.failed(); err != nil {
		return fenced(fmt.Errorf("mirror: write the position to %s: %w", s.m.ckptTopic, err))
	}
	s.m.crash.at(StagePositioned)
	if err := s.prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fenced(fmt.Errorf("mirror: commit the transaction: %w", err))
	}
	s.m.crash.at(StageCommitted)
	// Committed: the session's view follows.
	for tp, next := range t.next {
		s.next[tp] = next
		s.target[tp] = targets[tp]
		s.st.Positions[tp] = &Position{V: recordVersion, Mapping: Mapping{Source: next, Target: targets[tp]}, CommittedMs: now.UnixMilli(), TopicID: s.ids[tp.Topic]}
	}
	if ckptDue {
		s.ckptAt = now
		for tp, c := range ckpts {
			s.st.Checkpoints[tp] = c
			s.lastCkpt[tp] = c.History[len(c.History)-1].Source
		}
	}
	s.account(t, len(ckpts))
	return nil
}

// checkpoints returns the updated checkpoint history of every partition
// that advanced since its last checkpoint and has a mapping.
func (s *copySession) checkpoints(t *txn, targets map[Partition]int64, now time.Time) map[Partition]*Checkpoints {
	out := map[Partition]*Checkpoints{}
	for tp, next := range t.next {
		target := targets[tp]
		if target < 0 || next == s.lastCkpt[tp] {
			continue
		}
		m := Mapping{Source: next, Target: target}
		c := &Checkpoints{First: m}
		if o, ok := s.origin[tp]; ok {
			c.First = o
		}
		if old := s.st.Checkpoints[tp]; old != nil {
			c.First = old.First
			c.History = append([]Mapping(nil), old.History...)
		}
		c.add(m, now)
		out[tp] = c
	}
	return out
}

// account updates progress and metrics after a commit.
func (s *copySession) account(t *txn, checkpoints int) {
	var n, b int64
	for topic, r := range t.records {
		n += r
		b += t.bytes[topic]
	}
	if s.prog != nil {
		s.prog.Add(n, b)
	}
	mt := s.m.cfg.Metrics
	if mt == nil {
		return
	}
	mt.transactions.WithLabelValues("commit").Inc()
	for topic, r := range t.records {
		mt.records.WithLabelValues(topic).Add(float64(r))
		mt.bytes.WithLabelValues(topic).Add(float64(t.bytes[topic]))
	}
	mt.checkpoints.Add(float64(checkpoints))
	for tp, next := range s.next {
		p := strconv.Itoa(int(tp.Partition))
		mt.position.WithLabelValues(tp.Topic, p).Set(float64(next))
		mt.lag.WithLabelValues(tp.Topic, p).Set(float64(max(s.hwm[tp]-next, 0)))
	}
}
