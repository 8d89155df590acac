package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/schemaregistry"
	"github.com/sluicehq/sluice/broker/server"
)

func init() { extraCommands = append(extraCommands, newBrokerCommand) }

func newBrokerCommand() *cobra.Command {
	var (
		dataDir, listen, configFile, metricsListen, zookeeper, logLevel string
		registryListen                                                  string
		nodeID                                                          int32
	)
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a single-node Kafka-protocol broker",
		Long: `Run a sluice broker: a Kafka-protocol server over the partition logs in --data-dir.
--config takes a Kafka server.properties-style file (num.partitions, log.retention.hours,
log.segment.bytes, message.max.bytes, auto.create.topics.enable, ...). SIGTERM or SIGINT
shuts down cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return errors.New("broker: --data-dir is required")
			}
			if zookeeper != "" {
				return errors.New("broker: --zookeeper (cluster mode) is not available yet; run without it for a single node")
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("broker: --log-level %q: use debug, info, warn or error", logLevel)
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			cfg := config.Default()
			if configFile != "" {
				data, err := os.ReadFile(configFile)
				if err != nil {
					return fmt.Errorf("broker: --config: %w", err)
				}
				if cfg, err = config.Parse(data); err != nil {
					return fmt.Errorf("broker: --config %s: %w", configFile, err)
				}
				if u := cfg.Unknown(); len(u) > 0 {
					logger.Warn("ignoring unsupported properties", "file", configFile, "keys", strings.Join(u, ","))
				}
			}
			if !cmd.Flags().Changed("listen") && cfg.Listener != "" {
				listen = cfg.Listener
			}
			if cmd.Flags().Changed("node-id") {
				cfg.NodeID = nodeID
			}
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return fmt.Errorf("broker: --data-dir: %w", err)
			}
			srv, err := server.New(server.Options{DataDir: dataDir, Config: cfg, Logger: logger})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				_ = srv.Shutdown(context.Background())
				return fmt.Errorf("broker: --listen %s: %w", listen, err)
			}
			var metricsSrv *http.Server
			if metricsListen != "" {
				mln, err := net.Listen("tcp", metricsListen)
				if err != nil {
					_ = ln.Close()
					_ = srv.Shutdown(context.Background())
					return fmt.Errorf("broker: --metrics-listen %s: %w", metricsListen, err)
				}
				mux := http.NewServeMux()
				mux.Handle("/metrics", srv.MetricsHandler())
				metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				logger.Info("metrics endpoint", "metrics_addr", mln.Addr().String(), "path", "/metrics")
				go func() { _ = metricsSrv.Serve(mln) }()
			}
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(sigs)
			fmt.Fprintf(cmd.OutOrStdout(), "sluice broker listening on %s\n", ln.Addr())
			serveErr := make(chan error, 1)
			go func() { serveErr <- srv.Serve(ln) }()
			if registryListen != "" { // the schema registry, stored in this broker's _schemas topic
				stopRegistry, err := startRegistry(cmd.Context(), cmd.OutOrStdout(), registryListen,
					schemaregistry.Options{Bootstrap: []string{ln.Addr().String()}, Logger: logger})
				if err != nil {
					_ = srv.Shutdown(context.Background())
					return fmt.Errorf("broker: --registry-listen %s: %w", registryListen, err)
				}
				defer func() { _ = stopRegistry() }()
			}
			var runErr error
			select {
			case sig := <-sigs:
				logger.Info("shutting down", "signal", sig.String())
			case err := <-serveErr:
				runErr = fmt.Errorf("broker: serve: %w", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if metricsSrv != nil {
				_ = metricsSrv.Shutdown(ctx)
			}
			if err := srv.Shutdown(ctx); err != nil && runErr == nil {
				runErr = err
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "directory of the partition logs and broker metadata (required)")
	f.StringVar(&listen, "listen", "127.0.0.1:9092", "Kafka-protocol listen address (port 0 picks a free port; default: listeners of --config, else 127.0.0.1:9092)")
	f.Int32Var(&nodeID, "node-id", 0, "this broker's node id (overrides node.id / broker.id of --config)")
	f.StringVar(&configFile, "config", "", "Kafka-style .properties file")
	f.StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:9404)")
	f.StringVar(&zookeeper, "zookeeper", "", "ZooKeeper HOSTS/chroot for cluster mode (not available yet)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&registryListen, "registry-listen", "", "also serve the schema registry REST API on this address (e.g. 127.0.0.1:8081), stored in this broker's _schemas topic")
	return cmd
}
