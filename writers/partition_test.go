package writers

import (
	"errors"
	"testing"
	"time"
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
