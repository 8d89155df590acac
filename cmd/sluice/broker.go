package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/broker"
	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/schemaregistry"
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
		Short: "Run a Kafka-protocol broker (single node, or a cluster member with --zookeeper)",
		Long: `Run a sluice broker: a Kafka-protocol server over the partition logs in --data-dir.
--config takes a Kafka server.properties-style file (num.partitions, log.retention.hours,
log.segment.bytes, message.max.bytes, auto.create.topics.enable, ...).
With --zookeeper HOSTS/chroot (or zookeeper.connect) the broker joins a cluster as
--node-id (or broker.id / node.id): topics live in ZooKeeper, partitions have leaders,
replicas and an ISR (default.replication.factor, min.insync.replicas, broker.rack,
unclean.leader.election.enable, auto.leader.rebalance.enable, replica.lag.time.max.ms).
SIGTERM or SIGINT shuts down cleanly; in a cluster it first moves this broker's
leaderships to other in-sync replicas (controlled shutdown).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return errors.New("broker: --data-dir is required")
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
			if zookeeper != "" {
				cfg.ZookeeperConnect = zookeeper
			}
			b, err := broker.Start(broker.Options{DataDir: dataDir, Listen: listen, MetricsListen: metricsListen, Config: cfg, Logger: logger})
			if err != nil {
				return err
			}
			ctx, stop := stopSignals(syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "sluice broker listening on %s\n", b.Addr())
			for _, l := range cfg.Security.Listeners {
				fmt.Fprintf(cmd.OutOrStdout(), "listener %s (%s) on %s\n", l.Name, l.Protocol, b.ListenerAddr(l.Name))
			}
			ran := make(chan error, 1)
			go func() { ran <- b.Run(ctx) }()
			if registryListen != "" { // the schema registry, stored in this broker's _schemas topic
				stopRegistry, err := startRegistry(cmd.Context(), cmd.OutOrStdout(), registryListen,
					schemaregistry.Options{Bootstrap: []string{b.Addr().String()}, Logger: logger})
				if err != nil {
					stop()
					<-ran
					return fmt.Errorf("broker: --registry-listen %s: %w", registryListen, err)
				}
				defer func() { _ = stopRegistry() }()
			}
			return <-ran
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "directory of the partition logs and broker metadata (required)")
	f.StringVar(&listen, "listen", "127.0.0.1:9092", "Kafka-protocol listen address (port 0 picks a free port; default: listeners of --config, else 127.0.0.1:9092)")
	f.Int32Var(&nodeID, "node-id", 0, "this broker's node id (overrides node.id / broker.id of --config)")
	f.StringVar(&configFile, "config", "", "Kafka-style .properties file")
	f.StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:9404)")
	f.StringVar(&zookeeper, "zookeeper", "", "ZooKeeper HOSTS/chroot: run as a member of that cluster (e.g. 127.0.0.1:2181/sluice)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&registryListen, "registry-listen", "", "also serve the schema registry REST API on this address (e.g. 127.0.0.1:8081), stored in this broker's _schemas topic")
	return cmd
}

// stopSignals returns a context cancelled, with the signal as its cause (which
// the broker logs), at the first of sigs.
func stopSignals(sigs ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case sig := <-ch:
			cancel(fmt.Errorf("signal %s", sig))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(context.Canceled) }
}
