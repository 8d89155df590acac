package writers

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// TestHDFSAttemptsRace: two attempts of one split, each with its own HDFS
// client, write and commit at the same moment. Exactly one wins; the output
// holds one copy; the loser's temporaries are gone.
func TestHDFSAttemptsRace(t *testing.T) {
	schema := pageViewSchema(t)
	for round := range 4 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fsA := hdfsFS(t)
			fsB, err := filesystem.Open(strings.Replace(fsA.String(), "hdfs://", "hdfs://", 1))
			if err != nil {
				t.Fatal(err)
			}
			defer fsB.Close()
			cfg := workloadConfig(t)
			writers := make([]*SplitWriter, 2)
			for i, f := range []vfs.FS{fsA, fsB} {
				w, err := NewSplitWriter(NewStore(f, StoreOptions{}), workload, cfg)
				if err != nil {
					t.Fatal(err)
				}
				for off := workload.Start; off < workload.End; off++ {
					if err := w.Write(schema, pageView(off), format.Meta{Offset: off, Timestamp: t0}); err != nil {
						t.Fatal(err)
					}
				}
				writers[i] = w
			}
			results := make([]Result, 2)
			errs := make([]error, 2)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range writers {
				done.Add(1)
				go func() {
					defer done.Done()
					start.Wait()
					results[i], errs[i] = writers[i].Commit(workload.End)
				}()
			}
			start.Done()
			done.Wait()
			for i := range errs {
				if errs[i] != nil {
					t.Fatalf("attempt %d: %v", i, errs[i])
				}
			}
			if results[0].Won == results[1].Won {
				t.Fatalf("won: %v and %v", results[0].Won, results[1].Won)
			}
			winner := results[0].Manifest.Attempt
			if results[1].Manifest == nil || results[1].Manifest.Attempt != winner {
				t.Fatalf("the two attempts disagree on the winner")
			}
			verifyExactlyOnce(t, fsA, workload)
		})
	}
}

// TestHDFSTornManifest: a manifest left half-written by a dead HDFS writer is
// reported, left alone within TornGrace, then moved aside; the split is then
// loaded once.
func TestHDFSTornManifest(t *testing.T) {
	fs := hdfsFS(t)
	c := newTestClock(time.Now())
	store := NewStore(fs, StoreOptions{Clock: c, Lease: time.Minute, TornGrace: 5 * time.Minute, ManifestWait: 100 * time.Millisecond})
	// A dead attempt: its files and the first half of its manifest.
	w, err := NewSplitWriter(store, workload, workloadConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for off := workload.Start; off < workload.End; off++ {
		if err := w.Write(pageViewSchema(t), pageView(off), format.Meta{Offset: off, Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
	}
	for _, of := range w.open {
		if err := w.closeFile(of); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manifest{Topic: workload.Topic, Partition: workload.Partition, Start: workload.Start, End: workload.End,
		Attempt: w.Attempt().ID(), Files: w.done}
	b, _ := m.Encode()
	mp := ManifestPath(workload.Topic, workload.Partition, workload.Start)
	if err := fs.MkdirAll("_sluice/commits/pageviews/2"); err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteExclusive(mp, b[:len(b)/2]); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Commits(workload.Topic, workload.Partition); !errors.Is(err, ErrTornManifest) {
		t.Fatalf("Commits: %v, want ErrTornManifest", err)
	}
	// Within the grace period recovery leaves it alone.
	rep, err := store.Recover(workload.Topic, workload.Partition)
	if err != nil || len(rep.Pending) != 1 || len(rep.TornMovedAway) != 0 {
		t.Fatalf("recover within grace: %+v %v", rep, err)
	}
	// Another attempt cannot commit over it; its commit intent stands.
	res, err := runSplit(store, workload, workloadConfig(t), pageViewSchema(t))
	if !errors.Is(err, ErrCommitUnknown) || res.Won {
		t.Fatalf("commit over a torn manifest: %+v %v", res, err)
	}
	// After the grace the torn writer is presumed dead: its manifest goes
	// aside, its attempt (lease expired) is removed, and the second
	// attempt's commit is completed from its intent.
	c.Advance(time.Hour)
	rep, err = store.Recover(workload.Topic, workload.Partition)
	if err != nil || len(rep.TornMovedAway) != 1 || len(rep.RolledForward) != 1 || len(rep.Discarded) != 1 {
		t.Fatalf("recover after grace: %+v %v", rep, err)
	}
	if n, err := store.NextStart(workload.Topic, workload.Partition, 0); err != nil || n != workload.End {
		t.Fatalf("NextStart %d %v", n, err)
	}
	verifyExactlyOnce(t, fs, workload)
}

// The kill -9 test re-executes this test binary as a writer process.
const childEnv = "SLUICE_WRITERS_KILL_CHILD" // "<fs uri> <mode>"

// runChild writes the workload to HDFS and stops at a point named by mode,
// printing READY there and waiting to be killed:
//
//	mid-write   two files closed, the third half written
//	mid-commit  the manifest created, no file moved yet
func runChild() int {
	uri, mode, _ := strings.Cut(os.Getenv(childEnv), " ")
	fs, err := filesystem.Open(uri)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	schema, err := loadPageViewSchema()
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	store := NewStore(fs, StoreOptions{})
	cfg := workloadConfig(nil)
	cfg.Format.Compression = "none"
	w, err := NewSplitWriter(store, workload, cfg)
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	hang := func() {
		fmt.Println("READY")
		bufio.NewReader(os.Stdin).ReadString('\n') // until killed
		os.Exit(3)
	}
	if mode == "mid-commit" {
		testHookAfterManifest = hang
	}
	pad := strings.Repeat("x", 4096)
	for off := workload.Start; off < workload.End; off++ {
		v := pageView(off)
		v["user_agent"] = pad // big records: the open file's bytes reach the DataNode
		if err := w.Write(schema, v, format.Meta{Offset: off, Timestamp: t0}); err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		if mode == "mid-write" && off == workload.Start+2*40+30 {
			hang()
		}
	}
	if _, err := w.Commit(workload.End); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("DONE")
	return 0
}

// TestHDFSKilledWriter kills a writer process with SIGKILL mid-write and
// mid-commit: recovery leaves no partial file visible and the split ends up
// committed exactly once (re-run after mid-write, rolled forward after
// mid-commit).
func TestHDFSKilledWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("needs HDFS")
	}
	hdfs.Start(t)
	for _, mode := range []string{"mid-write", "mid-commit"} {
		t.Run(mode, func(t *testing.T) {
			fs := hdfsFS(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+fs.String()+" "+mode)
			stdin, _ := cmd.StdinPipe()
			defer stdin.Close()
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "READY" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child said %q %v", line, err)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL: %v", err)
			}

			store := NewStore(fs, recoverOpts)
			// Nothing uncommitted is visible.
			ms, err := store.Commits(workload.Topic, workload.Partition)
			if err != nil {
				t.Fatal(err)
			}
			if mode == "mid-write" && (len(ms) != 0 || len(walkFiles(t, fs, ".")) != 0) {
				t.Fatalf("after a kill mid-write: %d manifests, files %v", len(ms), walkFiles(t, fs, "."))
			}
			if mode == "mid-commit" && len(ms) != 1 {
				t.Fatalf("after a kill mid-commit: %d manifests", len(ms))
			}
			if mode == "mid-write" {
				// The dead writer's files, one of them half written, are in its
				// attempt directory only.
				var left []string
				for _, f := range walkFiles(t, fs, "_sluice/tmp") {
					if !strings.Contains(path.Base(f), "+") {
						continue // the lease
					}
					st, _ := fs.Stat(f)
					left = append(left, fmt.Sprintf("%s (%d bytes)", f, st.Size))
				}
				if len(left) != 4 {
					t.Fatalf("attempt files %v, want 4 (2 closed, 2 open: hours 13 and 14)", left)
				}
				t.Logf("left by the killed writer: %v", left)
			}
			rep, err := store.Recover(workload.Topic, workload.Partition)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("recovery: %+v", rep)
			next, err := store.NextStart(workload.Topic, workload.Partition, workload.Start)
			if err != nil {
				t.Fatal(err)
			}
			if mode == "mid-write" {
				if next != workload.Start {
					t.Fatalf("NextStart %d", next)
				}
				cfg := workloadConfig(t)
				cfg.Format.Compression = "none"
				if res, err := runSplit(store, workload, cfg, pageViewSchema(t)); err != nil || !res.Won {
					t.Fatalf("re-run: %+v %v", res, err)
				}
			} else if next != workload.End || len(rep.RolledForward) != 1 {
				t.Fatalf("mid-commit: NextStart %d, rolled forward %v", next, rep.RolledForward)
			}
			verifyExactlyOnce(t, fs, workload)
		})
	}
}
