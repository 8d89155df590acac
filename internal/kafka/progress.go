package kafka

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Progress reports how a long-running produce or consume is going: every
// interval it writes one line with the records and bytes so far and their
// rates. Add is safe from any goroutine. A run shorter than the interval
// prints nothing.
type Progress struct {
	verb    string
	out     io.Writer
	start   time.Time
	records atomic.Int64
	bytes   atomic.Int64

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// StartProgress starts reporting to out every interval; interval <= 0 or a
// nil out disables the lines (Add still counts).
func StartProgress(out io.Writer, verb string, interval time.Duration) *Progress {
	p := &Progress{verb: verb, out: out, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if out == nil || interval <= 0 {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				p.report(now)
			}
		}
	}()
	return p
}

// Add counts records and their bytes (key plus value).
func (p *Progress) Add(records, bytes int64) {
	p.records.Add(records)
	p.bytes.Add(bytes)
}

// Stop ends the reporting; it returns once no further line can be written.
func (p *Progress) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

func (p *Progress) report(now time.Time) {
	secs := now.Sub(p.start).Seconds()
	if secs <= 0 {
		return
	}
	r, b := p.records.Load(), p.bytes.Load()
	fmt.Fprintf(p.out, "%s %d records (%.1f MB) in %.0fs: %.0f records/s, %.2f MB/s\n",
		p.verb, r, float64(b)/1e6, secs, float64(r)/secs, float64(b)/1e6/secs)
}
