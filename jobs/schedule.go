package jobs

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultMinScheduleInterval is the floor under the time between two
// firings of a schedule: a schedule that can fire sooner than this after
// its previous firing is refused (the scheduler's --min-interval lowers it,
// down to the cron resolution of a second).
const DefaultMinScheduleInterval = time.Minute

// MinScheduleResolution is the smallest floor there is: cron fires on whole
// seconds.
const MinScheduleResolution = time.Second

// SpecOptions are the operator's settings that change what a spec may say.
type SpecOptions struct {
	// MinScheduleInterval is the floor of ParseSchedule (0:
	// DefaultMinScheduleInterval). The scheduler, which applies its own
	// floor at its scan, parses with MinScheduleResolution.
	MinScheduleInterval time.Duration
}

// cronParser accepts five fields, an optional leading seconds field,
// descriptors (@hourly, @every 10m) and a CRON_TZ= (or TZ=) prefix.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule is the one validator of a job's `schedule:`: it parses the
// cron expression and refuses one that never fires (a date that does not
// exist, such as February 30) or that can fire less than floor after its
// previous firing (floor <= 0: DefaultMinScheduleInterval; @every 0s and
// negative intervals are always refused). Errors wrap ErrSpec and name the
// field: `schedule: "0 0 30 2 *" never fires (February 30 does not exist)`.
func ParseSchedule(expr string, floor time.Duration) (cron.Schedule, error) {
	if floor <= 0 {
		floor = DefaultMinScheduleInterval
	}
	floor = max(floor, MinScheduleResolution)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: schedule: %q %s", ErrSpec, expr, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("%w: schedule: missing: set `schedule:` (e.g. \"@hourly\", \"5 * * * *\", \"@every 10m\")", ErrSpec)
	}
	rest := expr
	if strings.HasPrefix(rest, "TZ=") || strings.HasPrefix(rest, "CRON_TZ=") {
		// The cron parser slices up to the first space: without one it
		// would panic.
		zone, r, ok := strings.Cut(rest, " ")
		if !ok || strings.TrimSpace(r) == "" {
			return nil, bad("names a time zone and no schedule (\"CRON_TZ=Europe/Paris 0 6 * * *\")")
		}
		_, zone, _ = strings.Cut(zone, "=")
		if _, err := time.LoadLocation(zone); err != nil {
			return nil, bad("names the time zone %q, which is not known (use an IANA name such as UTC or Europe/Paris)", zone)
		}
		rest = strings.TrimSpace(r)
	}
	if d, ok := strings.CutPrefix(rest, "@every "); ok {
		if iv, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && iv <= 0 {
			return nil, bad("never fires: @every needs a positive interval (at least %v)", floor)
		}
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, bad("does not parse: %v (use five cron fields, an optional seconds field first, @hourly or @every 10m)", err)
	}
	var gap time.Duration
	switch cs := s.(type) {
	case cron.ConstantDelaySchedule:
		gap = cs.Delay
	case *cron.SpecSchedule:
		if why, ok := neverFires(cs); ok {
			return nil, bad("never fires (%s)", why)
		}
		gap = minGap(cs)
	default:
		return nil, bad("is of an unknown kind %T", s)
	}
	if gap < floor {
		return nil, bad("fires %v after its previous firing, sooner than the floor of %v (make it less frequent; sluice scheduler --min-interval lowers the floor)", gap, floor)
	}
	return s, nil
}

const starBit = 1 << 63 // the cron parser's mark of a field written "*" or "?"

// dayMatches is the cron parser's rule for a day: day of month and day of
// week both match when either is "*", else one of them does.
func dayMatches(s *cron.SpecSchedule, t time.Time) bool {
	if s.Month&(1<<uint(t.Month())) == 0 {
		return false
	}
	dom := s.Dom&(1<<uint(t.Day())) != 0
	dow := s.Dow&(1<<uint(t.Weekday())) != 0
	if s.Dom&starBit != 0 || s.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// cycleDays walks the 28 years (10,227 days) in which every combination of
// date, weekday and leap year occurs, calling f for each day until it
// returns false.
func cycleDays(f func(day time.Time) bool) {
	d := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for end := d.AddDate(28, 0, 0); d.Before(end); d = d.AddDate(0, 0, 1) {
		if !f(d) {
			return
		}
	}
}

// neverFires says why no day matches s, when none does.
func neverFires(s *cron.SpecSchedule) (string, bool) {
	fires := false
	cycleDays(func(d time.Time) bool { fires = dayMatches(s, d); return !fires })
	if fires {
		return "", false
	}
	var months, days []string
	for m := time.January; m <= time.December; m++ {
		if s.Month&(1<<uint(m)) != 0 {
			months = append(months, m.String())
		}
	}
	for d := 1; d <= 31; d++ {
		if s.Dom&(1<<uint(d)) != 0 {
			days = append(days, fmt.Sprint(d))
		}
	}
	if len(months) == 1 && len(days) == 1 {
		return fmt.Sprintf("%s %s does not exist", months[0], days[0]), true
	}
	return fmt.Sprintf("no day %s exists in %s", strings.Join(days, ", "), strings.Join(months, ", ")), true
}

// minGap is the shortest time between two firings of s within a day, or
// from a day's last to the next day's first when two days in a row can
// fire (daylight-saving shifts aside); for a schedule firing once a day on
// some days only it is a lower bound (a day).
func minGap(s *cron.SpecSchedule) time.Duration {
	const day = 24 * 60 * 60
	gap, first, last := day, -1, -1
	for h := 0; h < 24; h++ {
		if s.Hour&(1<<uint(h)) == 0 {
			continue
		}
		for m := 0; m < 60; m++ {
			if s.Minute&(1<<uint(m)) == 0 {
				continue
			}
			for sec := 0; sec < 60; sec++ {
				if s.Second&(1<<uint(sec)) == 0 {
					continue
				}
				t := h*3600 + m*60 + sec
				if last >= 0 {
					gap = min(gap, t-last)
				}
				if first < 0 {
					first = t
				}
				last = t
			}
		}
	}
	if wrap := day - last + first; wrap < gap {
		consecutive := false
		cycleDays(func(d time.Time) bool {
			consecutive = dayMatches(s, d) && dayMatches(s, d.AddDate(0, 0, 1))
			return !consecutive
		})
		if consecutive {
			gap = wrap
		}
	}
	return time.Duration(gap) * time.Second
}
