package jobs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/format"
)

// Task errors.
var (
	// ErrNotReady reports a task that does not continue its partition's
	// commits: its predecessor is not committed yet (run it again later), or
	// the plan is stale (plan again).
	ErrNotReady = errors.New("jobs: task not ready: the partition's previous split is not committed")
	// ErrIncomplete reports a reader that ended below its split's end.
	ErrIncomplete = errors.New("jobs: split not read to its end")
	// ErrOutput reports an error of the output (the file system under the
	// data files or the dead letters), not of a record: it fails the split
	// whatever on_bad_record says, and counts no bad record.
	ErrOutput = errors.New("jobs: writing the output")
)

// recordError reports whether err is a record's fault: its bytes, its
// schema, its mapping, the filter or its time. Only those follow
// on_bad_record; every other error fails the split.
func recordError(err error) bool {
	if errors.Is(err, ErrOutput) {
		return false
	}
	return errors.Is(err, ErrBadRecord) || errors.Is(err, avrocodec.ErrBadValue) ||
		errors.Is(err, writers.ErrPartition) || errors.Is(err, writers.ErrTimeRange)
}

// TaskReport says what one task did.
type TaskReport struct {
	Split inputformat.Split `json:"split"`
	// AlreadyCommitted: another attempt had committed this split.
	AlreadyCommitted bool `json:"already_committed,omitempty"`
	// Won: this attempt's commit is the split's output.
	Won          bool      `json:"won"`
	Attempt      string    `json:"attempt,omitempty"`
	RecordsIn    int64     `json:"records_in"`
	BytesIn      int64     `json:"bytes_in"` // key + value bytes of the records read
	RowsOut      int64     `json:"rows_out"`
	BytesOut     int64     `json:"bytes_out"` // bytes of the committed files
	Files        []string  `json:"files,omitempty"`
	Filtered     int64     `json:"filtered"`
	Skipped      int64     `json:"skipped"`
	DeadLettered int64     `json:"dead_lettered"`
	LastRecord   time.Time `json:"last_record,omitempty"` // newest log timestamp read
	Started      time.Time `json:"started"`
	Duration     Duration  `json:"duration"`
	Error        string    `json:"error,omitempty"`
}

// Duration is a time.Duration written as text in reports.
type Duration time.Duration

// MarshalJSON writes "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "1.5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	x, err := time.ParseDuration(s)
	*d = Duration(x)
	return err
}

// RunTask reads the split, decodes, maps and writes its records, and
// commits them. A split that another attempt committed is reported as
// AlreadyCommitted. A split whose predecessor is not committed returns
// ErrNotReady before reading anything.
func (l *Loader) RunTask(ctx context.Context, task Task) (TaskReport, error) {
	return l.runTask(ctx, task, l.storeTurn, nil)
}

// committed reports whether s is already committed. A commit at s's start
// with another end (a planner with another view) makes s stale: ErrNotReady.
func (l *Loader) committed(s inputformat.Split) (bool, error) {
	b, err := vfs.ReadFile(l.fs, writers.ManifestPath(s.Topic, s.Partition, s.Start))
	if errors.Is(err, vfs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m, err := writers.DecodeManifest(b)
	if err != nil {
		return false, err
	}
	if m.End != s.End {
		return false, fmt.Errorf("%w: %s: the commit at %d is [%d, %d); plan again", ErrNotReady, s, m.Start, m.Start, m.End)
	}
	return true, nil
}

// storeTurn checks in the store that the split continues its partition's
// chain: its start is the newest commit's end, or the partition has none.
func (l *Loader) storeTurn(_ context.Context, s inputformat.Split) error {
	cp, err := l.Checkpoint(s.Topic, s.Partition)
	if err != nil {
		return err
	}
	if cp.Known && cp.Offset != s.Start {
		return fmt.Errorf("%w: %s, the partition's checkpoint is %d", ErrNotReady, s, cp.Offset)
	}
	return nil
}

// runTask runs one attempt of split s: it opens the attempt, reads the
// split to its end through the record loop, waits for the partition's
// turn and commits. turn nil checks the turn in the store.
func (l *Loader) runTask(ctx context.Context, s inputformat.Split, turn TurnFunc, progress func(int64)) (rep TaskReport, err error) {
	rep = TaskReport{Split: s, Started: l.opts.Clock.Now()}
	defer func() {
		rep.Duration = Duration(l.opts.Clock.Now().Sub(rep.Started))
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	if done, err := l.committed(s); err != nil || done {
		rep.AlreadyCommitted = done
		return rep, err
	}
	if turn == nil {
		turn = l.storeTurn
	}
	t, rd, err := l.openAttempt(ctx, s, &rep)
	if err != nil || t == nil {
		return rep, err
	}
	defer func() { err = l.settleLostAttempt(s, &rep, err) }()
	defer func() {
		if err != nil {
			t.abort()
		}
	}()
	lease := newAttemptLease(l, t.w)
	if err := t.readAll(ctx, rd, lease, progress); err != nil {
		return rep, err
	}
	return rep, t.commit(ctx, rd.Reached(), turn, lease)
}

// openAttempt makes what one attempt of s needs: its decoder, mapper and
// reader, and a split writer holding the attempt's lease. It returns a nil
// taskRun (and no error) when the split turned out committed meanwhile.
func (l *Loader) openAttempt(ctx context.Context, s inputformat.Split, rep *TaskReport) (*taskRun, *inputformat.Reader, error) {
	dec, err := l.decoderFor(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	mapper, err := l.newMapper()
	if err != nil {
		return nil, nil, err
	}
	rd, err := inputformat.NewReader(l.kcl, s, l.opts.Reader)
	if err != nil {
		return nil, nil, err
	}
	ref := &recordSchema{dec: dec}
	w, err := l.newSplitWriter(s, rep, ref.describe)
	if err != nil || w == nil {
		return nil, nil, err
	}
	rep.Attempt = w.Attempt().ID()
	t := &taskRun{l: l, rep: rep, w: w, dec: dec, mapper: mapper, split: s, many: manyRows(mapper), in: ref}
	if !l.opts.MapPath {
		t.src = columnarSource(dec, mapper)
	}
	return t, rd, nil
}

// newSplitWriter opens the split's writer, which starts the attempt. It
// returns nil (and no error) when the split was committed meanwhile.
func (l *Loader) newSplitWriter(s inputformat.Split, rep *TaskReport, describe func(avro.Schema) *writers.FileSchema) (*writers.SplitWriter, error) {
	inc, err := l.incarnation(s.Topic)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		w, err := writers.NewSplitWriter(l.store, s,
			writers.Config{Format: l.fmtOpts, Partitioner: l.part, MaxRecords: l.spec.Output.MaxFileRecords,
				TimeRange: l.times, CallerRenews: true, Incarnation: max(inc, 0), Budget: l.opts.MemoryBudget, ManyRows: l.manyRows, Describe: describe}) // the attempt lease renews, after every fetch
		// Another run's recovery may remove the split's directory while the
		// attempt takes its first lease: look again, then start over.
		if err == nil || try == 3 || !(errors.Is(err, writers.ErrAttemptExpired) || errors.Is(err, vfs.ErrNotExist)) {
			return w, err
		}
		if done, cerr := l.committed(s); cerr != nil || done {
			rep.AlreadyCommitted = done
			return nil, cerr
		}
	}
}

// settleLostAttempt classifies the end of an attempt that recovery (another
// run's) took away: recovery removes an attempt whose split another attempt
// committed, or whose lease expired. The split is then done, or is to be
// run again (ErrNotReady).
func (l *Loader) settleLostAttempt(s inputformat.Split, rep *TaskReport, err error) error {
	if !errors.Is(err, writers.ErrAttemptExpired) && !errors.Is(err, vfs.ErrNotExist) {
		return err
	}
	if done, cerr := l.committed(s); cerr == nil && done {
		rep.AlreadyCommitted = true
		return nil
	}
	if errors.Is(err, writers.ErrAttemptExpired) {
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return err
}

// attemptLease renews an attempt's lease (the writers leave it to the
// task: CallerRenews), so that recovery never takes a live attempt for
// dead.
type attemptLease struct {
	l       *Loader
	w       *writers.SplitWriter
	every   time.Duration // a third of the store's lease
	renewed time.Time
}

func newAttemptLease(l *Loader, w *writers.SplitWriter) *attemptLease {
	every := l.opts.Store.Lease / 3
	if every <= 0 {
		every = time.Minute
	}
	return &attemptLease{l: l, w: w, every: every, renewed: l.opts.Clock.Now()}
}

// keepAlive renews the lease when a third of it has passed.
func (a *attemptLease) keepAlive() error {
	if now := a.l.opts.Clock.Now(); now.Sub(a.renewed) >= a.every {
		a.renewed = now
		return a.w.Attempt().Renew()
	}
	return nil
}

// readAll is the record loop: it reads the split to its end and hands each
// record to record, renewing the lease after every fetch.
func (t *taskRun) readAll(ctx context.Context, rd *inputformat.Reader, lease *attemptLease, progress func(int64)) error {
	for {
		recs, done, err := rd.Next(ctx)
		if err != nil {
			return err
		}
		if err := lease.keepAlive(); err != nil {
			return err
		}
		for i, r := range recs {
			if err := t.record(ctx, r); err != nil {
				return err
			}
			// Look at the clock within a batch too, since writing a record
			// can end a row group or a file, which takes its time.
			if i%64 == 63 {
				if err := lease.keepAlive(); err != nil {
					return err
				}
			}
		}
		if progress != nil && len(recs) > 0 {
			progress(int64(len(recs)))
		}
		if done {
			break
		}
	}
	if rd.Reached() != t.split.End {
		return fmt.Errorf("%w: %s reached %d", ErrIncomplete, t.split, rd.Reached())
	}
	return nil
}

// commit closes the dead letters, waits for the partition's turn, checks
// the job lock's fence and commits the attempt up to reached; the report
// says whether this attempt's commit is the split's.
func (t *taskRun) commit(ctx context.Context, reached int64, turn TurnFunc, lease *attemptLease) error {
	if err := t.closeDeadLetters(); err != nil {
		return err
	}
	if err := waitTurn(ctx, t.split, turn, lease.every, lease.keepAlive); err != nil {
		return err
	}
	if err := t.l.fence(); err != nil {
		return err
	}
	res, err := t.w.Commit(reached)
	if errors.Is(err, writers.ErrNotChained) {
		// A planner with another view committed meanwhile: plan again.
		return fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	t.committed = true // from here the attempt is the writers' (won, lost, or left to recovery)
	if err != nil && !res.Won {
		// The outcome may be unknown (recovery completes a commit from its
		// intent): keep the dead letters, only the committed attempt's count.
		return err
	}
	t.rep.Won = res.Won
	if !res.Won {
		t.removeDeadLetters()
		t.rep.AlreadyCommitted = true
	}
	if res.Manifest != nil && res.Won {
		for _, f := range res.Manifest.Files {
			t.rep.Files = append(t.rep.Files, f.Final)
			t.rep.BytesOut += f.Bytes
		}
	}
	return err // a roll-forward error after a won commit: recovery finishes it
}

// waitTurn waits until s may commit, renewing the attempt's lease while it
// waits.
func waitTurn(ctx context.Context, s inputformat.Split, turn TurnFunc, every time.Duration, keepAlive func() error) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, every)
		err := turn(wctx, s)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
		if err := keepAlive(); err != nil {
			return err
		}
	}
}

// taskRun is the state of one attempt's record loop.
type taskRun struct {
	l       *Loader
	rep     *TaskReport
	w       *writers.SplitWriter
	dec     Decoder
	mapper  Mapper
	schemas schemaCache
	// baseSchemas: the schemas of the mapper under map.derive (the
	// columnar path's projections)
	baseSchemas schemaCache
	split       inputformat.Split
	dl          vfs.File
	dlPath      string
	committed   bool

	// The columnar path (src non-nil): Avro values go to the writers as
	// bytes, through a projection per input schema, with no map.
	src      avroSource
	projs    map[avro.Schema]*avrocodec.Projection
	row      avrocodec.Row
	whereFor *avrocodec.Projection
	whereEnv map[string]any
	whereIdx []int // In fields the filter names
	// derived: map.derive's columns on the columnar path, per projection
	derived map[*avrocodec.Projection]*derivedProjection
	drow    avrocodec.Row
	// exploded: explode on the columnar path, per projection of the
	// writer schema; xrow the row at hand, tails the derived columns' bytes
	// of the record's rows (each ends at tailEnds[k])
	exploded map[*avrocodec.Projection]*explodeProjection
	xrow     avrocodec.Row
	tails    []byte
	tailEnds []int

	// rows holds the map path's rows of the record being mapped; many:
	// the mapper may emit more than one (manyRows); emitErr is emit's
	// refusal of a row of that record.
	rows    []map[string]any
	many    bool
	emitErr error
	// in is the writer schema of the record at hand, which names the
	// files the record opens (evolve.go)
	in *recordSchema
}

// columnarSource returns dec as an avroSource when the record can take
// the columnar path: Avro values, and a built-in mapper (identity, where,
// select) that only keeps and renames fields. A custom mapper sees maps.
func columnarSource(dec Decoder, m Mapper) avroSource {
	src, ok := dec.(avroSource)
	if !ok {
		return nil
	}
	switch baseMapper(m).(type) {
	case identity, *selectMapper, *explode:
		return src
	}
	return nil
}

// projection returns the projection of records of schema through the
// mapper.
func (t *taskRun) projection(schema avro.Schema) (*avrocodec.Projection, error) {
	if p := t.projs[schema]; p != nil {
		return p, nil
	}
	base := baseMapper(t.mapper)
	out, err := t.baseSchemas.get(base, schema)
	if err != nil {
		return nil, t.schemaError(schema, err)
	}
	var p *avrocodec.Projection
	if sm, ok := base.(*selectMapper); ok {
		p, err = avrocodec.NewProjection(schema, out, sm.pick(schema.(*avro.RecordSchema)))
	} else {
		p, err = t.src.Identity(schema)
	}
	if errors.Is(err, avrocodec.ErrUnsupportedSchema) && !errors.Is(err, avrocodec.ErrUnboundedItems) {
		return nil, err // the map path takes it
	}
	if err != nil {
		return nil, t.schemaError(schema, err)
	}
	rows := p // the projection of the rows before map.derive
	if e, ok := base.(*explode); ok {
		xp, err := newExplodeProjection(e, p, out)
		if err != nil {
			return nil, t.schemaError(schema, err)
		}
		if t.exploded == nil {
			t.exploded = map[*avrocodec.Projection]*explodeProjection{}
		}
		t.exploded[p], rows = xp, xp.out
	}
	if d, ok := t.mapper.(*deriving); ok {
		dp, err := newDerivedProjection(d, rows)
		if err != nil {
			return nil, t.schemaError(schema, err)
		}
		if t.derived == nil {
			t.derived = map[*avrocodec.Projection]*derivedProjection{}
		}
		t.derived[rows] = dp
	}
	if t.projs == nil {
		t.projs = map[avro.Schema]*avrocodec.Projection{}
	}
	t.projs[schema] = p
	return p, nil
}

// mapColumnar is mapRecord's columnar path.
func (t *taskRun) mapColumnar(ctx context.Context, r *kgo.Record) error {
	schema, body, err := t.src.Raw(ctx, r.Value)
	if err != nil {
		return err
	}
	t.in.schema = schema
	p, err := t.projection(schema)
	if errors.Is(err, avrocodec.ErrUnsupportedSchema) && !errors.Is(err, ErrBadRecord) && !errors.Is(err, ErrSpec) {
		// A schema the columnar path does not take (a record that
		// contains itself): this record goes the map path.
		return t.mapGeneric(ctx, r)
	}
	if err != nil {
		return err
	}
	if err := p.Scan(&t.row, body); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	if w := t.l.where; w != nil {
		keep, err := w.keep(t.whereRow(p))
		if err != nil {
			return err
		}
		if !keep {
			t.rep.Filtered++
			return nil
		}
	}
	meta := format.Meta{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
	if xp := t.exploded[p]; xp != nil {
		return t.explodeColumnar(xp, schema, meta)
	}
	row := &t.row
	if dp := t.derived[p]; dp != nil {
		if row, err = dp.derive(&t.row, &t.drow); err != nil {
			return err
		}
	}
	if err := t.w.WriteAvro(row, meta); err != nil {
		return t.writeError(schema, err)
	}
	t.rep.RowsOut++
	return nil
}

// explodeColumnar writes the rows of the record in t.row, one per item of
// its array. As on the map path, nothing is written until every row is
// made: map.derive's columns of every row are computed first (only their
// bytes are held), then the rows are made again and written.
func (t *taskRun) explodeColumnar(xp *explodeProjection, schema avro.Schema, meta format.Meta) error {
	n, err := xp.find(&t.row)
	if err != nil || n == 0 {
		return err
	}
	if n > maxRowsPerRecord {
		return badRecord("explode: the field %q has %d items, more than the %d rows a record may have", xp.field, n, maxRowsPerRecord)
	}
	dp := t.derived[xp.out]
	final := xp.out
	if dp != nil {
		final = dp.out
		t.tails, t.tailEnds = t.tails[:0], t.tailEnds[:0]
		for k := 0; k < n; k++ {
			xp.buf = xp.rowBody(&t.row, k, xp.buf[:0])
			if err := xp.out.Scan(&t.xrow, xp.buf); err != nil {
				return fmt.Errorf("%w: explode: %v", ErrBadRecord, err)
			}
			if t.tails, err = dp.appendColumns(&t.xrow, t.tails); err != nil {
				return err
			}
			t.tailEnds = append(t.tailEnds, len(t.tails))
		}
	}
	for k := 0; k < n; k++ {
		xp.buf = xp.rowBody(&t.row, k, xp.buf[:0])
		if dp != nil {
			start := 0
			if k > 0 {
				start = t.tailEnds[k-1]
			}
			xp.buf = append(xp.buf, t.tails[start:t.tailEnds[k]]...)
		}
		if err := final.Scan(&t.xrow, xp.buf); err != nil {
			return t.laterRow(k, meta.Offset, fmt.Errorf("%w: explode: %v", ErrBadRecord, err))
		}
		meta.Row = int32(k)
		if err := t.w.WriteAvro(&t.xrow, meta); err != nil {
			return t.laterRow(k, meta.Offset, t.writeError(schema, err))
		}
		t.rep.RowsOut++
	}
	return nil
}

// laterRow makes the refusal of row i of a record fail the split when rows
// of the record were written before it: they cannot be taken back.
func (t *taskRun) laterRow(i int, offset int64, err error) error {
	if i > 0 && recordError(err) {
		return fmt.Errorf("row %d of offset %d refused after %d rows of the record were written (the split fails; nothing of it was committed): %v", i, offset, i, err)
	}
	return err
}

// schemaError classifies err, the refusal of a record's schema (by the
// mapper, a projection or the output format): a registry's writer schema
// is the record's, a bad record naming its id; a fixed schema is the
// spec's (checkFixedSchema refuses it at Open already).
func (t *taskRun) schemaError(schema avro.Schema, err error) error {
	if ws, ok := t.dec.(writerSchemas); ok {
		if id, ok := ws.writerSchemaID(schema); ok {
			if errors.Is(err, avrocodec.ErrUnboundedItems) {
				return badRecord("%s", unboundedItems(fmt.Sprintf("writer schema id %d", id), err))
			}
			return badRecord("writer schema id %d: refused: %s", id, strings.TrimPrefix(err.Error(), ErrSpec.Error()+": "))
		}
	}
	if errors.Is(err, ErrSpec) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrSpec, err)
}

// writeError classifies an error of the writers: the record's (a value,
// partition or time it cannot take, a schema the format cannot hold), an
// internal misuse (ErrSplit), or the output's (ErrOutput).
func (t *taskRun) writeError(schema avro.Schema, err error) error {
	switch {
	case errors.Is(err, avrocodec.ErrBadValue), errors.Is(err, writers.ErrPartition), errors.Is(err, writers.ErrTimeRange):
		return err
	case errors.Is(err, avrocodec.ErrUnsupportedSchema):
		return t.schemaError(schema, err)
	case errors.Is(err, writers.ErrSplit):
		return err
	}
	return fmt.Errorf("%w: %w", ErrOutput, err)
}

// whereRow returns the filter's view of the row: the In fields it names,
// decoded as the map path decodes them. A field that does not decode is
// left out (the scan accepted the record, so none should).
func (t *taskRun) whereRow(p *avrocodec.Projection) map[string]any {
	if t.whereFor != p {
		t.whereFor, t.whereEnv, t.whereIdx = p, map[string]any{}, nil
		for _, name := range t.l.where.names {
			if i := p.InIndex(name); i >= 0 {
				t.whereIdx = append(t.whereIdx, i)
			}
		}
	}
	for _, i := range t.whereIdx {
		name := p.In.Fields()[i].Name()
		if v, err := t.row.InValue(i); err == nil {
			t.whereEnv[name] = v
		} else {
			delete(t.whereEnv, name)
		}
	}
	return t.whereEnv
}

// record handles one log record; a bad record follows on_bad_record.
func (t *taskRun) record(ctx context.Context, r *kgo.Record) error {
	t.rep.RecordsIn++
	t.rep.BytesIn += int64(len(r.Key) + len(r.Value))
	if r.Timestamp.After(t.rep.LastRecord) && t.l.times.Check("", r.Timestamp) == nil {
		t.rep.LastRecord = r.Timestamp // a far-future log time is no watermark
	}
	rows := t.rep.RowsOut
	err := t.mapRecord(ctx, r)
	if err == nil {
		// For the audit, in the manifest: a record that made no row (where,
		// or a mapper that emitted none) is filtered.
		o := writers.Filtered
		if t.rep.RowsOut > rows {
			o = writers.Loaded
		}
		t.w.Count(r.Timestamp, int64(len(r.Key)+len(r.Value)), o)
		return nil
	}
	if errors.Is(err, ErrOutput) {
		return fmt.Errorf("%s offset %d: %w (the output failed, not the record: the split fails whatever on_bad_record says; nothing of it was committed)", t.split, r.Offset, err)
	}
	if !recordError(err) {
		return err
	}
	if !errors.Is(err, ErrBadRecord) {
		err = fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	switch t.l.spec.OnBadRecord {
	case BadRecordSkip:
		t.rep.Skipped++
		t.w.Count(r.Timestamp, int64(len(r.Key)+len(r.Value)), writers.Malformed)
		return nil
	case BadRecordDeadLetter:
		if err := t.deadLetter(r, err); err != nil {
			return fmt.Errorf("%s offset %d: %w (the split fails; nothing of it was committed)", t.split, r.Offset, err)
		}
		t.rep.DeadLettered++
		t.w.Count(r.Timestamp, int64(len(r.Key)+len(r.Value)), writers.DeadLettered)
		return nil
	}
	return fmt.Errorf("%s offset %d: %w (on_bad_record: fail; nothing of this split was committed)", t.split, r.Offset, err)
}

func (t *taskRun) mapRecord(ctx context.Context, r *kgo.Record) error {
	if t.src != nil {
		return t.mapColumnar(ctx, r)
	}
	return t.mapGeneric(ctx, r)
}

// mapGeneric is the map path: the record decoded as a map[string]any.
func (t *taskRun) mapGeneric(ctx context.Context, r *kgo.Record) error {
	schema, value, err := t.dec.Decode(ctx, r.Key, r.Value)
	if err != nil {
		return err
	}
	t.in.schema = schema
	if w := t.l.where; w != nil {
		keep, err := w.keep(value)
		if err != nil {
			return err
		}
		if !keep {
			t.rep.Filtered++
			return nil
		}
	}
	out, err := t.schemas.get(t.mapper, schema)
	if err != nil {
		return t.schemaError(schema, err)
	}
	rec := &Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: r.Key, Schema: schema, Value: value}
	if len(r.Headers) > 0 {
		rec.Headers = make([]Header, len(r.Headers))
		for i, h := range r.Headers {
			rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	meta := format.Meta{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
	// The record's rows are held until the mapper returns: a mapper's error
	// after some rows leaves none of them written.
	t.rows, t.emitErr = t.rows[:0], nil
	err = t.callMapper(rec, func(row map[string]any) error {
		if t.emitErr != nil {
			return t.emitErr
		}
		if len(t.rows) > 0 && !t.many {
			t.emitErr = fmt.Errorf("%w: mapper %q emitted a second row for offset %d; a mapper that emits many rows is a registered custom one or explode", ErrBadRecord, t.l.spec.Map.Mapper, r.Offset)
			return t.emitErr
		}
		if len(t.rows) >= maxRowsPerRecord {
			t.emitErr = fmt.Errorf("%w: mapper %q emitted more than %d rows for offset %d", ErrBadRecord, t.l.spec.Map.Mapper, maxRowsPerRecord, r.Offset)
			return t.emitErr
		}
		t.rows = append(t.rows, row)
		return nil
	})
	if err == nil {
		err = t.emitErr // the refusal stands, whatever the mapper made of it
	}
	if err != nil {
		clear(t.rows)
		if !errors.Is(err, ErrBadRecord) {
			// A mapper's own error is the record's fault.
			return fmt.Errorf("%w: mapper %q: %v", ErrBadRecord, t.l.spec.Map.Mapper, err)
		}
		return err
	}
	for i, row := range t.rows {
		meta.Row = int32(i)
		if err := t.w.Write(out, row, meta); err != nil {
			// Rows 0 … i-1 are in the attempt's files and cannot be taken
			// back: then the split fails, whatever on_bad_record says.
			clear(t.rows)
			return t.laterRow(i, r.Offset, t.writeError(schema, err))
		}
		t.rep.RowsOut++
	}
	clear(t.rows)
	return nil
}

// maxRowsPerRecord bounds the rows a mapper may emit for one record (they
// are held in memory until it returns).
const maxRowsPerRecord = 1 << 20

// manyRows reports whether mapper m may emit more than one row per record:
// every mapper but the built-in identity, where and select.
func manyRows(m Mapper) bool {
	switch baseMapper(m).(type) {
	case identity, *selectMapper:
		return false
	}
	return true
}

// callMapper runs the mapper; a panic in it (user code) is the record's
// fault, not the loader's.
func (t *taskRun) callMapper(rec *Record, emit func(map[string]any) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: mapper %q panicked on offset %d: %v", ErrBadRecord, t.l.spec.Map.Mapper, rec.Offset, p)
		}
	}()
	return t.mapper.Map(rec, emit)
}

// deadLetterDir holds dead letters: <dir>/<topic>/<partition>/<start %020d>.<attempt>.jsonl.
// Only the file of the attempt named in the split's manifest counts.
const deadLetterDir = "_sluice/dead-letter"

// DeadLetterPath returns where an attempt keeps the dead letters of a split.
func DeadLetterPath(topic string, partition int32, start int64, attempt string) string {
	return path.Join(deadLetterDir, topic, fmt.Sprint(partition), fmt.Sprintf("%020d.%s.jsonl", start, attempt))
}

// DeadLetter is one line of a dead-letter file.
type DeadLetter struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"`
	Key       string    `json:"key_base64,omitempty"`
	Value     string    `json:"value_base64"`
	Error     string    `json:"error"`
}

func (t *taskRun) deadLetter(r *kgo.Record, cause error) error {
	if t.dl == nil {
		t.dlPath = DeadLetterPath(t.split.Topic, t.split.Partition, t.split.Start, t.rep.Attempt)
		if err := t.l.fs.MkdirAll(path.Dir(t.dlPath)); err != nil {
			return fmt.Errorf("%w: dead letters: %w", ErrOutput, err)
		}
		f, err := t.l.fs.CreateExclusive(t.dlPath)
		if err != nil {
			return fmt.Errorf("%w: dead letters: %w", ErrOutput, err)
		}
		t.dl = f
	}
	d := DeadLetter{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
		Value: base64.StdEncoding.EncodeToString(r.Value), Error: cause.Error()}
	if r.Key != nil {
		d.Key = base64.StdEncoding.EncodeToString(r.Key)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := t.dl.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: dead letters: %w", ErrOutput, err)
	}
	return nil
}

func (t *taskRun) closeDeadLetters() error {
	if t.dl == nil {
		return nil
	}
	err := t.dl.Close()
	t.dl = nil
	if err != nil {
		return fmt.Errorf("%w: dead letters: %w", ErrOutput, err)
	}
	return nil
}

func (t *taskRun) removeDeadLetters() {
	if t.dl != nil {
		t.dl.Close()
		t.dl = nil
	}
	if t.dlPath != "" {
		t.l.fs.Remove(t.dlPath)
	}
}

func (t *taskRun) abort() {
	if t.committed {
		return
	}
	t.removeDeadLetters()
	if err := t.w.Abort(); err != nil {
		t.l.log.Warn("aborting an attempt", "split", t.split.String(), "err", err)
	}
}
