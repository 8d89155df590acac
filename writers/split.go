package writers

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/format"
)

// Config is how a split's records become files.
type Config struct {
	Format format.Options
	// Partitioner places records in directories; nil means no partitions.
	Partitioner *Partitioner
	// MaxFileBytes rotates a file once its (estimated) size reaches this;
	// 0 means no limit. Parquet counts the written row groups plus an
	// estimate of the buffered rows, so a file may exceed it by up to one
	// row group (keep RowGroupRows well below the limit).
	MaxFileBytes int64
	// MaxRecords rotates a file once it holds this many records; 0: no limit.
	MaxRecords int64
	// CallerRenews: the caller renews the attempt's lease itself
	// (Attempt().Renew, at least every third of the lease), so Write does
	// not read the clock for every record. The loader renews after every
	// fetch and while it waits for its turn to commit.
	CallerRenews bool
	// Incarnation is the loader's count of the times the topic was started
	// over (recreated under its name); files of incarnation n > 0 carry it
	// in their names, so they never meet an older incarnation's files.
	Incarnation int
	// TimeRange bounds each record's partition time and, with metadata
	// columns, its log timestamp: a record outside is refused with
	// ErrTimeRange and not written (the zero value bounds nothing).
	TimeRange TimeRange
	// ManyRows: a record may have many rows, written one after the other
	// with the same offset and increasing format.Meta.Row (0 … n-1); a file
	// is then never ended within a record (it may exceed MaxRecords or
	// MaxFileBytes by the rest of the record's rows), so that the rows of
	// an offset lie in one file.
	ManyRows bool
	// Budget bounds the rows the open files buffer in memory, together
	// with those of the other writers sharing it (see MemoryBudget); nil:
	// each Parquet file buffers up to a row group (Format.RowGroupRows,
	// RowGroupBytes).
	Budget *MemoryBudget
	// Describe names a file's writer schema for its manifest entry (the
	// registry subject, version and id of the records' schema); nil, or a
	// nil result, leaves them out. The writers add the fingerprint of the
	// file's own column schema (File.Schema.Fingerprint).
	Describe func(avro.Schema) *FileSchema
}

// SplitWriter writes the records of one split into files of one attempt
// and commits them. Records must arrive in offset order. It is not safe for
// concurrent use.
//
//	w, _ := writers.NewSplitWriter(store, split, cfg)
//	for each record { w.Write(schema, value, meta) }
//	res, err := w.Commit(reached) // reached == split.End; res.Won: this attempt's files are the split's output
type SplitWriter struct {
	attempt *Attempt
	cfg     Config
	split   Split
	open    map[string]*openFile // by partition directory
	recent  *openFile            // the file of the last record, if still open
	done    []File
	last    int64
	lastRow int32     // Meta.Row of the last row written (ManyRows)
	full    *openFile // ManyRows: a full file, closed before the next offset's row
	seq     int
	closed  bool // no more writes: files closed for the commit, or aborted
	// finished: committed, lost or aborted (a commit refused with
	// ErrNotChained is not finished and may be retried)
	finished bool
	// the columnar path: the time field's index in the Out fields of
	// timeIdxFor
	timeIdxFor *avrocodec.Projection
	timeIdx    int
	dirs       dirCache // the last partition directory
	counts     auditCounter
}

type openFile struct {
	dir    string
	file   vfs.File
	fw     format.Writer
	temp   string
	schema avro.Schema
	fp     [32]byte
	ref    *FileSchema // the manifest's File.Schema
	first  int64
	last   int64
	// buf is fw when it buffers rows and the writer has a budget (nil
	// otherwise): then another writer's budget report may flush this file
	// from its goroutine, and mu guards fw and file.
	buf bufferingWriter
	// unreported counts the records since the last budget report (the
	// owner's; no lock).
	unreported int

	mu       sync.Mutex
	seq      int64 // reads of buf.Buffered, guarded by mu
	flushErr error // a budget flush's error, guarded by mu: returned by the next write and by the close
	closed   bool  // guarded by mu: no more flushes
}

// budgetEvery is how many records a file writes between two reports to
// its budget: reading the buffered bytes walks every column, so it is not
// done per record. The budget is exceeded by at most the records since a
// file's last report.
const budgetEvery = 32

// lock takes of's lock when a budget may flush it from another goroutine.
func (of *openFile) lock() {
	if of.buf != nil {
		of.mu.Lock()
	}
}

func (of *openFile) unlock() {
	if of.buf != nil {
		of.mu.Unlock()
	}
}

// flushForBudget writes of's buffered rows out, for a budget report (of
// any writer's goroutine). ok is false when of is closed or broken; else n
// is what it buffers after, read at sequence seq.
func (of *openFile) flushForBudget() (n, seq int64, ok bool) {
	of.mu.Lock()
	defer of.mu.Unlock()
	if of.closed || of.flushErr != nil {
		return 0, 0, false
	}
	if err := of.buf.FlushBuffered(); err != nil {
		of.flushErr = fmt.Errorf("writers: writing a row group of %s early (memory budget): %w", of.temp, err)
		return 0, 0, false
	}
	of.seq++
	return of.buf.Buffered(), of.seq, true
}

// NewSplitWriter starts a new attempt of split on store.
func NewSplitWriter(store *Store, split Split, cfg Config) (*SplitWriter, error) {
	if err := cfg.Format.Validate(); err != nil {
		return nil, err
	}
	a, err := store.NewAttempt(split)
	if err != nil {
		return nil, err
	}
	return &SplitWriter{attempt: a, cfg: cfg, split: split, open: map[string]*openFile{}, last: split.Start - 1}, nil
}

// Attempt returns the writer's attempt.
func (w *SplitWriter) Attempt() *Attempt { return w.attempt }

// Write adds one record. schema is the record's Avro schema (nil is allowed
// for JSON lines); a schema different from the open file's rotates that
// file. Write takes ownership of value (it may add the metadata columns).
// A value that does not fit the schema returns an error wrapping
// avrocodec.ErrBadValue, a record whose partition cannot be derived
// ErrPartition, one whose time lies outside Config.TimeRange ErrTimeRange,
// and a schema the format cannot hold avrocodec.ErrUnsupportedSchema: these
// are the record's and it is not written; the writer stays usable. Any
// other error is the output's (the file system's): give the attempt up.
func (w *SplitWriter) Write(schema avro.Schema, value map[string]any, meta format.Meta) error {
	meta, err := w.check(meta)
	if err != nil {
		return err
	}
	dir, err := w.cfg.Partitioner.dir(value, meta.Timestamp, w.cfg.TimeRange, &w.dirs)
	if err != nil {
		return err
	}
	of, err := w.fileFor(dir, schema, meta.Offset)
	if err != nil {
		return err
	}
	return w.put(of, nil, value, meta)
}

// WriteAvro adds one record given as Avro binary that its projection's
// Scan accepted: the columnar path, which makes no map[string]any for the
// Parquet and Avro formats (JSON lines decode the row as a map). The file's
// schema is the projection's Out. Errors are those of Write.
func (w *SplitWriter) WriteAvro(row *avrocodec.Row, meta format.Meta) error {
	meta, err := w.check(meta)
	if err != nil {
		return err
	}
	if w.timeIdxFor != row.P {
		w.timeIdxFor, w.timeIdx = row.P, w.cfg.Partitioner.outIndex(row.P.Out)
	}
	dir, err := w.cfg.Partitioner.dirRow(row, w.timeIdx, meta.Timestamp, w.cfg.TimeRange, &w.dirs)
	if err != nil {
		return err
	}
	of, err := w.fileFor(dir, row.P.Out, meta.Offset)
	if err != nil {
		return err
	}
	return w.put(of, row, nil, meta)
}

// put writes one record to of: row if not nil, else value. It reports the
// file's buffered bytes to the budget every budgetEvery records, and
// rotates a full file.
func (w *SplitWriter) put(of *openFile, row *avrocodec.Row, value map[string]any, meta format.Meta) error {
	of.lock()
	err := of.flushErr
	if err == nil {
		err = writeTo(of.fw, row, value, meta)
	}
	records := of.fw.Records()
	full := (w.cfg.MaxRecords > 0 && records >= w.cfg.MaxRecords) ||
		(w.cfg.MaxFileBytes > 0 && of.fw.Bytes() >= w.cfg.MaxFileBytes)
	var n, seq int64
	report := false
	if of.buf != nil && err == nil {
		if of.unreported++; of.unreported >= budgetEvery {
			of.unreported, report = 0, true
			of.seq++
			n, seq = of.buf.Buffered(), of.seq
		}
	}
	of.unlock()
	if report {
		w.cfg.Budget.report(of, n, seq)
	}
	return w.wrote(of, err, meta.Offset, meta.Row, records, full)
}

// writeTo writes row (if not nil) or value to fw.
func writeTo(fw format.Writer, row *avrocodec.Row, value map[string]any, meta format.Meta) error {
	if row == nil {
		return fw.Write(value, meta)
	}
	if rw, ok := fw.(format.AvroRowWriter); ok {
		return rw.WriteAvroRow(row, meta)
	}
	value, err := row.Map()
	if err != nil {
		return err
	}
	return fw.Write(value, meta)
}

// check refuses a write out of the split's order and renews the lease.
func (w *SplitWriter) check(meta format.Meta) (format.Meta, error) {
	if w.closed {
		return meta, fmt.Errorf("%w: write after commit or abort", ErrSplit)
	}
	if meta.Topic == "" {
		meta.Topic = w.split.Topic
		meta.Partition = w.split.Partition
	}
	if w.cfg.ManyRows && meta.Offset == w.last && meta.Offset >= w.split.Start {
		if meta.Row <= w.lastRow {
			return meta, fmt.Errorf("%w: row %d of offset %d is not after row %d", ErrSplit, meta.Row, meta.Offset, w.lastRow)
		}
	} else if meta.Offset < w.split.Start || meta.Offset >= w.split.End || meta.Offset <= w.last {
		return meta, fmt.Errorf("%w: offset %d is outside %s or not after %d", ErrSplit, meta.Offset, w.split, w.last)
	} else if !w.cfg.ManyRows && meta.Row != 0 {
		return meta, fmt.Errorf("%w: row %d of offset %d: the writer takes one row per record (Config.ManyRows)", ErrSplit, meta.Row, meta.Offset)
	}
	if of := w.full; of != nil && meta.Offset > of.last {
		if err := w.closeFile(of); err != nil { // clears w.full
			return meta, err
		}
	}
	if w.cfg.Format.MetadataColumns {
		if err := w.cfg.TimeRange.Check("the log timestamp (the _timestamp column)", meta.Timestamp); err != nil {
			return meta, err
		}
	}
	if w.cfg.CallerRenews {
		return meta, nil
	}
	return meta, w.attempt.renewIfDue()
}

// fileFor returns the open file of dir for records of schema, rotating
// one of another schema.
func (w *SplitWriter) fileFor(dir string, schema avro.Schema, offset int64) (*openFile, error) {
	if of := w.recent; of != nil && of.dir == dir && of.schema == schema {
		return of, nil // records arrive roughly in time order: mostly the same file
	}
	of := w.open[dir]
	if of != nil && !sameSchema(of, schema) {
		if err := w.closeFile(of); err != nil {
			return nil, err
		}
		of = nil
	}
	if of == nil {
		var err error
		if of, err = w.openFile(dir, schema, offset); err != nil {
			return nil, err
		}
	}
	w.recent = of
	return of, nil
}

// wrote accounts for a record written to of (err nil) or refused, and
// rotates a full file. records is the file's count after the write, full
// whether it reached a limit.
func (w *SplitWriter) wrote(of *openFile, err error, offset int64, row int32, records int64, full bool) error {
	if err != nil {
		if records == 0 && errors.Is(err, avrocodec.ErrBadValue) {
			// keep the empty file: it will take the next record
			of.first = -1
		}
		return err
	}
	if of.first < 0 {
		of.first = offset
	}
	of.last = offset
	w.last, w.lastRow = offset, row
	if full && w.cfg.ManyRows {
		w.full = of // the record may have more rows: close it before the next offset's
		return nil
	}
	if full {
		return w.closeFile(of)
	}
	return nil
}

func sameSchema(of *openFile, s avro.Schema) bool {
	if of.schema == s {
		return true
	}
	if of.schema == nil || s == nil {
		return false
	}
	return of.fp == s.Fingerprint()
}

func (w *SplitWriter) openFile(dir string, schema avro.Schema, first int64) (*openFile, error) {
	w.seq++
	name := fmt.Sprintf("%s+%d+%d.%d.inprogress", w.split.Topic, w.split.Partition, first, w.seq)
	f, temp, err := w.attempt.Create(path.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("writers: %s: %w", w.split, err)
	}
	fw, err := format.NewWriter(f, schema, w.cfg.Format)
	if err != nil {
		f.Close()
		return nil, err
	}
	of := &openFile{dir: dir, file: f, fw: fw, temp: temp, schema: schema, first: first, last: first}
	if bw, ok := fw.(bufferingWriter); ok && w.cfg.Budget.active() {
		of.buf = bw
	}
	if schema != nil {
		of.fp = schema.Fingerprint()
		of.ref = describeFile(w.cfg.Describe, schema, fw, of.fp)
	}
	w.open[dir] = of
	return of, nil
}

// shut takes of out of the budget and closes its writer and file; no
// budget flush touches it after.
func (w *SplitWriter) shut(of *openFile) error {
	if of.buf != nil {
		w.cfg.Budget.forget(of)
	}
	of.lock()
	defer of.unlock()
	of.closed = true
	ferr := of.fw.Close()
	cerr := of.file.Close()
	return errors.Join(of.flushErr, ferr, cerr)
}

func (w *SplitWriter) closeFile(of *openFile) error {
	delete(w.open, of.dir)
	if w.recent == of {
		w.recent = nil
	}
	if w.full == of {
		w.full = nil
	}
	if err := w.shut(of); err != nil {
		return fmt.Errorf("writers: closing %s: %w", of.temp, err)
	}
	if of.fw.Records() == 0 {
		return w.attempt.store.fs.Remove(of.temp)
	}
	final := path.Join(of.dir, FileName(w.split.Topic, w.split.Partition, of.first, of.last+1, w.cfg.Incarnation, w.cfg.Format.Extension()))
	w.done = append(w.done, File{
		Temp: of.temp, Final: final, Records: of.fw.Records(), Bytes: of.fw.Bytes(),
		First: of.first, Last: of.last, Schema: of.ref,
	})
	return nil
}

// Commit closes every open file and commits the attempt (see
// Attempt.Commit). reached is the offset the reader reached, which must be
// the split's end: otherwise Commit returns ErrNotReached and the writer
// stays open (write on, or Abort). On ErrNotChained (the commit before this
// split has not landed yet, or never will) nothing is committed and the
// attempt is intact: call Commit again later, or Abort. A split with no
// records commits a manifest with no files, so that the next split starts
// at its end.
func (w *SplitWriter) Commit(reached int64) (Result, error) {
	if w.finished {
		return Result{}, fmt.Errorf("%w: commit after commit or abort", ErrSplit)
	}
	if reached != w.split.End || reached <= w.last {
		return Result{}, fmt.Errorf("%w: %s, reached %d (last record written %d)", ErrNotReached, w.split, reached, w.last)
	}
	if !w.closed {
		w.closed = true
		dirs := make([]string, 0, len(w.open))
		for d := range w.open {
			dirs = append(dirs, d)
		}
		sort.Strings(dirs)
		for _, d := range dirs {
			if err := w.closeFile(w.open[d]); err != nil {
				w.finished = true
				w.abortOpen()
				if errors.Is(err, vfs.ErrNotExist) {
					// Recovery removed the attempt (its lease expired).
					return Result{}, fmt.Errorf("%w: %v", ErrAttemptExpired, err)
				}
				return Result{}, err
			}
		}
		sort.Slice(w.done, func(i, j int) bool { return w.done[i].Final < w.done[j].Final })
	}
	w.attempt.audit = w.counts.manifest()
	res, err := w.attempt.Commit(w.done, reached)
	if !errors.Is(err, ErrNotChained) {
		w.finished = true
	}
	return res, err
}

func (w *SplitWriter) abortOpen() {
	for _, of := range w.open {
		w.shut(of)
	}
	w.open = map[string]*openFile{}
	w.recent, w.full = nil, nil
}

// Abort gives the attempt up and deletes its temporaries (see
// Attempt.Abort: refused once the commit intent is written).
func (w *SplitWriter) Abort() error {
	w.closed, w.finished = true, true
	w.abortOpen()
	return w.attempt.Abort()
}

// Records returns how many records were written so far.
func (w *SplitWriter) Records() int64 {
	var n int64
	for _, f := range w.done {
		n += f.Records
	}
	for _, of := range w.open {
		n += of.fw.Records()
	}
	return n
}
