package writers

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrPartition reports a record whose partition cannot be derived, or a bad
// partitioner configuration.
var ErrPartition = errors.New("writers: partition")

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

// Dir returns the partition directory ("" for none) of a record.
func (p *Partitioner) Dir(value map[string]any, logTime time.Time) (string, error) {
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
	t = t.In(p.location)
	if p.by == ByDay {
		return t.Format("dt=2006-01-02"), nil
	}
	return t.Format("dt=2006-01-02/hr=15"), nil
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
// where [start, end) are the offsets of the records it holds.
func FileName(topic string, partition int32, start, end int64, ext string) string {
	return fmt.Sprintf("%s+%d+%d+%d.%s", topic, partition, start, end, ext)
}
