package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/kafka"
)

// adminRunner holds the --bootstrap, --timeout and security flags of an admin command
// group (topics, groups) and runs a subcommand with a connected admin client.
type adminRunner struct {
	bootstrap string
	timeout   time.Duration
	security  *securityFlags
}

// newAdminRunner registers the persistent flags on cmd.
func newAdminRunner(cmd *cobra.Command) *adminRunner {
	r := &adminRunner{}
	cmd.PersistentFlags().StringVar(&r.bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT]")
	cmd.PersistentFlags().DurationVar(&r.timeout, "timeout", 30*time.Second, "give up after this long")
	r.security = addSecurityFlags(cmd.PersistentFlags())
	return r
}

// run calls fn with an admin client, a context ended by SIGINT / SIGTERM or
// --timeout, and closes the client.
func (r *adminRunner) run(c *cobra.Command, fn func(ctx context.Context, a *kafka.Admin) error) error {
	ctx, cancel := signalContext(c.Context())
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, r.timeout)
	defer cancelT()
	sec, err := r.security.security()
	if err != nil {
		return err
	}
	a, err := kafka.NewAdmin(r.bootstrap, sec)
	if err != nil {
		return err
	}
	defer a.Close()
	return fn(ctx, a)
}
