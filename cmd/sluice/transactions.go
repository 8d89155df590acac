package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newTransactionsCommand) }

func newTransactionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "transactions",
		Short: "List and describe the transactional ids of a Kafka-protocol broker's transaction coordinators",
	}
	withAdmin := newAdminRunner(cmd).run
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the transactions as JSON")

	var states []string
	list := &cobra.Command{
		Use:   "list",
		Short: "List transactional ids with their state and producer id (ListTransactions)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			filter, err := kafka.ParseTransactionStates(states)
			if err != nil {
				return err
			}
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				txns, err := a.ListTransactions(ctx, filter)
				if err != nil {
					return err
				}
				return kafka.WriteTransactions(c.OutOrStdout(), txns, asJSON, false)
			})
		},
	}
	list.Flags().StringSliceVar(&states, "state", nil, "only transactions in this state (repeatable or comma-separated): Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, ...")

	describe := &cobra.Command{
		Use:   "describe ID...",
		Short: "Show a transactional id's state, producer id and epoch, timeout, start and partitions (DescribeTransactions)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				txns, derr := a.DescribeTransactions(ctx, args)
				if err := kafka.WriteTransactions(c.OutOrStdout(), txns, asJSON, true); err != nil {
					return err
				}
				return derr
			})
		},
	}
	cmd.AddCommand(list, describe)
	return cmd
}
