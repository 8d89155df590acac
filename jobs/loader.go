package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// Task is one unit of work: the offset range of one partition.
type Task = inputformat.Split

// Options tune a Loader; zero values are the defaults.
type Options struct {
	// Workers is the number of tasks run at once by Run (default 2).
	Workers int
	// Progress receives a progress bar while Run runs (nil: none).
	Progress io.Writer
	// Logger receives events (default: discard).
	Logger *slog.Logger
	// Clock is the time source (nil = clock.Real; tests pass a
	// clock.Manual).
	Clock clock.Clock
	// Store tunes the commit protocol (its Clock and Logger default to the
	// ones above).
	Store writers.StoreOptions
	// Reader tunes the fetches (ReadCommitted comes from the spec; its
	// Clock, timing the retry deadline and backoff, defaults to the one
	// above).
	Reader inputformat.ReaderOptions
	// KafkaOptions are extra franz-go options for the source client.
	KafkaOptions []kgo.Opt
	// FS, when set, replaces the output file system output.uri names
	// (tests stack fault-injecting wrappers on a real one). The caller
	// closes it, as query.Options.FS.
	FS vfs.FS
	// MapPath decodes every record into a map[string]any, as a custom
	// mapper sees it, even where the columnar path would take it (Avro
	// values with identity, where or select). Slower; for comparing the two.
	MapPath bool
	// MemoryBudget bounds the rows that the open files of the loader's
	// tasks buffer in memory, all together (see writers.MemoryBudget);
	// loaders given the same budget share it, and a process that opens
	// several loaders (scheduler.LoaderEngine) gives them all one. Nil: a
	// budget of writers.DefaultMemoryBudget for this loader alone.
	MemoryBudget *writers.MemoryBudget
	// LockLease is how long the job lock lasts unless renewed (default 1
	// minute; renewed every third): a run killed without releasing it
	// blocks the job's next run on another machine for at most this long.
	LockLease time.Duration
}

// Loader runs one job: it holds the source client, the output store, the
// decoder and the job's mapper configuration. It is safe for concurrent use
// by the tasks of a run.
type Loader struct {
	spec    *Spec
	opts    Options
	log     *slog.Logger
	kcl     *kgo.Client
	adm     *kadm.Client
	fs      vfs.FS
	ownFS   bool // fs was opened here (not Options.FS): Close closes it
	store   *writers.Store
	part    *writers.Partitioner
	fmtOpts format.Options
	times   writers.TimeRange // partition.time_range
	where   *where
	mapper  MapperFactory
	derive  []*derivedCol // map.derive, compiled
	// manyRows: the job's mapper may emit many rows per record (manyRows).
	manyRows bool

	decMu   sync.Mutex
	decoder Decoder // set by Open or, for inferred JSON, on first use (guarded by decMu)

	lockMu sync.Mutex
	lock   *JobLock // guarded by lockMu: the job lock this loader's run holds

	fingerprint string // SpecFingerprint(spec), taken once at Open
}

// Open connects to the job's source and output. Close it when done.
func Open(ctx context.Context, spec *Spec, opts Options) (*Loader, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	opts.Clock = clock.OrReal(opts.Clock)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Store.Clock == nil {
		opts.Store.Clock = opts.Clock
	}
	if opts.Store.Logger == nil {
		opts.Store.Logger = opts.Logger
	}
	if opts.Reader.Clock == nil {
		opts.Reader.Clock = opts.Clock
	}
	opts.Reader.ReadCommitted = spec.Source.Isolation == ReadCommitted
	if opts.MemoryBudget == nil {
		opts.MemoryBudget = writers.NewMemoryBudget(writers.DefaultMemoryBudget)
	}
	l := &Loader{spec: spec, opts: opts, log: opts.Logger, fingerprint: SpecFingerprint(spec)}
	var err error
	if l.part, err = writers.NewPartitioner(writers.Granularity(spec.Partition.By), spec.Partition.TimeField, spec.Partition.Timezone); err != nil {
		return nil, fmt.Errorf("%w: partition: %v", ErrSpec, err)
	}
	if l.times, err = spec.Partition.timeRange(); err != nil {
		return nil, err
	}
	l.fmtOpts = format.Options{Kind: format.Kind(spec.Output.Format), Compression: spec.Output.Compression, MetadataColumns: spec.Output.MetadataColumns}
	if spec.Map.Where != "" {
		if l.where, err = compileWhere(spec.Map.Where); err != nil {
			return nil, fmt.Errorf("%w: map.where: %v", ErrSpec, err)
		}
	}
	if l.derive, err = compileDerive(spec.Map.Derive); err != nil {
		return nil, err
	}
	var ok bool
	if l.mapper, ok = lookupMapper(spec.Map.Mapper); !ok {
		return nil, fmt.Errorf("%w: map.mapper: %q is not registered", ErrSpec, spec.Map.Mapper)
	}
	m, err := l.newMapper()
	if err != nil {
		return nil, err
	}
	// A mapper that may emit many rows per record: the writers take them
	// (writers.Config.ManyRows) and, with metadata columns, write _row.
	l.manyRows = manyRows(m)
	l.fmtOpts.RowColumn = l.manyRows
	if l.decoder, err = newDecoder(spec); err != nil {
		return nil, err
	}
	if err := l.checkFixedSchema(); err != nil {
		return nil, err
	}
	kopts, err := spec.SourceClientOptions()
	if err != nil {
		return nil, err
	}
	if l.kcl, err = kgo.NewClient(append(kopts, opts.KafkaOptions...)...); err != nil {
		return nil, fmt.Errorf("jobs: source client: %w", err)
	}
	l.adm = kadm.NewClient(l.kcl)
	if l.fs = opts.FS; l.fs == nil {
		if l.fs, err = filesystem.OpenWith(spec.OutputURI(), spec.HDFSOptions()); err != nil {
			l.kcl.Close()
			return nil, fmt.Errorf("jobs: output %s: %w", spec.Output.URI, err)
		}
		l.ownFS = true
	}
	l.store = writers.NewStore(l.fs, opts.Store)
	return l, nil
}

// SourceClientOptions are the franz-go options of a client of the job's
// source cluster: its bootstrap brokers, the loader's client settings and
// source.security. The loader's client is made of them, and so is every
// other client of the source (the scheduler's reader of _audit).
func (s *Spec) SourceClientOptions() ([]kgo.Opt, error) {
	sec, err := s.KafkaSecurity()
	if err != nil {
		return nil, err
	}
	secOpts, err := sec.Options()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSpec, kafka.Named(err, securityFieldName))
	}
	kopts := append([]kgo.Opt{kgo.SeedBrokers(s.Source.Bootstrap...)}, inputformat.ClientOptions()...)
	return append(kopts, secOpts...), nil
}

// Close releases the source client and the output file system (not one
// given as Options.FS).
func (l *Loader) Close() error {
	l.kcl.Close()
	if !l.ownFS {
		return nil
	}
	return l.fs.Close()
}

// Spec returns the loader's job spec.
func (l *Loader) Spec() *Spec { return l.spec }

// Store returns the output's commit store.
func (l *Loader) Store() *writers.Store { return l.store }

// MemoryBudget returns the budget the loader's tasks buffer rows under
// (Options.MemoryBudget, or the loader's own).
func (l *Loader) MemoryBudget() *writers.MemoryBudget { return l.opts.MemoryBudget }

func (l *Loader) newMapper() (Mapper, error) {
	m, err := l.mapper(MapperConfig{Options: l.spec.Map.Options, Select: l.spec.Map.Select, Field: l.spec.Map.Field})
	if err != nil {
		if errors.Is(err, ErrSpec) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: map.mapper %q: %v", ErrSpec, l.spec.Map.Mapper, err)
	}
	return withDerive(m, l.derive), nil
}

// checkFixedSchema refuses, before any work, a fixed input schema
// (decode.schema_file) that every record would be refused for: an array
// of items that take no bytes, a schema the mapper refuses, or a mapper
// output the output format cannot hold. A registry's writer schemas are
// checked as records bring them (a refusal is then a bad record).
func (l *Loader) checkFixedSchema() error {
	var in avro.Schema
	switch d := l.decoder.(type) {
	case *avroFileDecoder:
		if _, err := d.Identity(d.schema); errors.Is(err, avrocodec.ErrUnboundedItems) {
			return fmt.Errorf("%w: decode.schema_file %s: %s", ErrSpec, l.spec.Decode.SchemaFile, unboundedItems("the schema", err))
		}
		in = d.schema
	case *jsonDecoder:
		in = d.schema
	case *kvDecoder:
		in = d.schema
	}
	if in == nil {
		return nil
	}
	m, err := l.newMapper()
	if err != nil {
		return err
	}
	out, err := m.Schema(in)
	if err != nil {
		if errors.Is(err, ErrSpec) {
			return err
		}
		return fmt.Errorf("%w: map.mapper %q refuses the input schema: %v", ErrSpec, l.spec.Map.Mapper, err)
	}
	if out == nil {
		return nil
	}
	fw, err := format.NewWriter(io.Discard, out, l.fmtOpts)
	if err != nil {
		if errors.Is(err, avrocodec.ErrUnsupportedSchema) {
			return fmt.Errorf("%w: output.format %s cannot hold the rows of schema %s: %v", ErrSpec, l.spec.Output.Format, fullName(in), err)
		}
		return fmt.Errorf("jobs: checking the output schema: %w", err)
	}
	return fw.Close()
}

// fullName names a schema in messages.
func fullName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

func newDecoder(spec *Spec) (Decoder, error) {
	d := spec.Decode
	switch d.Format {
	case "avro":
		if d.Registry != "" {
			return newRegistryDecoder(spec)
		}
		s, err := readSchemaFile(spec.SchemaPath())
		if err != nil {
			return nil, err
		}
		return &avroFileDecoder{schema: s}, nil
	case "protobuf":
		return newProtobufDecoder(spec)
	case "json":
		if d.Registry != "" {
			return newJSONSchemaDecoder(spec)
		}
		if d.SchemaFile != "" {
			s, err := readSchemaFile(spec.SchemaPath())
			if err != nil {
				return nil, err
			}
			return &jsonDecoder{schema: s}, nil
		}
		if spec.Output.Format == "jsonl" {
			return &jsonDecoder{}, nil
		}
		return nil, nil // inferred from a sample at the first task (see heldSchema)
	case "string":
		return newKVDecoder(true), nil
	case "bytes":
		return newKVDecoder(false), nil
	}
	return nil, fmt.Errorf("%w: decode.format %q", ErrSpec, d.Format)
}

// Checkpoint returns a partition's committed position: the end of its
// newest commit, else its start record. It reads and changes nothing else
// (a commit whose files recovery has yet to move is a commit all the same).
func (l *Loader) Checkpoint(topic string, partition int32) (inputformat.Checkpoint, error) {
	next, err := l.store.NextStart(topic, partition, -1)
	if err != nil {
		return inputformat.Checkpoint{}, err
	}
	if next >= 0 {
		return inputformat.Checkpoint{Offset: next, Known: true}, nil
	}
	start, ok, err := l.startRecord(topic, partition)
	return inputformat.Checkpoint{Offset: start, Known: ok}, err
}

// Plan recovers the job's partitions, plans a run and prepares it
// (Preview, then Prepare): the splits it
// returns are ready for RunTask, in any order and on any worker (a task
// whose predecessor is not committed yet returns ErrNotReady: run it again
// later).
func (l *Loader) Plan(ctx context.Context) (*inputformat.Plan, error) {
	p, err := l.recoverAndPreview(ctx)
	if err != nil {
		return nil, err
	}
	return p, l.Prepare(ctx, p)
}

// Preview reads the partitions' offsets and cuts the splits a run would
// load now. It changes nothing (`sluice load plan`).
func (l *Loader) Preview(ctx context.Context) (*inputformat.Plan, error) {
	parts, err := inputformat.ListOffsets(ctx, l.adm, l.spec.Topics(), l.opts.Reader.ReadCommitted)
	if err != nil {
		if errors.Is(err, inputformat.ErrNoTopic) {
			return nil, err
		}
		return nil, fmt.Errorf("source %s: %w (check source.bootstrap and that the cluster is up)", strings.Join(l.spec.Source.Bootstrap, ","), err)
	}
	topics, begun, err := l.topicPlans(ctx, parts)
	if err != nil {
		return nil, err
	}
	restart := map[string]bool{}
	for _, tp := range topics {
		restart[tp.Topic] = tp.Restart
	}
	checkpoint := func(topic string, partition int32) (inputformat.Checkpoint, error) {
		if restart[topic] {
			return inputformat.Checkpoint{}, nil // the old topic's checkpoints are not of this one
		}
		return l.Checkpoint(topic, partition)
	}
	plan, err := inputformat.Cut(parts, checkpoint, inputformat.PlanOptions{
		MaxRecordsPerTask: l.spec.Source.MaxRecordsPerTask,
		Start:             l.spec.Source.Start,
		OnOutOfRange:      l.spec.Source.OnOffsetOutOfRange,
		Begun:             begun,
	})
	if err != nil {
		return nil, err
	}
	for i := range topics {
		for _, pp := range plan.Partitions {
			if pp.Topic == topics[i].Topic && pp.New && !topics[i].Restart {
				topics[i].NewPartitions = append(topics[i].NewPartitions, pp.Partition)
			}
		}
	}
	plan.Topics = topics
	return plan, nil
}

// Plan opens the job, plans and prepares a run (Loader.Plan) and closes it.
func Plan(ctx context.Context, spec *Spec) (*inputformat.Plan, error) {
	l, err := Open(ctx, spec, Options{})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Plan(ctx)
}

// RunTask opens the job, runs one task and closes it. A caller running
// many tasks should Open a Loader once and call its RunTask.
func RunTask(ctx context.Context, spec *Spec, task Task) (TaskReport, error) {
	l, err := Open(ctx, spec, Options{})
	if err != nil {
		return TaskReport{Split: task}, err
	}
	defer l.Close()
	return l.RunTask(ctx, task)
}

// Run opens the job, runs it once (plan, tasks, report) and closes it.
func Run(ctx context.Context, spec *Spec, opts Options) (*RunReport, error) {
	l, err := Open(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Run(ctx)
}

// schemaCache remembers the mapper's output schema per input schema.
type schemaCache struct {
	in  []avro.Schema
	out []avro.Schema
}

func (c *schemaCache) get(m Mapper, in avro.Schema) (avro.Schema, error) {
	for i, s := range c.in {
		if s == in {
			return c.out[i], nil
		}
	}
	out, err := m.Schema(in)
	if err != nil {
		return nil, err
	}
	c.in = append(c.in, in)
	c.out = append(c.out, out)
	return out, nil
}
