package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/quickstart"
)

func init() { extraCommands = append(extraCommands, newQuickstartCommand) }

func newQuickstartCommand() *cobra.Command {
	var (
		dir        string
		events     int
		hours      int
		brokerOnly bool
	)
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Run the whole pipeline on this machine: broker, schema registry, page views, hourly loads, SQL",
		Long: `Start a broker and the schema registry in this process over --dir (a new temporary directory by
default), create the pageviews topic, register an Avro schema, produce a few hours of page views,
load them into hourly Parquet directories through the scheduler (complete hours get _SUCCESS), and
print page views per hour and the top pages with sluice query. Everything stops at the end; the
files stay. --broker-only runs just the broker part: produce and read back records.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				d, err := os.MkdirTemp("", "sluice-quickstart-")
				if err != nil {
					return err
				}
				dir = d
			}
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			opts := quickstart.Options{Dir: dir, Out: c.OutOrStdout(), Events: events, Hours: hours}
			if brokerOnly {
				return quickstart.BrokerOnly(ctx, opts)
			}
			if err := quickstart.Run(ctx, opts); err != nil {
				return fmt.Errorf("%w (files and quickstart.log in %s)", err, dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "working directory (default: a new temporary directory)")
	f.IntVar(&events, "events", 30000, "page views to produce")
	f.IntVar(&hours, "hours", 3, "hours of page views, ending now")
	f.BoolVar(&brokerOnly, "broker-only", false, "only the broker: create a topic, produce records and read them back")
	return cmd
}
