// Package jobcli holds the loader's commands — `load run|plan`,
// `checkpoints list|show` and `replay` — so that the sluice binary and a
// user's own binary (one that registers custom mappers) offer the same
// commands:
//
//	func main() {
//		jobs.RegisterMapper("enrich", newEnrich)
//		jobcli.Main()
//	}
package jobcli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs"
)

// Main runs a command line made of the loader's commands and exits.
func Main() {
	root := &cobra.Command{
		Use:           filepath.Base(os.Args[0]),
		Short:         "Load Kafka-protocol topics into Parquet, Avro or JSON lines, exactly once",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(Commands()...)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", root.Name(), err)
		os.Exit(1)
	}
}

// Commands returns the load, checkpoints, replay and compact commands.
func Commands() []*cobra.Command {
	return []*cobra.Command{LoadCommand(), CheckpointsCommand(), ReplayCommand(), CompactCommand()}
}

func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// withJob loads a job spec, opens its loader for fn (cancelled on SIGINT
// or SIGTERM) and closes it.
func withJob(c *cobra.Command, path string, opts jobs.Options, fn func(ctx context.Context, l *jobs.Loader) error) error {
	ctx, cancel := signalContext(c.Context())
	defer cancel()
	spec, err := jobs.LoadSpec(path)
	if err != nil {
		return err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	l, err := jobs.Open(ctx, spec, opts)
	if err != nil {
		return err
	}
	defer l.Close()
	return fn(ctx, l)
}

// LoadCommand is `load run JOB.yaml` and `load plan JOB.yaml`.
func LoadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Load a job's topics into its output, exactly once",
	}
	var workers int
	var quiet bool
	run := &cobra.Command{
		Use:   "run JOB.yaml",
		Short: "Run a job once now: plan, load every split, commit, print and store the run report",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts := jobs.Options{Workers: workers}
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			return withJob(c, args[0], opts, func(ctx context.Context, l *jobs.Loader) error {
				rep, err := l.Run(ctx)
				if rep != nil {
					rep.WriteText(c.OutOrStdout())
				}
				if err != nil {
					return fmt.Errorf("load %s: %w", l.Spec().Name, err)
				}
				return nil
			})
		},
	}
	run.Flags().IntVar(&workers, "workers", 2, "tasks run at once")
	run.Flags().BoolVar(&quiet, "quiet", false, "no progress bar")
	plan := &cobra.Command{
		Use:   "plan JOB.yaml",
		Short: "Show the splits a run would load now, and the lag per partition (changes nothing)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withJob(c, args[0], jobs.Options{}, func(ctx context.Context, l *jobs.Loader) error {
				p, err := l.Preview(ctx)
				if err != nil {
					return err
				}
				return jobs.WritePlan(c.OutOrStdout(), p)
			})
		},
	}
	cmd.AddCommand(run, plan)
	return cmd
}

// CheckpointsCommand is `checkpoints list JOB.yaml` and `checkpoints show [JOB.yaml] ID`.
func CheckpointsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoints",
		Short: "Show a job's checkpoint history (its commits)",
	}
	list := &cobra.Command{
		Use:   "list JOB.yaml",
		Short: "One line per partition: checkpoint offset, time of the last loaded record, lag, and the checkpoint's ID",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withJob(c, args[0], jobs.Options{}, func(ctx context.Context, l *jobs.Loader) error {
				cps, err := l.Checkpoints(ctx)
				if werr := jobs.WriteCheckpoints(c.OutOrStdout(), cps); werr != nil {
					return werr
				}
				if err != nil {
					fmt.Fprintf(c.ErrOrStderr(), "lag unknown: %v\n", err)
				}
				if ids, _ := l.RunIDs(); len(ids) > 0 {
					fmt.Fprintf(c.OutOrStdout(), "\nruns (each a checkpoint of every partition): %d, newest %s\n", len(ids), ids[len(ids)-1])
				}
				return nil
			})
		},
	}
	var job string
	show := &cobra.Command{
		Use:   "show [JOB.yaml] ID",
		Short: "Describe one checkpoint: TOPIC/PARTITION@OFFSET or a run id",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			id := args[len(args)-1]
			if len(args) == 2 {
				job = args[0]
			}
			if job == "" {
				return fmt.Errorf("checkpoints show: name the job: checkpoints show JOB.yaml %s (or --job JOB.yaml)", id)
			}
			return withJob(c, job, jobs.Options{}, func(ctx context.Context, l *jobs.Loader) error {
				d, err := l.CheckpointDetail(id)
				if err != nil {
					return err
				}
				return d.WriteText(c.OutOrStdout())
			})
		},
	}
	show.Flags().StringVar(&job, "job", "", "the job spec (instead of the first argument)")
	cmd.AddCommand(list, show)
	return cmd
}

// ReplayCommand is `replay JOB.yaml --from-checkpoint ID`.
func ReplayCommand() *cobra.Command {
	var from string
	var workers int
	var quiet bool
	cmd := &cobra.Command{
		Use:   "replay JOB.yaml --from-checkpoint ID",
		Short: "Withdraw the output committed after a checkpoint (moved aside, not deleted) and reload from it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if from == "" {
				return fmt.Errorf("replay: --from-checkpoint ID is required (see checkpoints list %s)", args[0])
			}
			opts := jobs.Options{Workers: workers}
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			return withJob(c, args[0], opts, func(ctx context.Context, l *jobs.Loader) error {
				rep, err := l.Replay(ctx, from)
				if rep != nil {
					rep.WriteText(c.OutOrStdout())
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&from, "from-checkpoint", "", "checkpoint ID: TOPIC/PARTITION@OFFSET or a run id")
	cmd.Flags().IntVar(&workers, "workers", 2, "tasks run at once")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress bar")
	return cmd
}
