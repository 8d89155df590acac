package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newProduceCommand) }

func newProduceCommand() *cobra.Command {
	var (
		opts  kafka.ProduceOptions
		quiet bool
		sec   *securityFlags
		aud   producerAudit
	)
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Write lines from stdin as records to a topic",
		Long: "Reads standard input line by line; each line becomes one record. With --key-separator the\n" +
			"text before the first separator is the key. Exits when stdin ends and every record is acknowledged.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			opts.Progress = c.ErrOrStderr()
			var err error
			if opts.Security, err = sec.security(); err != nil {
				return err
			}
			publish, err := aud.start(&opts.ProducerConfig)
			if err != nil {
				return err
			}
			n, err := kafka.Produce(ctx, opts, c.InOrStdin())
			if !quiet && (err == nil || n > 0) {
				fmt.Fprintf(c.ErrOrStderr(), "produced %d records to %s\n", n, opts.Topic)
			}
			return errors.Join(err, publish())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT]")
	f.StringVarP(&opts.Topic, "topic", "t", "", "topic to write to (required)")
	f.StringVarP(&opts.KeySeparator, "key-separator", "K", "", "split each line into key and value at the first occurrence of this string")
	f.StringVarP(&opts.Compression, "compression", "z", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	f.Int32VarP(&opts.Partition, "partition", "p", -1, "write every record to this partition (-1: by key hash)")
	f.StringVar(&opts.Acks, "acks", "all", "acknowledgements: all (-1, idempotent), 1 or 0")
	f.IntVar(&opts.LingerMs, "linger-ms", -1, "how long a batch waits for more records (-1: client default)")
	f.IntVar(&opts.MaxLineBytes, "max-line-bytes", 1<<20, "longest accepted input line")
	f.DurationVar(&opts.ProgressInterval, "progress-interval", 5*time.Second, "print records, bytes and rates to stderr this often (0: never)")
	f.BoolVarP(&quiet, "quiet", "q", false, "do not print the record count")
	sec = addSecurityFlags(f)
	aud.register(f)
	return cmd
}
