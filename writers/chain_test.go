package writers

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// chainCfg writes one small JSON-lines file per split (no time partitions).
var chainCfg = Config{Format: format.Options{Kind: format.JSONLines, MetadataColumns: true}}

// racer is one loader with its own view of a partition: a default start
// (what `start: latest` read from its high watermark), a split size, and
// whether its planner is stale (it first plans each split from an old
// position, as a planner that read the commits long ago would).
type racer struct {
	def, size, until int64
	stale            bool
}

// run loads [NextStart, until) split after split, re-planning on a lost
// commit or ErrNotChained, and returns the splits it won.
func (r racer) run(store *Store, topic string, part int32) ([]Split, error) {
	var won []Split
	prev := r.def
	for tries := 0; tries < 1000; tries++ {
		start, err := store.NextStart(topic, part, r.def)
		if err != nil {
			return won, err
		}
		if start >= r.until {
			return won, nil
		}
		if r.stale && tries%2 == 0 && prev < start {
			start = prev + (start-prev)/2 // an old view of the partition
		}
		prev = start
		split := Split{Topic: topic, Partition: part, Start: start, End: start + r.size}
		res, err := runSplit(store, split, chainCfg, nil)
		switch {
		case errors.Is(err, ErrNotChained):
			continue
		case err != nil:
			return won, fmt.Errorf("%s: %w", split, err)
		case res.Won:
			won = append(won, split)
		}
	}
	return won, fmt.Errorf("racer %+v made no progress", r)
}

var racers = []racer{
	{def: 1000, size: 70, until: 1600},
	{def: 1500, size: 110, until: 1600},
	{def: 1000, size: 45, until: 1600, stale: true},
	{def: 1200, size: 90, until: 1600, stale: true},
}

// checkChainOutput checks a raced partition: the manifests tile the range
// from an origin one of the racers chose; every offset of it is in exactly
// one visible file, and every visible file is committed.
func checkChainOutput(t *testing.T, fs vfs.FS, topic string, part int32) {
	t.Helper()
	store := NewStore(fs, StoreOptions{})
	ms, err := store.Commits(topic, part)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.readOrigin(topic, part)
	if err != nil {
		t.Fatal(err)
	}
	if o.Start != 1000 && o.Start != 1500 && o.Start != 1200 {
		t.Fatalf("origin %d is no racer's start", o.Start)
	}
	end, err := CheckTiling(o.Start, ms)
	if err != nil {
		t.Fatal(err)
	}
	if end < 1600 {
		t.Fatalf("the chain ends at %d, the racers load up to 1600", end)
	}
	seen := map[int64]int{}
	listed := map[string]bool{}
	for _, m := range ms {
		for _, f := range m.Files {
			listed[f.Final] = true
			for _, off := range readOffsets(t, fs, f.Final) {
				if off < m.Start || off >= m.End {
					t.Fatalf("%s holds offset %d outside its commit [%d, %d)", f.Final, off, m.Start, m.End)
				}
				seen[off]++
			}
		}
	}
	for off := o.Start; off < end; off++ {
		if seen[off] != 1 {
			t.Fatalf("offset %d loaded %d times", off, seen[off])
		}
	}
	for _, f := range walkFiles(t, fs, ".") {
		if !listed[f] {
			t.Fatalf("%s visible but not committed", f)
		}
	}
	t.Logf("origin %d, %d commits tile [%d, %d)", o.Start, len(ms), o.Start, end)
}

// raceGoroutines runs the racers at once, each with its own store (and,
// through open, its own file-system client).
func raceGoroutines(t *testing.T, open func() vfs.FS) {
	var wg sync.WaitGroup
	errs := make([]error, len(racers))
	for i, r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.run(NewStore(open(), StoreOptions{}), "pv", 3)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestChainRaceGoroutinesLocal(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fs := localFS(t)
			raceGoroutines(t, func() vfs.FS { return fs })
			checkChainOutput(t, fs, "pv", 3)
		})
	}
}

func TestChainRaceGoroutinesHDFS(t *testing.T) {
	fs := hdfsFS(t)
	raceGoroutines(t, func() vfs.FS {
		c, err := filesystem.Open(fs.String())
		if err != nil {
			t.Error(err)
			return fs
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
	checkChainOutput(t, fs, "pv", 3)
}

// chainChildEnv makes the test binary a racer process: "<uri> <def> <size> <stale>".
const chainChildEnv = "SLUICE_WRITERS_CHAIN_CHILD"

func runChainChild() int {
	f := strings.Fields(os.Getenv(chainChildEnv))
	fs, err := filesystem.Open(f[0])
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	defer fs.Close()
	def, _ := strconv.ParseInt(f[1], 10, 64)
	size, _ := strconv.ParseInt(f[2], 10, 64)
	r := racer{def: def, size: size, until: 1600, stale: f[3] == "true"}
	bufio.NewReader(os.Stdin).ReadString('\n') // the go signal: all racers start together
	won, err := r.run(NewStore(fs, StoreOptions{}), "pv", 3)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("WON", len(won))
	return 0
}

// raceProcesses runs each racer in its own process on the FS at uri.
func raceProcesses(t *testing.T, uri string) {
	cmds := make([]*exec.Cmd, len(racers))
	outs := make([]*strings.Builder, len(racers))
	var gos []func()
	for i, r := range racers {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %v", chainChildEnv, uri, r.def, r.size, r.stale))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
		gos = append(gos, func() { stdin.Write([]byte("go\n")); stdin.Close() })
	}
	for _, g := range gos {
		g()
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("racer %d: %v: %s", i, err, outs[i])
		}
		t.Logf("racer %+v: %s", racers[i], strings.TrimSpace(outs[i].String()))
	}
	if t.Failed() {
		t.FailNow()
	}
}

func TestChainRaceProcessesLocal(t *testing.T) {
	fs := localFS(t)
	raceProcesses(t, "file://"+fs.Root())
	checkChainOutput(t, fs, "pv", 3)
}

func TestChainRaceProcessesHDFS(t *testing.T) {
	fs := hdfsFS(t)
	raceProcesses(t, fs.String())
	checkChainOutput(t, fs, "pv", 3)
}

// TestChainRefusals: the cases a stale or diverging planner produces, one
// by one, on a partition with commits [1000, 1100) and [1100, 1250).
func TestChainRefusals(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	for _, sp := range []Split{{Topic: "pv", Partition: 0, Start: 1000, End: 1100}, {Topic: "pv", Partition: 0, Start: 1100, End: 1250}} {
		if res, err := runSplit(store, sp, chainCfg, nil); err != nil || !res.Won {
			t.Fatalf("%s: %+v %v", sp, res, err)
		}
	}
	for _, c := range []struct {
		split   Split
		notChnd bool // refused with ErrNotChained
		winner  int64
	}{
		{Split{Topic: "pv", Partition: 0, Start: 1500, End: 2500}, true, 0},     // a second first run that read a later high watermark
		{Split{Topic: "pv", Partition: 0, Start: 900, End: 1000}, true, 0},      // before the origin
		{Split{Topic: "pv", Partition: 0, Start: 1050, End: 1300}, true, 0},     // starts inside a commit
		{Split{Topic: "pv", Partition: 0, Start: 1260, End: 1300}, true, 0},     // leaves a gap
		{Split{Topic: "pv", Partition: 0, Start: 1100, End: 1200}, false, 1250}, // a stale retry: loses to the commit at 1100
	} {
		res, err := runSplit(store, c.split, chainCfg, nil)
		if c.notChnd {
			if !errors.Is(err, ErrNotChained) || res.Won {
				t.Errorf("%s: %+v %v, want ErrNotChained", c.split, res, err)
			}
			continue
		}
		if err != nil || res.Won || res.Manifest.End != c.winner {
			t.Errorf("%s: %+v %v, want lost to [.., %d)", c.split, res, err, c.winner)
		}
	}
	ms, _ := store.Commits("pv", 0)
	if end, err := CheckTiling(1000, ms); err != nil || end != 1250 {
		t.Fatalf("tiling: %d %v", end, err)
	}
	if n := len(walkFiles(t, fs, "_sluice/tmp")); n != 0 {
		t.Fatalf("%d temporaries left by refused attempts", n)
	}
	// A first run that fixed the origin and died before committing: the next
	// run starts at that origin, not at its own default.
	if _, err := store.origin("pv", 7, 3000); err != nil {
		t.Fatal(err)
	}
	if n, err := store.NextStart("pv", 7, 9999); err != nil || n != 3000 {
		t.Fatalf("NextStart after an origin only: %d %v", n, err)
	}
}

// TestCheckTiling: the checker finds overlaps, gaps and empty commits.
func TestCheckTiling(t *testing.T) {
	m := func(s, e int64) *Manifest { return &Manifest{Topic: "t", Start: s, End: e} }
	for _, c := range []struct {
		ms   []*Manifest
		ok   bool
		desc string
	}{
		{[]*Manifest{m(10, 20), m(20, 30)}, true, ""},
		{nil, true, ""},
		{[]*Manifest{m(10, 20), m(15, 30)}, false, "overlap"},
		{[]*Manifest{m(10, 20), m(25, 30)}, false, "gap"},
		{[]*Manifest{m(12, 20)}, false, "gap"},
		{[]*Manifest{m(10, 10)}, false, "empty"},
	} {
		_, err := CheckTiling(10, c.ms)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.desc)) {
			t.Errorf("%v: %v", c.ms, err)
		}
	}
}

// TestChainOutOfOrderRetry: two splits of a partition written at once; the
// later one finishes first, is refused, and commits once the earlier one
// has landed (the SplitWriter keeps its attempt for the retry).
func TestChainOutOfOrderRetry(t *testing.T) {
	fs := localFS(t)
	store := NewStore(fs, StoreOptions{})
	a, b := Split{Topic: "pv", Partition: 0, Start: 1000, End: 1100}, Split{Topic: "pv", Partition: 0, Start: 1100, End: 1200}
	wa, _ := NewSplitWriter(store, a, chainCfg)
	wb, _ := NewSplitWriter(store, b, chainCfg)
	// The origin is fixed by a's first try: b is refused, nothing moves.
	if _, err := wa.Attempt().Commit(nil, 1000); !errors.Is(err, ErrNotReached) {
		t.Fatalf("reached 1000 of %s: %v", a, err)
	}
	if _, err := store.origin("pv", 0, 1000); err != nil {
		t.Fatal(err)
	}
	for off := b.Start; off < b.End; off++ {
		if err := wb.Write(nil, pageView(off), format.Meta{Offset: off}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wb.Commit(b.End); !errors.Is(err, ErrNotChained) {
		t.Fatalf("b before a: %v", err)
	}
	if res, err := runSplit(store, a, chainCfg, nil); err != nil || !res.Won {
		t.Fatalf("a: %+v %v", res, err)
	}
	if res, err := wb.Commit(b.End); err != nil || !res.Won {
		t.Fatalf("b retried: %+v %v", res, err)
	}
	if _, err := wb.Commit(b.End); !errors.Is(err, ErrSplit) {
		t.Fatalf("third commit: %v", err)
	}
	ms, _ := store.Commits("pv", 0)
	if end, err := CheckTiling(1000, ms); err != nil || end != 1200 {
		t.Fatalf("%d %v", end, err)
	}
}

// TestCommitRefusesUnreachedEnd: a reader that stopped early (or ran past
// the end) cannot commit the split; the writer stays usable.
func TestCommitRefusesUnreachedEnd(t *testing.T) {
	store := NewStore(localFS(t), StoreOptions{})
	sp := Split{Topic: "pv", Partition: 0, Start: 10, End: 20}
	w, _ := NewSplitWriter(store, sp, chainCfg)
	for off := int64(10); off < 15; off++ {
		if err := w.Write(nil, pageView(off), format.Meta{Offset: off}); err != nil {
			t.Fatal(err)
		}
	}
	for _, reached := range []int64{15, 19, 21, 14} {
		if res, err := w.Commit(reached); !errors.Is(err, ErrNotReached) || res.Won {
			t.Fatalf("reached %d: %+v %v", reached, res, err)
		}
	}
	if ok, _ := vfs.Exists(store.FS(), ManifestPath("pv", 0, 10)); ok {
		t.Fatal("a refused commit created a manifest")
	}
	// The reader catches up (offsets 15..19 were compacted away): commit.
	if res, err := w.Commit(20); err != nil || !res.Won || res.Manifest.Records != 5 {
		t.Fatalf("%+v %v", res, err)
	}
}
