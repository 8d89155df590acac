package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

func init() { extraCommands = append(extraCommands, newBenchCommand) }

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency against a Kafka-protocol broker",
	}
	var (
		p          kafka.ProducerBenchOptions
		aud        producerAudit
		psec, csec *securityFlags
	)
	produce := &cobra.Command{
		Use:   "produce",
		Short: "Send records as fast as allowed; print records/s, MB/s and latency percentiles (like ProducerPerformance)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("txn-records") && p.TransactionalID == "" {
				return fmt.Errorf("%w: --txn-records needs --transactional-id", kafka.ErrBadInput)
			}
			var err error
			if p.Security, err = psec.security(); err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			publish, err := aud.start(&p.ProducerConfig)
			if err != nil {
				return err
			}
			res, err := kafka.ProducerBench(ctx, p, c.ErrOrStderr())
			if err := errors.Join(err, publish()); err != nil {
				return err
			}
			if _, err = fmt.Fprintln(c.OutOrStdout(), res.String()); err != nil || p.TransactionalID == "" {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%d transactions of up to %d records committed.\n", res.Transactions, p.TxnRecords)
			return err
		},
	}
	pf := produce.Flags()
	pf.StringVar(&p.Bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT]")
	pf.StringVarP(&p.Topic, "topic", "t", "sluice-bench", "topic to write to")
	psec = addSecurityFlags(pf)
	pf.Int64Var(&p.Records, "records", 1_000_000, "records to send")
	pf.IntVar(&p.RecordSize, "record-size", 100, "value size in bytes")
	pf.Float64Var(&p.Throughput, "throughput", -1, "cap in records/s (-1: unlimited)")
	pf.StringVar(&p.Acks, "acks", "all", "acknowledgements: all (-1, idempotent; the Kafka producer default), 1 or 0")
	pf.Int32Var(&p.Partitions, "partitions", 0, "create the topic with this many partitions if missing (0: auto-create)")
	pf.StringVar(&p.Compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	pf.IntVar(&p.LingerMs, "linger-ms", 5, "batch linger, Kafka 4's default is 5")
	pf.Int32Var(&p.BatchMaxBytes, "batch-size", 0, "max bytes per record batch (0: client default, 1 MB)")
	pf.DurationVar(&p.ReportInterval, "report-interval", 5*time.Second, "time between progress lines")
	pf.StringVar(&p.TransactionalID, "transactional-id", "", "produce in transactions with this transactional.id (like ProducerPerformance --transactional-id)")
	pf.Int64Var(&p.TxnRecords, "txn-records", 1000, "records per transaction with --transactional-id")
	aud.register(pf)

	var cns kafka.ConsumerBenchOptions
	consume := &cobra.Command{
		Use:   "consume",
		Short: "Read records from the start of a topic; print records/s and MB/s (like ConsumerPerformance)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if cns.Security, err = csec.security(); err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			res, err := kafka.ConsumerBench(ctx, cns, c.ErrOrStderr())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(c.OutOrStdout(), res.String())
			return err
		},
	}
	cf := consume.Flags()
	cf.StringVar(&cns.Bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT]")
	cf.StringVarP(&cns.Topic, "topic", "t", "sluice-bench", "topic to read")
	csec = addSecurityFlags(cf)
	cf.Int64Var(&cns.Records, "records", 1_000_000, "records to read")
	cf.DurationVar(&cns.Timeout, "timeout", 10*time.Second, "fail when no record arrived for this long")
	cf.DurationVar(&cns.ReportInterval, "report-interval", 5*time.Second, "time between progress lines")
	cmd.AddCommand(produce, consume)
	return cmd
}
