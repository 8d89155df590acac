package writers

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/format"
)

func TestPartitionerDir(t *testing.T) {
	logTime := time.Date(2024, 5, 1, 23, 59, 0, 0, time.UTC)
	for _, c := range []struct {
		by        Granularity
		field, tz string
		value     map[string]any
		want      string
	}{
		{ByHour, "@timestamp", "UTC", nil, "dt=2024-05-01/hr=23"},
		{"", "", "", nil, "dt=2024-05-01/hr=23"},
		{ByDay, "@timestamp", "UTC", nil, "dt=2024-05-01"},
		{ByNone, "ts", "UTC", nil, ""},
		{ByHour, "@timestamp", "Europe/Berlin", nil, "dt=2024-05-02/hr=01"},
		{ByDay, "@timestamp", "America/New_York", nil, "dt=2024-05-01"},
		{ByHour, "ts", "UTC", map[string]any{"ts": time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}, "dt=2024-01-02/hr=03"},
		{ByHour, "ts", "UTC", map[string]any{"ts": int64(1714608000000)}, "dt=2024-05-02/hr=00"},
		{ByHour, "ts", "UTC", map[string]any{"ts": "2024-05-02T10:00:00+02:00"}, "dt=2024-05-02/hr=08"},
		{ByHour, "ts", "UTC", map[string]any{"ts": map[string]any{"long": int64(1714608000000)}}, "dt=2024-05-02/hr=00"},
		{ByDay, "ev.at", "Asia/Tokyo", map[string]any{"ev": map[string]any{"at": time.Date(2024, 5, 1, 16, 0, 0, 0, time.UTC)}}, "dt=2024-05-02"},
	} {
		p, err := NewPartitioner(c.by, c.field, c.tz)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Dir(c.value, logTime)
		if err != nil || got != c.want {
			t.Errorf("%s %s %s %v: %q %v, want %q", c.by, c.field, c.tz, c.value, got, err, c.want)
		}
	}
}

func TestPartitionerErrors(t *testing.T) {
	if _, err := NewPartitioner("week", "", ""); !errors.Is(err, ErrPartition) {
		t.Errorf("by week: %v", err)
	}
	if _, err := NewPartitioner(ByHour, "", "Mars/Olympus"); !errors.Is(err, ErrPartition) {
		t.Errorf("bad zone: %v", err)
	}
	p, _ := NewPartitioner(ByHour, "ts", "")
	for _, v := range []map[string]any{{}, {"ts": true}, {"ts": "yesterday"}} {
		if _, err := p.Dir(v, time.Now()); !errors.Is(err, ErrPartition) {
			t.Errorf("%v: %v", v, err)
		}
	}
	var none *Partitioner
	if d, err := none.Dir(nil, time.Now()); d != "" || err != nil {
		t.Errorf("nil partitioner: %q %v", d, err)
	}
}

func TestFileName(t *testing.T) {
	if got := FileName("page.views", 3, 100, 250, 2, "avro"); got != "page.views+3+100+250+i2.avro" {
		t.Errorf("FileName of incarnation 2 = %q", got)
	}
	if got := FileName("page.views", 3, 100, 250, 0, "parquet"); got != "page.views+3+100+250.parquet" {
		t.Fatal(got)
	}
}

// TestTimeRangeRefusesEveryTimeSource: every way a record's time becomes a
// path or a column — a time field of each type, on the map path (Write)
// and the columnar path (WriteAvro), the log timestamp as partition time,
// and the log timestamp in the _timestamp column — refuses a time below or
// above the range with ErrTimeRange, and the writer takes the next record.
func TestTimeRangeRefusesEveryTimeSource(t *testing.T) {
	rng := TimeRange{Min: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), Max: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	in := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	below, above := time.Date(1999, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 1, 0, time.UTC)
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	type times struct{ in, below, above any }
	mapCases := []struct {
		name  string
		by    Granularity
		field string
		meta  bool // metadata columns
		v     times
	}{
		{"time.Time", ByHour, "ts", false, times{in, below, above}},
		{"long millis", ByHour, "ts", false, times{ms(in), ms(below), ms(above)}},
		{"int millis", ByHour, "ts", false, times{int(ms(in)), int(ms(below)), int(ms(above))}},
		{"double millis", ByHour, "ts", false, times{float64(ms(in)), float64(ms(below)), float64(ms(above))}},
		{"RFC 3339 text", ByDay, "ts", false, times{in.Format(time.RFC3339), below.Format(time.RFC3339), above.Format(time.RFC3339Nano)}},
		{"union long", ByHour, "ts", false, times{map[string]any{"long": ms(in)}, map[string]any{"long": ms(below)}, map[string]any{"long": ms(above)}}},
		{"nested", ByHour, "ev.at", false, times{map[string]any{"at": in}, map[string]any{"at": below}, map[string]any{"at": above}}},
		{"@timestamp", ByHour, LogTimestamp, false, times{in, below, above}},
		{"_timestamp column", ByNone, "", true, times{in, below, above}},
	}
	for _, c := range mapCases {
		t.Run("map/"+c.name, func(t *testing.T) {
			part, err := NewPartitioner(c.by, c.field, "UTC")
			if err != nil {
				t.Fatal(err)
			}
			w, err := NewSplitWriter(NewStore(vfs.Durable(vfs.NewMem()), StoreOptions{}), Split{Topic: "t", End: 10},
				Config{Format: format.Options{Kind: format.JSONLines, MetadataColumns: c.meta}, Partitioner: part, TimeRange: rng})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			for off, v := range []any{c.v.in, c.v.below, c.v.above, c.v.in} {
				value, logTime := map[string]any{"x": 1}, in
				switch {
				case c.field == LogTimestamp || c.meta:
					logTime = v.(time.Time)
				case c.field == "ev.at":
					value["ev"] = v
				default:
					value["ts"] = v
				}
				err := w.Write(nil, value, format.Meta{Offset: int64(off), Timestamp: logTime})
				if bad := off == 1 || off == 2; bad != errors.Is(err, ErrTimeRange) || (!bad && err != nil) {
					t.Fatalf("offset %d (%v): %v", off, v, err)
				}
			}
			if n := w.Records(); n != 2 {
				t.Fatalf("%d records written, want the 2 in range", n)
			}
		})
	}
	avroCases := []struct{ name, typ string }{
		{"timestamp-millis", `{"type":"long","logicalType":"timestamp-millis"}`},
		{"timestamp-micros", `{"type":"long","logicalType":"timestamp-micros"}`},
		{"long millis", `"long"`},
		{"null or timestamp-millis", `["null",{"type":"long","logicalType":"timestamp-millis"}]`},
		{"text", `"string"`},
	}
	for _, c := range avroCases {
		t.Run("columnar/"+c.name, func(t *testing.T) {
			schema := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"ts","type":` + c.typ + `}]}`)
			proj, err := avrocodec.NewProjection(schema, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			part, _ := NewPartitioner(ByHour, "ts", "UTC")
			w, err := NewSplitWriter(NewStore(vfs.Durable(vfs.NewMem()), StoreOptions{}), Split{Topic: "t", End: 10},
				Config{Format: format.Options{Kind: format.Avro}, Partitioner: part, TimeRange: rng})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			for off, ts := range []time.Time{in, below, above, in} {
				var v any = ts
				switch c.name {
				case "long millis":
					v = ts.UnixMilli()
				case "text":
					v = ts.Format(time.RFC3339)
				}
				b, err := avro.Marshal(schema, map[string]any{"ts": v})
				if err != nil {
					t.Fatal(err)
				}
				var row avrocodec.Row
				if err := proj.Scan(&row, b); err != nil {
					t.Fatal(err)
				}
				err = w.WriteAvro(&row, format.Meta{Offset: int64(off), Timestamp: in})
				if bad := off == 1 || off == 2; bad != errors.Is(err, ErrTimeRange) || (!bad && err != nil) {
					t.Fatalf("offset %d (%v): %v", off, ts, err)
				}
			}
		})
	}
	// The default range refuses the times of the issue: the largest epoch
	// millisecond (year 292,278,994), a double beyond any int64, a
	// producer's -1.
	part, _ := NewPartitioner(ByDay, "ts", "UTC")
	for _, v := range []any{int64(math.MaxInt64), 1.5e20, math.NaN(), int64(-1), "0001-01-01T00:00:00Z"} {
		if _, err := part.dir(map[string]any{"ts": v}, in, DefaultTimeRange, nil); !errors.Is(err, ErrTimeRange) {
			t.Errorf("%v: %v, want ErrTimeRange", v, err)
		}
	}
	if d, err := part.dir(map[string]any{"ts": int64(0)}, in, DefaultTimeRange, nil); err != nil || d != "dt=1970-01-01" {
		t.Errorf("epoch 0: %q %v", d, err)
	}
}

// TestPartitionerDirCacheFollowsTheZone: a writer's cached directory is the
// one formatting each record's time would give, in zones of half-hour
// offsets and across DST changes (New York's of an hour, Lord Howe's of
// half an hour), records 7 minutes apart, forwards and backwards.
func TestPartitionerDirCacheFollowsTheZone(t *testing.T) {
	for _, tz := range []string{"UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "America/St_Johns"} {
		for _, by := range []Granularity{ByHour, ByDay} {
			p, err := NewPartitioner(by, LogTimestamp, tz)
			if err != nil {
				t.Fatal(err)
			}
			for _, from := range []time.Time{
				time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC),   // New York springs forward on 10 March
				time.Date(2024, 4, 6, 0, 0, 0, 0, time.UTC),   // Lord Howe falls back on 7 April
				time.Date(2024, 11, 2, 0, 0, 0, 0, time.UTC),  // New York falls back on 3 November
				time.Date(1969, 12, 30, 0, 0, 0, 0, time.UTC), // before the epoch
			} {
				var c dirCache
				for _, step := range []time.Duration{7 * time.Minute, -7 * time.Minute} {
					for i := 0; i < 3*24*60/7; i++ {
						at := from.Add(time.Duration(i) * step)
						want := at.In(p.location).Format("dt=2006-01-02/hr=15")
						if by == ByDay {
							want = at.In(p.location).Format("dt=2006-01-02")
						}
						if got := p.dirAt(at, &c); got != want {
							t.Fatalf("%s by %s at %s: cached %q, want %q", tz, by, at, got, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkPartitionerDir: the hour directory of a record a second, in
// UTC and in a zone of another offset, through a writer's cache.
func BenchmarkPartitionerDir(b *testing.B) {
	for _, tz := range []string{"UTC", "Europe/Berlin"} {
		b.Run(tz, func(b *testing.B) {
			p, err := NewPartitioner(ByHour, LogTimestamp, tz)
			if err != nil {
				b.Fatal(err)
			}
			var c dirCache
			t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p.dirAt(t0.Add(time.Duration(i%86400)*time.Second), &c)
			}
		})
	}
}
