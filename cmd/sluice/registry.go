package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"

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
		tlsCert, tlsKey, passwords, roles  string
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
			opts := schemaregistry.Options{
				Bootstrap: seeds, Topic: topic, MaxRequestBytes: maxRequestBytes, ClientOpts: clientOpts,
			}
			if opts.TLS, opts.Auth, err = registryServerSecurity(tlsCert, tlsKey, passwords, roles); err != nil {
				return fmt.Errorf("registry: %w", err)
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			startCtx, cancelStart := context.WithTimeout(ctx, startTimeout)
			defer cancelStart()
			opts.Logger = logger
			stop, err := startRegistry(startCtx, cmd.OutOrStdout(), listen, opts)
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
	f.StringVar(&tlsCert, "registry-tls-cert", "", "PEM certificate (chain) the registry serves HTTPS with")
	f.StringVar(&tlsKey, "registry-tls-key", "", "PEM private key of --registry-tls-cert")
	f.StringVar(&passwords, "registry-password-file", "", "require HTTP basic auth against this file of USER:SECRET lines (bcrypt $2..., sha256:SALT:HASH or plain:TEXT)")
	f.StringVar(&roles, "registry-roles-file", "", "per-subject grants, lines of USER SUBJECT-PREFIX|* read|write (needs --registry-password-file)")
	cmd.AddCommand(newHashPasswordCommand())
	return cmd
}

// registryServerSecurity builds the registry's TLS configuration and
// users from its flags; errors name the flag.
func registryServerSecurity(cert, key, passwords, roles string) (*tls.Config, *schemaregistry.Auth, error) {
	var cfg *tls.Config
	switch {
	case cert == "" && key == "":
	case cert == "" || key == "":
		return nil, nil, fmt.Errorf("%w: --registry-tls-cert and --registry-tls-key go together", kafka.ErrBadInput)
	default:
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --registry-tls-cert %s with --registry-tls-key %s: %v", kafka.ErrBadInput, cert, key, err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	if passwords == "" {
		if roles != "" {
			return nil, nil, fmt.Errorf("%w: --registry-roles-file needs --registry-password-file", kafka.ErrBadInput)
		}
		return cfg, nil, nil
	}
	auth, err := schemaregistry.LoadAuth(passwords, roles)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: --registry-password-file / --registry-roles-file: %v", kafka.ErrBadInput, err)
	}
	return cfg, auth, nil
}

// newHashPasswordCommand is `sluice registry hash-password`: a bcrypt line
// for the registry's password file, from the password on stdin.
func newHashPasswordCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "hash-password USER",
		Short: "Print a password file line USER:<bcrypt hash> for the password read from stdin",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			line, err := bufio.NewReader(io.LimitReader(c.InOrStdin(), 1025)).ReadString('\n')
			if err != nil && err != io.EOF {
				return err
			}
			pw := strings.TrimRight(line, "\r\n")
			if pw == "" || len(pw) > 72 {
				return fmt.Errorf("%w: give the password (1 to 72 bytes) on stdin", kafka.ErrBadInput)
			}
			hash, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%s:%s\n", args[0], hash)
			return err
		},
	}
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
