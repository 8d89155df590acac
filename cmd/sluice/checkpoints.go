package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs"
)

func init() { extraCommands = append(extraCommands, newCheckpointsCommand) }

// openJob loads a job spec and opens its loader.
func openJob(ctx context.Context, path string, opts jobs.Options) (*jobs.Loader, error) {
	spec, err := jobs.LoadSpec(path)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return jobs.Open(ctx, spec, opts)
}

func newCheckpointsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoints",
		Short: "Show a job's checkpoint history (its commits)",
	}
	list := &cobra.Command{
		Use:   "list JOB.yaml",
		Short: "One line per partition: checkpoint offset, time of the last loaded record, lag, and the checkpoint's ID",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			l, err := openJob(ctx, args[0], jobs.Options{})
			if err != nil {
				return err
			}
			defer l.Close()
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
				return fmt.Errorf("checkpoints show: name the job: sluice checkpoints show JOB.yaml %s (or --job JOB.yaml)", id)
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			l, err := openJob(ctx, job, jobs.Options{})
			if err != nil {
				return err
			}
			defer l.Close()
			d, err := l.CheckpointDetail(id)
			if err != nil {
				return err
			}
			return d.WriteText(c.OutOrStdout())
		},
	}
	show.Flags().StringVar(&job, "job", "", "the job spec (instead of the first argument)")
	cmd.AddCommand(list, show)
	return cmd
}
