package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newGroupsCommand) }

func newGroupsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List, describe, reset and delete consumer groups on a Kafka-protocol broker",
	}
	withAdmin := newAdminRunner(cmd).run

	list := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups and their states",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error { return a.ListGroups(ctx, c.OutOrStdout()) })
		},
	}
	describe := &cobra.Command{
		Use:   "describe GROUP...",
		Short: "Show members, assignments, committed offsets and lag per partition",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error { return a.DescribeGroups(ctx, args, c.OutOrStdout()) })
		},
	}
	del := &cobra.Command{
		Use:   "delete GROUP...",
		Short: "Delete stopped groups and their committed offsets",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error { return a.DeleteGroups(ctx, args, c.OutOrStdout()) })
		},
	}

	spec := kafka.ResetSpec{ToOffset: -1}
	var datetime string
	reset := &cobra.Command{
		Use:   "reset-offsets GROUP",
		Short: "Move a stopped group's committed offsets (--to-earliest, --to-latest, --to-offset N, --to-datetime T)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			spec.Group = args[0]
			if datetime != "" {
				t, err := time.Parse(time.RFC3339, datetime)
				if err != nil {
					return fmt.Errorf("%w: --to-datetime %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", kafka.ErrBadInput, datetime)
				}
				spec.ToDatetime = t
			}
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error { return a.ResetOffsets(ctx, spec, c.OutOrStdout()) })
		},
	}
	f := reset.Flags()
	f.StringArrayVar(&spec.Topics, "topic", nil, "topic to reset (repeatable; default: every topic the group committed)")
	f.BoolVar(&spec.ToEarliest, "to-earliest", false, "the log start of each partition")
	f.BoolVar(&spec.ToLatest, "to-latest", false, "the log end of each partition")
	f.Int64Var(&spec.ToOffset, "to-offset", -1, "this offset (clamped to each partition's log start and end)")
	f.StringVar(&datetime, "to-datetime", "", "the first offset at or after this time (RFC 3339)")
	f.BoolVar(&spec.DryRun, "dry-run", false, "print the new offsets, commit nothing")
	cmd.AddCommand(list, describe, reset, del)
	return cmd
}
