package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newClusterCommand) }

func newClusterCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show the state of a Kafka-protocol cluster (sluice or Apache Kafka)",
	}
	withAdmin := newAdminRunner(cmd).run
	status := &cobra.Command{
		Use:   "status",
		Short: "Brokers, controller, under-replicated and offline partitions",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				return a.ClusterStatus(ctx, c.OutOrStdout())
			})
		},
	}
	cmd.AddCommand(status)
	return cmd
}
