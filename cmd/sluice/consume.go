package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newConsumeCommand) }

func newConsumeCommand() *cobra.Command {
	var (
		opts       kafka.ConsumeOptions
		partitions []int32
		quiet      bool
		sec        *securityFlags
	)
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Print records of a topic",
		Long: "Reads a topic's partitions (directly, or as a --group member) and prints each record through --format.\n" +
			"Formats: value (default), kv, json, or a template with %t %p %o %k %v %T %K %S %h and \\n \\t escapes.\n" +
			"Stops after --max records, at the end of the log with --exit-at-end (-e), or after --timeout without a record.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Partitions = partitions
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			opts.Progress = c.ErrOrStderr()
			var err error
			if opts.Security, err = sec.security(); err != nil {
				return err
			}
			n, err := kafka.Consume(ctx, opts, c.OutOrStdout())
			if !quiet && (err == nil || n > 0) {
				fmt.Fprintf(c.ErrOrStderr(), "consumed %d records from %s\n", n, opts.Topic)
			}
			if err != nil && ctx.Err() != nil && c.Context().Err() == nil {
				return nil // interrupted by the user: a normal end
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT]")
	f.StringVarP(&opts.Topic, "topic", "t", "", "topic to read (required)")
	sec = addSecurityFlags(f)
	f.StringVarP(&opts.Group, "group", "g", "", "consume as a member of this consumer group, committing offsets")
	f.Int32SliceVarP(&partitions, "partition", "p", nil, "partitions to read (repeatable or comma-separated; default all)")
	f.StringVarP(&opts.From, "from", "o", "earliest", "start at earliest, latest or offset N")
	f.Int64VarP(&opts.Max, "max", "n", 0, "stop after this many records (0: no limit)")
	f.StringVarP(&opts.Format, "format", "f", "value", "output format: value, kv, json or a template like '%k\\t%v\\n'")
	f.BoolVarP(&opts.ExitAtEnd, "exit-at-end", "e", false, "stop at the end offsets the partitions had at start")
	f.StringVar(&opts.Isolation, "isolation", "read_uncommitted", "read_uncommitted (every record) or read_committed (committed transactions only, up to the last stable offset)")
	f.DurationVar(&opts.Timeout, "timeout", 0, "stop when no record arrived for this long (0: wait forever)")
	f.DurationVar(&opts.ProgressInterval, "progress-interval", 5*time.Second, "print records, bytes and rates to stderr this often (0: never)")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not print the record count")
	return cmd
}
