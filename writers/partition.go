package writers

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// ErrPartition reports a record whose partition cannot be derived, or a bad
// partitioner configuration.
var ErrPartition = errors.New("writers: partition")

// ErrTimeRange reports a record whose time (its time field, or the log
// timestamp that makes a partition directory or the _timestamp column)
// lies outside the writer's TimeRange: the record is not written.
var ErrTimeRange = errors.New("writers: time out of range")

// TimeRange bounds the times a record may carry into a partition directory
// or the _timestamp column: Min <= t <= Max. A time outside makes a
// directory or a value query engines cannot read (DuckDB fails every query
// over a table with dt=292278994-08-17). The zero value bounds nothing.
type TimeRange struct {
	Min, Max time.Time
}

// DefaultTimeRange is the years 1970 through 9999.
var DefaultTimeRange = TimeRange{
	Min: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
	Max: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
}

// Check returns nil when t lies in r, else an error wrapping ErrTimeRange
// that says what the time was (what: `time field "ts"`).
func (r TimeRange) Check(what string, t time.Time) error {
	if !r.contains(t) {
		return fmt.Errorf("%w: %s is %s, outside [%s, %s]", ErrTimeRange, what,
			t.UTC().Format(time.RFC3339Nano), r.Min.UTC().Format(time.RFC3339Nano), r.Max.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// contains reports whether t lies in r.
func (r TimeRange) contains(t time.Time) bool {
	return (r.Min.IsZero() || !t.Before(r.Min)) && (r.Max.IsZero() || !t.After(r.Max))
}

// Granularity of time partitions.
type Granularity string

// The granularities.
const (
	ByHour Granularity = "hour" // dt=YYYY-MM-DD/hr=HH
	ByDay  Granularity = "day"  // dt=YYYY-MM-DD
	ByNone Granularity = "none" // no partition directories
)

// LogTimestamp is the TimeField value that partitions by the log (Kafka
// record) timestamp instead of a record field.
const LogTimestamp = "@timestamp"

// Partitioner derives the Hive-style directory of a record from a time: a
// record field or the log timestamp, in a configured time zone.
type Partitioner struct {
	by        Granularity
	field     []string // nil: log timestamp
	location  *time.Location
	fieldName string
}

// NewPartitioner returns a partitioner. by is hour, day or none (empty means
// hour); timeField is a record field (dots reach into nested records) or
// "@timestamp" (also the default); timezone is an IANA name (default UTC).
func NewPartitioner(by Granularity, timeField, timezone string) (*Partitioner, error) {
	switch by {
	case "":
		by = ByHour
	case ByHour, ByDay, ByNone:
	default:
		return nil, fmt.Errorf("%w: by %q: use hour, day or none", ErrPartition, by)
	}
	loc := time.UTC
	if timezone != "" {
		var err error
		if loc, err = time.LoadLocation(timezone); err != nil {
			return nil, fmt.Errorf("%w: timezone %q: %v", ErrPartition, timezone, err)
		}
	}
	p := &Partitioner{by: by, location: loc, fieldName: timeField}
	if timeField != "" && timeField != LogTimestamp {
		p.field = strings.Split(timeField, ".")
	}
	return p, nil
}

// Dir returns the partition directory ("" for none) of a record. It
// bounds no time (a SplitWriter checks its Config.TimeRange).
func (p *Partitioner) Dir(value map[string]any, logTime time.Time) (string, error) {
	return p.dir(value, logTime, TimeRange{}, nil)
}

// dir is Dir with the record's time checked against rng, the directory
// cached in c (if not nil).
func (p *Partitioner) dir(value map[string]any, logTime time.Time, rng TimeRange, c *dirCache) (string, error) {
	if p == nil || p.by == ByNone {
		return "", nil
	}
	t := logTime
	if p.field != nil {
		var err error
		if t, err = p.fieldTime(value); err != nil {
			return "", err
		}
	}
	if err := p.checkTime(rng, t); err != nil {
		return "", err
	}
	return p.dirAt(t, c), nil
}

// checkTime is rng.Check of the partition time t, naming it only when it
// is out of range (the name costs a Sprintf, once a record on the hot path).
func (p *Partitioner) checkTime(rng TimeRange, t time.Time) error {
	if rng.contains(t) {
		return nil
	}
	return rng.Check(p.what(), t)
}

// what names the partition time in messages.
func (p *Partitioner) what() string {
	if p.field == nil {
		return "the log timestamp"
	}
	return fmt.Sprintf("time field %q", p.fieldName)
}

// dirCache remembers the directory of the last hour or day (in the
// partitioner's time zone) a writer saw, and the Unix seconds [from, to)
// it covers: records arrive roughly in time order, so most of them need
// neither a zone lookup nor formatting.
type dirCache struct {
	from, to int64
	dir      string
}

// dirAt returns the directory of t; c, if not nil, caches it.
func (p *Partitioner) dirAt(t time.Time, c *dirCache) string {
	sec := t.Unix()
	if c != nil && c.dir != "" && sec >= c.from && sec < c.to {
		return c.dir
	}
	t = t.In(p.location)
	dir := t.Format("dt=2006-01-02/hr=15")
	span := int64(3600)
	if p.by == ByDay {
		dir, span = t.Format("dt=2006-01-02"), 86400
	}
	if c != nil {
		// The local hour (day) of t under its zone's offset, cut to the
		// span of that offset (a DST change may fall inside it): every
		// second in [from, to) has t's wall-clock hour.
		_, offset := t.Zone()
		wall := sec + int64(offset)
		start := wall - wall%span
		if wall%span < 0 {
			start -= span
		}
		from, to := start-int64(offset), start-int64(offset)+span
		zs, ze := t.ZoneBounds() // zero: no change before (after) t
		if !zs.IsZero() {
			from = max(from, zs.Unix())
		}
		if !ze.IsZero() {
			to = min(to, ze.Unix())
		}
		*c = dirCache{from: from, to: to, dir: dir}
	}
	return dir
}

// dirRow is dir for a row of the columnar path; outIdx is the index of
// the time field's first name in the row's Out fields (-1: not there).
func (p *Partitioner) dirRow(row *avrocodec.Row, outIdx int, logTime time.Time, rng TimeRange, c *dirCache) (string, error) {
	if p == nil || p.by == ByNone {
		return "", nil
	}
	if p.field == nil {
		if err := p.checkTime(rng, logTime); err != nil {
			return "", err
		}
		return p.dirAt(logTime, c), nil
	}
	if outIdx < 0 {
		_, err := p.fieldTime(map[string]any{})
		return "", err
	}
	i := row.P.Pick[outIdx]
	if len(p.field) == 1 {
		if t, ok := row.InTime(i); ok {
			if err := p.checkTime(rng, t); err != nil {
				return "", err
			}
			return p.dirAt(t, c), nil
		}
	}
	v, err := row.InValue(i)
	if err != nil {
		return "", err
	}
	t, err := p.fieldTime(map[string]any{p.field[0]: v})
	if err != nil {
		return "", err
	}
	if err := p.checkTime(rng, t); err != nil {
		return "", err
	}
	return p.dirAt(t, c), nil
}

// outIndex returns the index of the time field's first name among out's
// fields, or -1.
func (p *Partitioner) outIndex(out *avro.RecordSchema) int {
	if p == nil || p.field == nil {
		return -1
	}
	for j, f := range out.Fields() {
		if f.Name() == p.field[0] {
			return j
		}
	}
	return -1
}

func (p *Partitioner) fieldTime(value map[string]any) (time.Time, error) {
	var v any = value
	for _, name := range p.field {
		m, ok := v.(map[string]any)
		if !ok {
			return time.Time{}, fmt.Errorf("%w: time field %q: %q is not a record", ErrPartition, p.fieldName, name)
		}
		v = m[name]
		if u, ok := v.(map[string]any); ok && len(u) == 1 { // a union wrapper
			for k, x := range u {
				if k == "long" || k == "string" || k == "int" {
					v = x
				}
			}
		}
	}
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case int64:
		return time.UnixMilli(x), nil
	case int:
		return time.UnixMilli(int64(x)), nil
	case float64:
		// Converting a float beyond int64 gives an arbitrary value: refuse it
		// as the out-of-range time it is.
		if !(x >= math.MinInt64 && x < math.MaxInt64) {
			return time.Time{}, fmt.Errorf("%w: time field %q is %g epoch milliseconds, beyond any time", ErrTimeRange, p.fieldName, x)
		}
		return time.UnixMilli(int64(x)), nil
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err == nil {
			return t, nil
		}
	case nil:
		return time.Time{}, fmt.Errorf("%w: time field %q is missing or null", ErrPartition, p.fieldName)
	}
	return time.Time{}, fmt.Errorf("%w: time field %q holds %T (%v): want a timestamp, epoch milliseconds or RFC 3339 text",
		ErrPartition, p.fieldName, v, v)
}

// FileName is the final name of a data file: <topic>+<partition>+<start>+<end>.<ext>
// where [start, end) are the offsets of the records it holds, and
// <topic>+<partition>+<start>+<end>+i<incarnation>.<ext> for a topic the
// loader started over (recreated under its name) incarnation > 0 times.
func FileName(topic string, partition int32, start, end int64, incarnation int, ext string) string {
	if incarnation > 0 {
		return fmt.Sprintf("%s+%d+%d+%d+i%d.%s", topic, partition, start, end, incarnation, ext)
	}
	return fmt.Sprintf("%s+%d+%d+%d.%s", topic, partition, start, end, ext)
}
