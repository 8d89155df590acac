package jobcli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs"
)

// CompactCommand is `compact JOB.yaml [--older-than 2h] [--dry-run]`.
func CompactCommand() *cobra.Command {
	var olderThan time.Duration
	var target string
	var dry, quiet, asJSON bool
	cmd := &cobra.Command{
		Use:   "compact JOB.yaml [--older-than 2h] [--dry-run]",
		Short: "Rewrite the small files of complete time directories into few large ones, exactly once",
		Long: `compact rewrites, for each partition of the job, the files of every time directory whose end
(plus allowed_lateness) is older than --older-than into as few files of about --target-file-bytes as
possible. A query sees the old files or the new ones, never both or neither; checkpoints do not change;
a replay still works. It takes the job lock: a load of the job waits for it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if olderThan < 0 {
				return fmt.Errorf("compact: --older-than %s: must not be negative", olderThan)
			}
			var opts jobs.CompactOptions
			opts.OlderThan, opts.DryRun = olderThan, dry
			if target != "" {
				n, err := jobs.ParseByteSize(target)
				if err != nil || n < 1<<10 {
					return fmt.Errorf("compact: --target-file-bytes %q: want a size of at least 1KiB (\"256MiB\")", target)
				}
				opts.TargetBytes = n
			}
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			return withJob(c, args[0], jobs.Options{}, func(ctx context.Context, l *jobs.Loader) error {
				rep, err := l.Compact(ctx, opts)
				if rep != nil {
					if asJSON {
						b, _ := json.MarshalIndent(rep, "", "  ")
						fmt.Fprintln(c.OutOrStdout(), string(b))
					} else {
						rep.WriteText(c.OutOrStdout())
					}
				}
				return err
			})
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "compact directories whose end plus allowed_lateness is this old (default: the spec's compact.after, else 2h)")
	cmd.Flags().StringVar(&target, "target-file-bytes", "", "size of the files written (default: the spec's compact.target_file_bytes, else 256MiB)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "say what would be rewritten; write nothing")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress bar")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
