package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/writers/filesystem"
)

func init() { extraCommands = append(extraCommands, newRunsCommand) }

func newRunsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "Show the scheduler's run history of a job"}
	var limit int
	var asJSON bool
	list := &cobra.Command{
		Use:   "list JOB.yaml",
		Short: "List a job's scheduled runs (newest last) with state, records, lag and failed tasks",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			runs, err := jobRuns(args[0])
			if err != nil {
				return err
			}
			if limit > 0 && len(runs) > limit {
				runs = runs[len(runs)-limit:]
			}
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(runs)
			}
			writeRuns(c.OutOrStdout(), runs)
			return nil
		},
	}
	list.Flags().IntVar(&limit, "limit", 20, "show the newest N runs (0: all)")
	list.Flags().BoolVar(&asJSON, "json", false, "print the run records as JSON")
	cmd.AddCommand(list)
	return cmd
}

func jobRuns(specPath string) ([]scheduler.RunRecord, error) {
	job, err := loadJob(specPath)
	if err != nil {
		return nil, err
	}
	open := job.OpenOutput
	if open == nil {
		open = func() (vfs.FS, error) { return filesystem.Open(job.Output) }
	}
	fs, err := open()
	if err != nil {
		return nil, fmt.Errorf("runs: output of %s: %w", job.Name, err)
	}
	defer fs.Close()
	return scheduler.NewHistory(fs, job.Name).List()
}

func loadJob(specPath string) (scheduler.Job, error) {
	data, err := readSpecFile(specPath)
	if err != nil {
		return scheduler.Job{}, err
	}
	return (&scheduler.LoaderEngine{}).ParseJob(specPath, data)
}

func writeRuns(w io.Writer, runs []scheduler.RunRecord) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs yet: the scheduler records each run here once it starts one")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSCHEDULED\tDURATION\tSTATE\tRECORDS\tLAG\tTASKS\tSKIPPED TICKS\tCOMPLETE")
	for _, r := range runs {
		dur := "-"
		if !r.Ended.IsZero() {
			dur = r.Ended.Sub(r.Started).Round(time.Millisecond).String()
		}
		failed := 0
		for _, t := range r.Tasks {
			if t.State != scheduler.StateSucceeded {
				failed++
			}
		}
		tasks := fmt.Sprint(len(r.Tasks))
		if failed > 0 {
			tasks = fmt.Sprintf("%d (%d not done)", len(r.Tasks), failed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\n", r.ID, r.Scheduled.UTC().Format(time.RFC3339), dur, r.State,
			r.Records, r.Lag, tasks, r.SkippedTicks, len(r.Complete))
	}
	tw.Flush()
	for _, r := range runs {
		if r.State == scheduler.StateSucceeded || r.State == scheduler.StateRunning {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: %s\n", r.ID, r.State, r.Error)
		for _, t := range r.Tasks {
			if t.State == scheduler.StateFailed {
				fmt.Fprintf(w, "  task %s failed after %d attempts: %s\n", t.Task, t.Attempts, t.Error)
			}
		}
	}
}

func readSpecFile(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("runs: %w (give the job's spec file, JOB.yaml)", err)
	}
	return b, nil
}
