package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs"
)

func init() { extraCommands = append(extraCommands, newReplayCommand) }

func newReplayCommand() *cobra.Command {
	var from string
	var workers int
	var quiet bool
	cmd := &cobra.Command{
		Use:   "replay JOB.yaml --from-checkpoint ID",
		Short: "Withdraw the output committed after a checkpoint (moved aside, not deleted) and reload from it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if from == "" {
				return fmt.Errorf("replay: --from-checkpoint ID is required (see sluice checkpoints list %s)", args[0])
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			opts := jobs.Options{Workers: workers}
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			l, err := openJob(ctx, args[0], opts)
			if err != nil {
				return err
			}
			defer l.Close()
			rep, err := l.Replay(ctx, from)
			if rep != nil {
				rep.WriteText(c.OutOrStdout())
			}
			return err
		},
	}
	cmd.Flags().StringVar(&from, "from-checkpoint", "", "checkpoint ID: TOPIC/PARTITION@OFFSET or a run id")
	cmd.Flags().IntVar(&workers, "workers", 2, "tasks run at once")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress bar")
	return cmd
}
