package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs"
)

func init() { extraCommands = append(extraCommands, newLoadCommand) }

func newLoadCommand() *cobra.Command {
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
			spec, err := jobs.LoadSpec(args[0])
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			opts := jobs.Options{Workers: workers,
				Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			rep, err := jobs.Run(ctx, spec, opts)
			if rep != nil {
				rep.WriteText(c.OutOrStdout())
			}
			if err != nil {
				return fmt.Errorf("load %s: %w", spec.Name, err)
			}
			return nil
		},
	}
	run.Flags().IntVar(&workers, "workers", 2, "tasks run at once")
	run.Flags().BoolVar(&quiet, "quiet", false, "no progress bar")
	plan := &cobra.Command{
		Use:   "plan JOB.yaml",
		Short: "Show the splits a run would load now, and the lag per partition",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			spec, err := jobs.LoadSpec(args[0])
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			p, err := jobs.Plan(ctx, spec)
			if err != nil {
				return err
			}
			return jobs.WritePlan(c.OutOrStdout(), p)
		},
	}
	cmd.AddCommand(run, plan)
	return cmd
}
