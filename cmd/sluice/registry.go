package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/broker/schemaregistry"
	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newRegistryCommand) }

func newRegistryCommand() *cobra.Command {
	var (
		listen, bootstrap, topic, logLevel string
		maxRequestBytes                    int64
		startTimeout                       time.Duration
		sec                                *securityFlags
	)
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Run a Confluent-compatible schema registry stored in a Kafka topic",
		Long: `Serve the Confluent Schema Registry REST API (subjects, versions, ids, compatibility
config; Avro schemas) on --listen, storing everything in the compacted --topic of the
brokers at --bootstrap. Several registries on the same brokers serve the same ids.
Prometheus metrics are at /metrics. SIGTERM or SIGINT stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("registry: --log-level %q: use debug, info, warn or error", logLevel)
			}
			seeds, err := kafka.SplitBootstrap(bootstrap)
			if err != nil {
				return fmt.Errorf("registry: --bootstrap: %w", err)
			}
			security, err := sec.security()
			if err != nil {
				return fmt.Errorf("registry: %w", err)
			}
			clientOpts, err := security.Options()
			if err != nil {
				return fmt.Errorf("registry: %w", err)
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			startCtx, cancelStart := context.WithTimeout(ctx, startTimeout)
			defer cancelStart()
			stop, err := startRegistry(startCtx, cmd.OutOrStdout(), listen, schemaregistry.Options{
				Bootstrap: seeds, Topic: topic, Logger: logger, MaxRequestBytes: maxRequestBytes, ClientOpts: clientOpts,
			})
			if err != nil {
				return fmt.Errorf("registry: %w", err)
			}
			<-ctx.Done()
			logger.Info("shutting down the schema registry")
			return stop()
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8081", "HTTP listen address of the REST API (port 0 picks a free port)")
	f.StringVar(&bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT] holding the topic")
	f.StringVar(&topic, "topic", schemaregistry.DefaultTopic, "compacted topic storing the schemas (created with one partition if missing)")
	f.Int64Var(&maxRequestBytes, "max-request-bytes", 1<<20, "largest request body accepted")
	f.DurationVar(&startTimeout, "start-timeout", time.Minute, "give up if the brokers cannot be reached and the topic read within this time")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	sec = addSecurityFlags(f)
	return cmd
}

// startRegistry starts a schema registry serving on listen, prints its URL
// to out, and returns the function that stops it. `sluice registry` and
// `sluice broker --registry-listen` both use it.
func startRegistry(ctx context.Context, out io.Writer, listen string, opts schemaregistry.Options) (stop func() error, err error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", listen, err)
	}
	reg, err := schemaregistry.New(ctx, opts)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- reg.Serve(ln) }()
	fmt.Fprintf(out, "schema registry listening on http://%s\n", ln.Addr())
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := reg.Close(ctx)
		if serveErr := <-served; err == nil {
			err = serveErr
		}
		return err
	}, nil
}
