package query

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/writers/format"
)

var kinds = []struct {
	kind        format.Kind
	compression string
}{
	{format.Parquet, "zstd"},
	{format.Avro, "snappy"},
	{format.JSONLines, "gzip"},
}

// TestCountsPerHour: over local and HDFS warehouses in every format, the
// count per hour is what was written, and a query filtered to one hour
// reads exactly that hour's committed files (the explain list and the
// files opened through the FS), never debris.
func TestCountsPerHour(t *testing.T) {
	for _, where := range []string{"local", "hdfs"} {
		for i, k := range kinds {
			t.Run(where+"/"+string(k.kind), func(t *testing.T) {
				var w warehouse
				if where == "local" {
					w = localWarehouse(t)
				} else {
					w = hdfsWarehouse(t)
				}
				ds := w.dataset(t, "pageviews")
				p := loadDataset(t, ds, "pageviews", "pageviews", k.kind, k.compression, uint64(i+1))
				leaveDebris(t, ds, k.kind, k.compression)
				e := w.open(t)

				got := queryRows(t, e, "SELECT hr, count(*) AS n, count(DISTINCT _partition::VARCHAR || '/' || _offset::VARCHAR) AS u FROM pageviews GROUP BY hr ORDER BY hr")
				if len(got) != len(p.counts) {
					t.Fatalf("hours: got %v, produced %v", got, p.counts)
				}
				for _, r := range got {
					hr, _ := strconv.Atoi(r[0])
					want := p.counts[fmt.Sprintf("dt=2024-05-01/hr=%02d", hr)]
					if r[1] != fmt.Sprint(want) || r[2] != fmt.Sprint(want) {
						t.Errorf("hour %d: count %s, distinct offsets %s, produced %d", hr, r[1], r[2], want)
					}
				}

				for _, hour := range p.hours() {
					hr := hour[len(hour)-2:]
					q := fmt.Sprintf("SELECT count(*) FROM pageviews WHERE dt = '2024-05-01' AND hr = %s", hr)
					plan, err := e.Plan(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					want := append([]string(nil), p.files[hour]...)
					sort.Strings(want)
					var wantURIs []string
					for _, f := range want {
						wantURIs = append(wantURIs, e.Warehouse().FileURI(f))
					}
					if got := plan.FileURIs(e.Warehouse()); !reflect.DeepEqual(got, wantURIs) {
						t.Errorf("explain %s:\n got %v\nwant %v", q, got, wantURIs)
					}
					// A fresh engine (and cache): nothing staged before.
					fresh := w.open(t)
					w.counter.reset()
					got := queryRows(t, fresh, q)
					if got[0][0] != fmt.Sprint(p.counts[hour]) {
						t.Errorf("%s: %s, produced %d", q, got[0][0], p.counts[hour])
					}
					if opened := w.counter.dataOpens(); !reflect.DeepEqual(opened, want) {
						t.Errorf("%s opened\n %v\nwant the hour's files\n %v", q, opened, want)
					}
					// Again on the same engine: HDFS files come from the cache.
					w.counter.reset()
					queryRows(t, fresh, q)
					if opened := w.counter.dataOpens(); where == "hdfs" && k.kind != format.Avro && len(opened) != 0 {
						t.Errorf("%s again: opened %v, want all from the local cache", q, opened)
					}
				}
			})
		}
	}
}

// TestErrors: a bad query, an unknown table and an unreachable HDFS fail
// with their sentinel and a one-line message.
func TestErrors(t *testing.T) {
	w := localWarehouse(t)
	loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 1)
	e := w.open(t)
	ctx := context.Background()
	cases := []struct {
		q    string
		want error
		text string
	}{
		{"SELECT * FORM pageviews", ErrSQL, "syntax error"},
		{"SELECT nope FROM pageviews", ErrSQL, "nope"},
		{"SELECT * FROM clicks", ErrUnknownTable, "clicks"},
		{"DELETE FROM pageviews", ErrSQL, "only SELECT"},
		{"SELECT 1; SELECT 2", ErrSQL, "one statement"},
	}
	for _, c := range cases {
		_, _, err := e.Query(ctx, c.q)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want %v mentioning %q on one line", c.q, err, c.want, c.text)
		}
	}
	if _, err := Open(ctx, "hdfs://127.0.0.1:1/warehouse", Options{}); !errors.Is(err, ErrWarehouse) || strings.Contains(err.Error(), "\n") {
		t.Errorf("unreachable HDFS: got %v, want ErrWarehouse on one line", err)
	}
	// A NameNode that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func(old time.Duration) { hdfsConnectTimeout = old }(hdfsConnectTimeout)
	hdfsConnectTimeout = 500 * time.Millisecond
	_, err = Open(ctx, "hdfs://"+ln.Addr().String()+"/warehouse", Options{})
	if !errors.Is(err, ErrWarehouse) || !strings.Contains(err.Error(), "no answer") {
		t.Errorf("silent NameNode: got %v, want ErrWarehouse saying no answer", err)
	}
	ln.Close()
	mu.Lock()
	for _, c := range held {
		c.Close()
	}
	mu.Unlock()
	if _, err := Open(ctx, "file:///no/such/dir", Options{}); !errors.Is(err, ErrWarehouse) {
		t.Errorf("missing directory: got %v, want ErrWarehouse", err)
	}
}
