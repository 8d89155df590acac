package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Report is what a run leaves in its directory (report.json, and
// report.txt for people): what ran, what was done to it, what the workload
// did and what the checker found.
type Report struct {
	Scenario string        `json:"scenario"`
	Seed     int64         `json:"seed"`
	Duration time.Duration `json:"duration"`
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed"`
	// Schedule is the fault plan; Events what was actually done, with times.
	Schedule []Step  `json:"schedule"`
	Events   []Event `json:"events"`
	// Operations counts the workload's operations by kind and outcome
	// ("produce ok": 1200, "produce unknown": 3).
	Operations map[string]int `json:"operations"`
	// Anomalies are the checker's findings, one a line; none means it passed.
	Anomalies []string `json:"anomalies"`
	// Window is the smallest stretch of history that shows the first anomaly.
	Window []string `json:"window,omitempty"`
	// WindowFrom and WindowTo bound Window in wall-clock time (zero: unknown).
	WindowFrom time.Time `json:"window_from,omitzero"`
	WindowTo   time.Time `json:"window_to,omitzero"`
	// History is the history file; Logs the process logs by node.
	History string            `json:"history,omitempty"`
	Logs    map[string]string `json:"logs"`
	// Notes are free remarks of the scenario (the promise it checked).
	Notes []string `json:"notes,omitempty"`
}

// Finish fills rep with the run's seed, schedule, events and logs, writes
// report.json and report.txt, and fails the test if rep has anomalies, with
// the seed, the schedule, the window and the process logs around it.
func (r *Run) Finish(rep Report, sched *Schedule) {
	r.t.Helper()
	rep.Scenario, rep.Seed, rep.Duration, rep.Started, rep.Elapsed = r.Scenario, r.Seed, r.Duration, r.Begin.UTC(), r.Elapsed()
	if sched != nil {
		rep.Schedule = sched.Steps
	}
	rep.Events = r.Events.List()
	rep.Logs = map[string]string{}
	for _, n := range r.Nodes() {
		rep.Logs[n.Name] = n.LogPath
	}
	if b, err := json.MarshalIndent(rep, "", "  "); err != nil {
		r.t.Errorf("harness: report: %v", err)
	} else if err := os.WriteFile(filepath.Join(r.Dir, "report.json"), b, 0o644); err != nil {
		r.t.Errorf("harness: report: %v", err)
	}
	text := rep.Text()
	if err := os.WriteFile(filepath.Join(r.Dir, "report.txt"), []byte(text), 0o644); err != nil {
		r.t.Errorf("harness: report: %v", err)
	}
	if len(rep.Anomalies) == 0 {
		r.t.Logf("chaos %s seed %d passed: %s", r.Scenario, r.Seed, opsLine(rep.Operations))
		return
	}
	var b strings.Builder
	b.WriteString(text)
	if !rep.WindowFrom.IsZero() {
		from, to := rep.WindowFrom.Add(-2*time.Second), rep.WindowTo.Add(2*time.Second)
		for _, name := range sortedKeys(rep.Logs) {
			if lines := LogLines(rep.Logs[name], from, to, 40); len(lines) > 0 {
				fmt.Fprintf(&b, "\n--- %s log, %s .. %s (%s)\n", name, from.Format(logStamp), to.Format(logStamp), rep.Logs[name])
				b.WriteString(strings.Join(lines, "\n"))
				b.WriteByte('\n')
			}
		}
	}
	r.t.Errorf("chaos %s FAILED (reproduce: %s=%d %s=%s)\n%s", r.Scenario, EnvSeed, r.Seed, EnvTime, r.Duration, b.String())
}

// Text is the report for people.
func (rep Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario  %s\nseed      %d   (reproduce: %s=%d %s=%s)\nstarted   %s, ran %s\n",
		rep.Scenario, rep.Seed, EnvSeed, rep.Seed, EnvTime, rep.Duration, rep.Started.Format(time.RFC3339), rep.Elapsed.Truncate(time.Millisecond))
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note      %s\n", n)
	}
	fmt.Fprintf(&b, "\nschedule (%d faults planned; times since the schedule began)\n", len(rep.Schedule))
	for _, s := range rep.Schedule {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	fmt.Fprintf(&b, "\nevents (times since the run began)\n")
	for _, e := range rep.Events {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprintf(&b, "\noperations  %s\n", opsLine(rep.Operations))
	if len(rep.Anomalies) == 0 {
		b.WriteString("anomalies   none\n")
	} else {
		fmt.Fprintf(&b, "anomalies   %d\n", len(rep.Anomalies))
		for _, a := range rep.Anomalies {
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	if len(rep.Window) > 0 {
		b.WriteString("\nsmallest window of history showing the first anomaly\n")
		for _, l := range rep.Window {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if rep.History != "" {
		fmt.Fprintf(&b, "\nhistory   %s\n", rep.History)
	}
	for _, name := range sortedKeys(rep.Logs) {
		fmt.Fprintf(&b, "log       %-10s %s\n", name, rep.Logs[name])
	}
	return b.String()
}

func opsLine(ops map[string]int) string {
	if len(ops) == 0 {
		return "(none)"
	}
	var parts []string
	for _, k := range sortedKeys(ops) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, ops[k]))
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// LogLines returns at most max lines of a node log whose harness stamp lies
// in [from, to] (the stamp is a time of day, UTC; marker lines are kept when
// they fall between such lines).
func LogLines(path string, from, to time.Time, max int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	lo, hi := from.UTC().Format(logStamp), to.UTC().Format(logStamp)
	var out []string
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > len(logStamp) && line[2] == ':' && line[5] == ':' {
			stamp := line[:len(logStamp)]
			in = stamp >= lo && stamp <= hi
		}
		if in {
			out = append(out, line)
			if len(out) > max {
				out = out[1:]
			}
		}
	}
	return out
}
