package jobs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 7, 30, 0, time.UTC)
	for expr, want := range map[string]time.Time{
		"5 * * * *":                     time.Date(2026, 12, 1, 11, 5, 0, 0, time.UTC),
		"30 5 * * * *":                  time.Date(2026, 12, 1, 11, 5, 30, 0, time.UTC),
		"@hourly":                       time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC),
		"@every 10m":                    at.Add(10 * time.Minute),
		"CRON_TZ=Asia/Tokyo 0 20 * * *": time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC),
		"CRON_TZ=UTC 0 0 29 2 *":        time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC),  // leap days come
		"CRON_TZ=UTC * * * * *":         time.Date(2026, 12, 1, 10, 8, 0, 0, time.UTC), // every minute: the floor
		"CRON_TZ=UTC 0 0 31 * *":        time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC),
	} {
		s, err := ParseSchedule(expr, 0)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if got := s.Next(at); !got.Equal(want) {
			t.Errorf("%q: next %v, want %v", expr, got, want)
		}
	}
}

// scheduleRefusals is every kind of schedule that must not reach the
// scheduler's loop, with what the error must say; the scheduler's scan
// test runs the same table (through its own copy, see
// scheduler/schedule_test.go).
var scheduleRefusals = []struct{ expr, want string }{
	{"0 0 30 2 *", `schedule: "0 0 30 2 *" never fires (February 30 does not exist)`},
	{"0 0 31 4,6,9,11 *", `never fires (no day 31 exists in April, June, September, November)`},
	{"0 0 0 30,31 2 *", `never fires (no day 30, 31 exists in February)`},
	{"@every 0s", `schedule: "@every 0s" never fires: @every needs a positive interval`},
	{"@every -1s", `schedule: "@every -1s" never fires`},
	{"@every 30s", `fires 30s after its previous firing, sooner than the floor of 1m0s`},
	{"@every 1ms", `fires 1s after its previous firing`},
	{"* * * * * *", `fires 1s after its previous firing`},
	{"*/30 * * * * *", `fires 30s after its previous firing`},
	{"0,59 * * * * *", `fires 1s after its previous firing`},
	{"CRON_TZ=Mars/Olympus 0 * * * *", `names the time zone "Mars/Olympus", which is not known`},
	{"TZ=../../etc/passwd 0 * * * *", `which is not known`},
	{"CRON_TZ=UTC", `names a time zone and no schedule`},
	{"CRON_TZ=UTC   ", `names a time zone and no schedule`},
	{"every now and then", `does not parse`},
	{"61 * * * *", `does not parse`},
	{"@fortnightly", `does not parse`},
}

// TestScheduleRefusedAtValidation: a schedule that never fires, or fires
// faster than the floor, is refused by the spec's validation (what `sluice
// load run` sees) with the field named, before any work.
func TestScheduleRefusedAtValidation(t *testing.T) {
	for _, c := range scheduleRefusals {
		_, err := ParseSchedule(c.expr, 0)
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "jobs: bad job spec: schedule: ") {
			t.Errorf("ParseSchedule(%q): %v, want %q", c.expr, err, c.want)
		}
		_, err = ParseSpec([]byte(strings.Replace(goodSpec, `schedule: "@hourly"`, "schedule: "+quoteYAML(c.expr), 1)), t.TempDir())
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spec with schedule %q: %v, want %q", c.expr, err, c.want)
		}
	}
}

func quoteYAML(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// TestScheduleFloor: the floor is an option (the scheduler's
// --min-interval), the gap counted across midnight and only between days
// that can both fire.
func TestScheduleFloor(t *testing.T) {
	for _, c := range []struct {
		expr  string
		floor time.Duration
		ok    bool
	}{
		{"@every 2s", time.Second, true},
		{"@every 2s", 3 * time.Second, false},
		{"*/2 * * * * *", time.Second, true},
		{"* * * * * *", time.Second, true},
		{"@every 0s", time.Second, false},
		{"@every 2s", 0, false},                         // 0: the default floor, a minute
		{"0 0,59 0,23 * * *", 5 * time.Minute, false},   // 23:59 then 00:00 the next day
		{"0 0,59 0,23 * * 1,3", 5 * time.Minute, true},  // Monday and Wednesday: never two days in a row
		{"0 0,59 0,23 * * 1,2", 5 * time.Minute, false}, // Monday 23:59, Tuesday 00:00
		{"0 0,59 0,23 1 1 *", 5 * time.Minute, true},    // once a year
		{"0 0,59 0,23 31,1 12,1 *", time.Hour, false},   // December 31 23:59, January 1 00:00
		{"CRON_TZ=Europe/Paris 0 6 * * *", time.Hour, true},
	} {
		_, err := ParseSchedule(c.expr, c.floor)
		if (err == nil) != c.ok {
			t.Errorf("ParseSchedule(%q, %v): %v, want ok=%v", c.expr, c.floor, err, c.ok)
		}
	}
	opts := SpecOptions{MinScheduleInterval: time.Second}
	if _, err := ParseSpecWith([]byte(strings.Replace(goodSpec, `"@hourly"`, `"@every 2s"`, 1)), t.TempDir(), opts); err != nil {
		t.Errorf("a lowered floor: %v", err)
	}
	if _, err := ParseSpec([]byte(strings.Replace(goodSpec, `"@hourly"`, `"@every 2s"`, 1)), t.TempDir()); err == nil {
		t.Error("@every 2s accepted under the default floor")
	}
}
