package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newTopicsCommand) }

// signalContext is cancelled on SIGINT / SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, sigterm)
}

func newTopicsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topics",
		Short: "Create, list, describe and delete topics on a Kafka-protocol broker",
	}
	withAdmin := newAdminRunner(cmd).run

	var (
		partitions  int32
		replication int16
		configs     []string
	)
	create := &cobra.Command{
		Use:   "create TOPIC",
		Short: "Create a topic",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := kafka.ParseConfigs(configs)
			if err != nil {
				return err
			}
			spec := kafka.TopicSpec{Name: args[0], Partitions: partitions, ReplicationFactor: replication, Configs: cfg}
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				return a.CreateTopic(ctx, spec, c.OutOrStdout())
			})
		},
	}
	create.Flags().Int32VarP(&partitions, "partitions", "p", 1, "number of partitions (-1: the broker's default)")
	create.Flags().Int16VarP(&replication, "replication-factor", "r", 1, "replicas per partition (-1: the broker's default)")
	create.Flags().StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable), e.g. retention.ms=3600000")

	var internal bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List topic names",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				return a.ListTopics(ctx, internal, c.OutOrStdout())
			})
		},
	}
	list.Flags().BoolVar(&internal, "internal", false, "include internal topics")

	describe := &cobra.Command{
		Use:   "describe [TOPIC...]",
		Short: "Show partitions, leaders, offsets and configs of topics (all when none named)",
		RunE: func(c *cobra.Command, args []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				return a.DescribeTopics(ctx, args, c.OutOrStdout())
			})
		},
	}

	del := &cobra.Command{
		Use:   "delete TOPIC...",
		Short: "Delete topics",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				return a.DeleteTopics(ctx, args, c.OutOrStdout())
			})
		},
	}
	cmd.AddCommand(create, list, describe, del, newReassignCommand(withAdmin), newDeleteRecordsCommand(withAdmin))
	return cmd
}

// newReassignCommand is `sluice topics reassign`: move one partition's
// replicas (--topic --partition --replicas) or those of a reassignment
// file in Kafka's format, check the moves (--verify) or cancel them.
func newReassignCommand(withAdmin func(*cobra.Command, func(context.Context, *kafka.Admin) error) error) *cobra.Command {
	var (
		topic     string
		partition int32
		replicas  []int32
		file      string
		verify    bool
		cancel    bool
		throttle  int64
		preserve  bool
	)
	cmd := &cobra.Command{
		Use:   "reassign",
		Short: "Move partition replicas to other brokers (--verify shows progress, --cancel undoes)",
		Long: `Move partition replicas to other brokers, as kafka-reassign-partitions does:
either one partition (--topic T --partition P --replicas 1,2,3, preferred leader
first) or every partition of --reassignment-json-file in Kafka's format
({"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}).
The command returns once the brokers accepted the moves; --verify tells, per
partition, whether its move is in progress or completed (exit status 1 until
all are); --cancel puts each partition back on the replicas it had.
--throttle BYTES/S limits the moves' replication as Kafka's tool does
(leader.replication.throttled.rate and follower.replication.throttled.rate on
the brokers involved, the moving replicas in the topics'
leader/follower.replication.throttled.replicas; clients are never throttled);
--verify removes the throttle once every move completed (--preserve-throttles
keeps it).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var moves []kafka.Move
			switch {
			case file != "" && topic != "":
				return fmt.Errorf("give --reassignment-json-file or --topic, not both")
			case file != "":
				var err error
				if moves, err = kafka.ReadMoves(file); err != nil {
					return err
				}
			case topic == "" || partition < 0:
				return fmt.Errorf("give --topic and --partition (and --replicas), or --reassignment-json-file")
			case len(replicas) == 0 && !cancel:
				return fmt.Errorf("give --replicas, the broker ids the partition should end on (preferred leader first)")
			default:
				moves = []kafka.Move{{Topic: topic, Partition: partition, Replicas: replicas}}
			}
			if verify && cancel {
				return fmt.Errorf("give --verify or --cancel, not both")
			}
			if throttle < -1 || (throttle >= 0 && (verify || cancel)) {
				return fmt.Errorf("--throttle: a rate in bytes/s (at least 0) for starting moves, not with --verify or --cancel")
			}
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				switch {
				case verify:
					if err := a.VerifyReassign(ctx, moves, c.OutOrStdout()); err != nil || preserve {
						return err
					}
					return a.ClearReassignThrottle(ctx, moves, c.OutOrStdout())
				case cancel:
					return a.CancelReassign(ctx, moves, c.OutOrStdout())
				}
				if throttle >= 0 {
					if err := a.ThrottleReassign(ctx, moves, throttle, c.OutOrStdout()); err != nil {
						return err
					}
				}
				return a.Reassign(ctx, moves, c.OutOrStdout())
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic of the partition to move")
	cmd.Flags().Int32Var(&partition, "partition", -1, "the partition to move")
	cmd.Flags().Int32SliceVar(&replicas, "replicas", nil, "the broker ids the partition should end on, preferred leader first (e.g. 1,2,3)")
	cmd.Flags().StringVar(&file, "reassignment-json-file", "", "a reassignment plan in Kafka's JSON format")
	cmd.Flags().BoolVar(&verify, "verify", false, "show whether each move is in progress or completed (exit 1 until all are)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the moves: each partition goes back to its replicas before the move")
	cmd.Flags().Int64Var(&throttle, "throttle", -1, "limit the moves' replication to this many bytes/s (removed by --verify once they completed)")
	cmd.Flags().BoolVar(&preserve, "preserve-throttles", false, "with --verify: keep the replication throttle after the moves completed")
	return cmd
}

// newDeleteRecordsCommand is `topics delete-records T --partition P --before OFFSET`.
func newDeleteRecordsCommand(withAdmin func(*cobra.Command, func(context.Context, *kafka.Admin) error) error) *cobra.Command {
	var (
		partition int32
		before    int64
	)
	c := &cobra.Command{
		Use:   "delete-records TOPIC --partition P --before OFFSET",
		Short: "Delete a partition's records below an offset (DeleteRecords: moves its log start offset)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("before") {
				return fmt.Errorf("%w: --before OFFSET is required (-1: the high watermark)", kafka.ErrBadInput)
			}
			return withAdmin(c, func(ctx context.Context, a *kafka.Admin) error {
				return a.DeleteRecords(ctx, args[0], partition, before, c.OutOrStdout())
			})
		},
	}
	c.Flags().Int32VarP(&partition, "partition", "p", 0, "partition whose records to delete")
	c.Flags().Int64Var(&before, "before", 0, "delete the records with offsets below this one (-1: all up to the high watermark)")
	return c
}
