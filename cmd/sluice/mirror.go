package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/internal/mirror"
)

func init() { extraCommands = append(extraCommands, newMirrorCommand) }

// sideSecurity are the --from-command-config and --to-command-config flags:
// a Kafka client properties file per cluster (security.protocol,
// sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...), as
// MirrorMaker takes src.* and dst.* client settings.
type sideSecurity struct{ from, to string }

func addSideSecurityFlags(f *pflag.FlagSet) *sideSecurity {
	s := &sideSecurity{}
	f.StringVar(&s.from, "from-command-config", "", "Kafka client properties file for the source (security.protocol, sasl.*, ssl.*)")
	f.StringVar(&s.to, "to-command-config", "", "Kafka client properties file for the target (security.protocol, sasl.*, ssl.*)")
	return s
}

// security reads and checks both files (none: PLAINTEXT).
func (s *sideSecurity) security() (from, to kafka.Security, err error) {
	read := func(flag, path string) (kafka.Security, error) {
		if path == "" {
			return kafka.Security{}, nil
		}
		sec, err := kafka.ReadClientProperties(path)
		if err == nil {
			err = sec.Check()
		}
		if err == nil {
			_, err = sec.TLSConfig()
		}
		if err != nil {
			return kafka.Security{}, fmt.Errorf("--%s: %w", flag, err)
		}
		return sec.Normalized(), nil
	}
	if from, err = read("from-command-config", s.from); err == nil {
		to, err = read("to-command-config", s.to)
	}
	return from, to, err
}

func newMirrorCommand() *cobra.Command {
	var (
		sec              *sideSecurity
		cfg              mirror.Config
		topics, exclude  string
		metricsAddr      string
		logLevel         string
		progressInterval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mirror --from BOOTSTRAP --to BOOTSTRAP --topics REGEX",
		Short: "Copy topics from one Kafka-protocol cluster to another, exactly once, in order per partition",
		Long: `Copy the source topics matching --topics (the whole name; internal topics __* and _schemas only
when named) to the same topic and partition on the target: keys, values, headers and timestamps kept.
Target topics are created with the source's partition count and non-default configs; new partitions
and topics are followed. Each transaction on the target holds the copied records and the mirror's
source position, so a mirror killed at any moment resumes without loss or duplicate: consumers of
the target must read with isolation level read_committed. Checkpoints (source offset → target
offset) go to the compacted topic NAME.checkpoints on the target every --checkpoint-interval, for
'sluice mirror translate'. SIGINT or SIGTERM stops after aborting the open transaction.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if topics == "" {
				return fmt.Errorf("mirror: --topics REGEX is required")
			}
			var err error
			if cfg.Selection.Topics, err = regexp.Compile(topics); err != nil {
				return fmt.Errorf("mirror: --topics %q: %v", topics, err)
			}
			if exclude != "" {
				if cfg.Selection.Exclude, err = regexp.Compile(exclude); err != nil {
					return fmt.Errorf("mirror: --exclude %q: %v", exclude, err)
				}
			}
			if cfg.FromSecurity, cfg.ToSecurity, err = sec.security(); err != nil {
				return err
			}
			sf := serviceFlags{metricsListen: metricsAddr, logLevel: logLevel}
			log, err := sf.logger("mirror")
			if err != nil {
				return err
			}
			reg, stop, err := sf.serveMetrics("mirror", log)
			if err != nil {
				return err
			}
			defer stop()
			cfg.Logger, cfg.Metrics = log, mirror.NewMetrics(reg)
			cfg.Progress, cfg.ProgressInterval = c.ErrOrStderr(), progressInterval
			m, err := mirror.New(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			return m.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.From, "from", "", "source cluster HOST:PORT[,HOST:PORT]")
	f.StringVar(&cfg.To, "to", "", "target cluster HOST:PORT[,HOST:PORT]")
	sec = addSideSecurityFlags(f)
	f.StringVar(&topics, "topics", "", "regular expression the whole source topic name must match")
	f.StringVar(&exclude, "exclude", "", "regular expression of topics not to mirror")
	f.StringVar(&cfg.Name, "name", "mirror", "mirror name: transactional id sluice-mirror.NAME and checkpoint topic NAME.checkpoints on the target")
	f.StringVar(&cfg.Start, "start", "earliest", "where a partition without a committed position starts: earliest or latest")
	f.StringVar(&cfg.OnOutOfRange, "on-out-of-range", "fail", "when the source deleted offsets not yet copied: fail, or skip them (logged and counted)")
	f.DurationVar(&cfg.CommitInterval, "commit-interval", 200*time.Millisecond, "how long one transaction collects records")
	f.IntVar(&cfg.MaxTxnRecords, "max-txn-records", 50_000, "most records in one transaction")
	f.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", 5*time.Second, "how often offset-translation checkpoints are written")
	f.DurationVar(&cfg.RefreshInterval, "refresh-interval", 10*time.Second, "how often the source is listed for new topics and partitions")
	f.StringVar(&cfg.Compression, "compression", "none", "target batch compression: none, gzip, snappy, lz4 or zstd")
	f.BoolVar(&cfg.Audit, "audit", false, "count the records copied per topic and window and publish the counts to the target's _audit in the copies' transaction (the mirror tier of sluice audit)")
	f.DurationVar(&cfg.AuditWindow, "audit-window", 10*time.Minute, "width of the audit's windows, by record time (keep it across restarts)")
	f.BoolVar(&cfg.ExitWhenCaughtUp, "exit-when-caught-up", false, "exit once every partition reached the source's high watermark")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:9406)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.DurationVar(&progressInterval, "progress-interval", 5*time.Second, "time between progress lines on stderr (0: none)")

	cmd.AddCommand(newMirrorTranslateCommand(), newMirrorStatusCommand())
	return cmd
}

func newMirrorTranslateCommand() *cobra.Command {
	var (
		opts    mirror.TranslateOptions
		sec     *sideSecurity
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "translate --group G --name NAME --from SOURCE --to TARGET",
		Short: "Commit a consumer group's source offsets, translated through the mirror's checkpoints, on the target",
		Long: `Read group G's committed offsets on the source and commit for G on the target the offset of the
newest checkpoint at or below each: a consumer resuming on the target skips nothing and rereads at
most the records the mirror copied in one --checkpoint-interval (REREAD column). Stop the group's
consumers first.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, timeout)
			defer cancelT()
			var err error
			if opts.FromSecurity, opts.ToSecurity, err = sec.security(); err != nil {
				return err
			}
			ts, err := mirror.Translate(ctx, opts)
			if werr := mirror.WriteTranslated(c.OutOrStdout(), ts, asJSON); werr != nil && err == nil {
				err = werr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.From, "from", "", "source cluster HOST:PORT[,HOST:PORT]")
	f.StringVar(&opts.To, "to", "", "target cluster HOST:PORT[,HOST:PORT]")
	sec = addSideSecurityFlags(f)
	f.StringVar(&opts.Name, "name", "mirror", "the mirror's --name")
	f.StringVar(&opts.Group, "group", "", "consumer group to translate")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the translation, commit nothing")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

func newMirrorStatusCommand() *cobra.Command {
	var (
		opts    mirror.StatusOptions
		sec     *sideSecurity
		timeout time.Duration
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "status --name NAME --to TARGET [--from SOURCE]",
		Short: "Show a mirror's committed position per partition, its lag behind the source and its last checkpoint",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, timeout)
			defer cancelT()
			var err error
			if opts.FromSecurity, opts.ToSecurity, err = sec.security(); err != nil {
				return err
			}
			ss, err := mirror.Status(ctx, opts)
			if err != nil {
				return err
			}
			return mirror.WriteStatus(c.OutOrStdout(), ss, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.From, "from", "", "source cluster, for the lag (optional)")
	f.StringVar(&opts.To, "to", "", "target cluster HOST:PORT[,HOST:PORT]")
	sec = addSideSecurityFlags(f)
	f.StringVar(&opts.Name, "name", "mirror", "the mirror's --name")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}
