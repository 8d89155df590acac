package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

func init() { extraCommands = append(extraCommands, newAuditCommand) }

// errUnbalanced is the audit's failure: a window past the lateness does
// not balance.
var errUnbalanced = errors.New("audit: windows do not balance")

func newAuditCommand() *cobra.Command {
	var (
		bootstrap, topic, jobPath string
		sourceBootstrap           string
		metricsFile               string
		since, lateness, window   time.Duration
		timeout                   time.Duration
		asJSON                    bool
		sec                       *securityFlags
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Balance the books: each tier's record counts per window against the producers'",
		Long: "Reads the counts the producers (and other tiers) published to the _audit topic and, with --job,\n" +
			"the load tier from the job's committed manifests; prints per topic and window each tier's count,\n" +
			"its difference to the producer tier and the state: balanced, pending (younger than the lateness)\n" +
			"or missing / extra, with the reason where it can be told. Exits non-zero when a window older\n" +
			"than the lateness does not balance.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, timeout)
			defer cancelT()
			security, err := sec.security()
			if err != nil {
				return err
			}
			var load *audit.Load
			if jobPath != "" {
				spec, err := jobs.LoadSpec(jobPath)
				if err != nil {
					return err
				}
				if !c.Flags().Changed("lateness") {
					lateness = spec.Lateness()
				}
				if !c.Flags().Changed("bootstrap") {
					bootstrap = strings.Join(spec.Source.Bootstrap, ",")
				}
				l, err := jobLoadTier(spec)
				if err != nil {
					return err
				}
				load = &l
			}
			client, err := kafka.ClientOptions(bootstrap, security)
			if err != nil {
				return err
			}
			counts, err := audit.ReadCounts(ctx, client)
			if err != nil {
				return err
			}
			if sourceBootstrap != "" {
				// The whole path: the producer and broker tiers of the
				// mirror's source cluster, the mirror, broker and load
				// tiers of this one.
				srcClient, err := kafka.ClientOptions(sourceBootstrap, security)
				if err != nil {
					return err
				}
				src, err := audit.ReadCounts(ctx, srcClient)
				if err != nil {
					return fmt.Errorf("--source-bootstrap: %w", err)
				}
				counts.Counts = append(counts.Counts, audit.Relabel(src.Counts)...)
				counts.Unreadable += src.Unreadable
			}
			now := time.Now()
			var from time.Time
			if since > 0 {
				from = now.Add(-since)
			}
			rep, err := audit.Balance(counts.Counts, load, audit.Options{Window: window, Lateness: lateness, Now: now, Since: from, Topic: topic})
			if err != nil {
				return err
			}
			if counts.Unreadable > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%d records of %s could not be read (another format version?)", counts.Unreadable, audit.Topic))
			}
			if metricsFile != "" {
				reg := prometheus.NewRegistry()
				if err := rep.Register(reg); err != nil {
					return err
				}
				if err := prometheus.WriteToTextfile(metricsFile, reg); err != nil {
					return fmt.Errorf("audit: --metrics-file: %w", err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(c.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if rep.Unbalanced > 0 {
				return fmt.Errorf("%w: %d of %d windows older than the lateness (%s)", errUnbalanced, rep.Unbalanced, len(rep.Windows), lateness)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT] (default with --job: the job's source)")
	sec = addSecurityFlags(f)
	f.StringVar(&sourceBootstrap, "source-bootstrap", "", "a mirror's source cluster: its producer and broker (as source-broker) tiers join this cluster's mirror, broker and load tiers")
	f.StringVarP(&topic, "topic", "t", "", "audit this topic only (default: every topic with producer counts)")
	f.DurationVar(&since, "since", 24*time.Hour, "audit the windows that ended in this last span (0: all)")
	f.StringVar(&jobPath, "job", "", "a job spec: its committed manifests are the load tier")
	f.DurationVar(&lateness, "lateness", 0, "a window younger than its end plus this is pending, not missing (default: the job's allowed_lateness)")
	f.DurationVar(&window, "window", audit.DefaultWindow, "window width audited; every tier's window must divide it")
	f.DurationVar(&timeout, "timeout", time.Minute, "give up after this long")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&metricsFile, "metrics-file", "", "also write per tier and topic the latest balanced window and the unbalanced windows to this file, in the Prometheus text format (a node exporter's textfile collector)")
	return cmd
}

// jobLoadTier reads the load tier of a job from its committed manifests.
func jobLoadTier(spec *jobs.Spec) (audit.Load, error) {
	fs, err := filesystem.OpenWith(spec.OutputURI(), spec.HDFSOptions())
	if err != nil {
		return audit.Load{}, fmt.Errorf("audit: output of %s: %w", spec.Name, err)
	}
	defer fs.Close()
	return audit.LoadCounts(writers.NewStore(fs, writers.StoreOptions{}), spec.Name, spec.Source.Topics)
}

// producerAudit is the --audit flags of the producing commands.
type producerAudit struct {
	enabled  bool
	window   time.Duration
	interval time.Duration
}

func (a *producerAudit) register(f *pflag.FlagSet) {
	f.BoolVar(&a.enabled, "audit", false, "count the acknowledged records per window and publish the counts to the _audit topic (the producer tier of `sluice audit`)")
	f.DurationVar(&a.window, "audit-window", audit.DefaultWindow, "width of the audit's windows, by record time")
	f.DurationVar(&a.interval, "audit-interval", time.Minute, "publish the counts this often (and at the end)")
}

// start installs the counting hook in cfg and returns the function that
// publishes what is left (call it after the producer flushed); nil when
// --audit is off.
func (a *producerAudit) start(cfg *kafka.ProducerConfig) (func() error, error) {
	if !a.enabled {
		return func() error { return nil }, nil
	}
	client, err := kafka.ClientOptions(cfg.Bootstrap, cfg.Security)
	if err != nil {
		return nil, err
	}
	p, err := audit.StartProducer(client, a.window, a.interval, slog.Default())
	if err != nil {
		return nil, err
	}
	cfg.Hooks = append(cfg.Hooks, p.Hook)
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return p.Close(ctx)
	}, nil
}
