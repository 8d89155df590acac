// Package clock is sluice's one source of time. Everything that schedules,
// times out, expires or backs off takes a Clock (time is an input), so a test
// advances a Manual clock instead of sleeping:
//
//	broker/server   fetch long polls, fetch sessions, the retention loop
//	broker/log      segment.ms rolls, retention, flush.ms, producer expiry
//	broker/group    join phases, member sessions, offset expiry
//	scheduler       ticks, rescans, task backoffs, last-success metrics
//	inputformat     the reader's retry deadline and backoff
//	internal/kafka  the benchmarks' elapsed time and throughput throttle
//
// A Clock tells the time (Now) and makes one-shot timers (NewTimer); that is
// all its users need. Periodic work re-arms a timer with Reset.
//
// There are two implementations. Real is the operating system's clock; a
// nil Clock in an Options or Config struct means Real (see OrReal). Manual
// moves only when a test calls Advance or Set, and fires the timers that
// fall due inside that call, in deadline order, each delivering its own
// deadline. Step sets the reading forward or back without time passing (a
// wall clock stepped), pending timers keeping the time they have left:
//
//	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
//	t := clk.NewTimer(time.Second)
//	clk.Advance(time.Second) // t.C() now holds the deadline
//	<-t.C()
//
// # Concurrency
//
// Real and Manual are safe for concurrent use, and so are their timers. A
// Manual clock has one mutex guarding its time and its pending timers; Now,
// NewTimer, Advance, Set, Step, Waiters and every timer method take it, and none
// calls out of the package while holding it. A timer fires by a send on its
// channel of capacity one, which never blocks (Stop and Reset empty the
// channel, so it is empty whenever the timer is pending). Advance returns
// once every due timer has fired; it does not wait for the goroutines that
// receive from them to run, so a test that needs them to have reacted waits
// for what they do (Waiters counts the timers still pending).
package clock
