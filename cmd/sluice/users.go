package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/security"
	"github.com/sluicehq/sluice/broker/server"
	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/internal/vfs"
)

func init() { extraCommands = append(extraCommands, newUsersCommand) }

// usersTarget is where `sluice users` changes credentials: a running
// broker (--bootstrap, AlterUserScramCredentials) or a stopped broker's
// data directory (--data-dir).
type usersTarget struct {
	bootstrap, dataDir string
	timeout            time.Duration
	security           *securityFlags
}

func newUsersCommand() *cobra.Command {
	tg := &usersTarget{}
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage the broker's SCRAM users (online with --bootstrap, or offline with --data-dir)",
		Long: `Manage the SCRAM credentials SASL PLAIN and SCRAM-SHA-256/512 authenticate against.
Online, through a running broker's AlterUserScramCredentials API (as kafka-configs.sh --entity-type users);
offline with --data-dir DIR against a stopped broker's data directory, to create the first admin.
Passwords are read from stdin (--password-stdin), never from the command line, and never printed.`,
	}
	cmd.PersistentFlags().StringVar(&tg.bootstrap, "bootstrap", kafka.DefaultBootstrap, "broker addresses HOST:PORT[,HOST:PORT]")
	cmd.PersistentFlags().StringVar(&tg.dataDir, "data-dir", "", "a stopped broker's data directory (offline; instead of --bootstrap)")
	cmd.PersistentFlags().DurationVar(&tg.timeout, "timeout", 30*time.Second, "give up after this long")
	tg.security = addSecurityFlags(cmd.PersistentFlags())

	var mechanism string
	var iterations int
	var fromStdin bool
	set := &cobra.Command{
		Use: "set NAME", Short: "Create a user or change its password for one mechanism", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !fromStdin {
				return errors.New("users set: give the password on stdin with --password-stdin")
			}
			password, err := readPassword(c.InOrStdin())
			if err != nil {
				return err
			}
			cred, err := security.NewCredential(mechanism, password, iterations)
			if err != nil {
				return fmt.Errorf("users set: %w", err)
			}
			if err := tg.apply(c.Context(), args[0], mechanism, &cred, password); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "user %s: %s credential set (%d iterations)\n", args[0], mechanism, cred.Iterations)
			return nil
		},
	}
	set.Flags().StringVar(&mechanism, "mechanism", security.ScramSHA512, "SCRAM-SHA-256 or SCRAM-SHA-512")
	set.Flags().IntVar(&iterations, "iterations", security.DefaultIterations, "SCRAM iterations (4096..16384)")
	set.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of stdin")

	var delMechanism string
	del := &cobra.Command{
		Use: "delete NAME", Short: "Remove a user's credential for one mechanism", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !security.IsScram(delMechanism) {
				return fmt.Errorf("users delete: --mechanism %q: use SCRAM-SHA-256 or SCRAM-SHA-512", delMechanism)
			}
			if err := tg.apply(c.Context(), args[0], delMechanism, nil, ""); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "user %s: %s credential deleted\n", args[0], delMechanism)
			return nil
		},
	}
	del.Flags().StringVar(&delMechanism, "mechanism", security.ScramSHA512, "SCRAM-SHA-256 or SCRAM-SHA-512")

	list := &cobra.Command{
		Use: "list", Short: "List the users and their mechanisms (never a secret)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return tg.list(c.Context(), c.OutOrStdout()) },
	}
	cmd.AddCommand(set, del, list)
	return cmd
}

func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("users set: read the password from stdin: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return "", errors.New("users set: empty password on stdin")
	}
	return password, nil
}

// offline opens the data directory's store, refusing a running broker's.
func (tg *usersTarget) offline() (*metadata.FileStore, func(), error) {
	unlock, err := server.LockDataDir(tg.dataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("users: --data-dir %s: %w (stop the broker, or use --bootstrap)", tg.dataDir, err)
	}
	st, err := metadata.OpenFileStore(vfs.OS{}, tg.dataDir)
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("users: --data-dir %s: %w", tg.dataDir, err)
	}
	return st, unlock, nil
}

func (tg *usersTarget) admin(ctx context.Context) (*kadm.Client, func(), context.Context, error) {
	sec, err := tg.security.security()
	if err != nil {
		return nil, nil, nil, err
	}
	opts, err := kafka.ClientOptions(tg.bootstrap, sec)
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, tg.timeout)
	return kadm.NewClient(cl), func() { cancel(); cl.Close() }, ctx, nil
}

var kadmMechanisms = map[string]kadm.ScramMechanism{security.ScramSHA256: kadm.ScramSha256, security.ScramSHA512: kadm.ScramSha512}

// apply sets (cred != nil) or deletes a user's credential for mechanism.
func (tg *usersTarget) apply(ctx context.Context, user, mechanism string, cred *security.Credential, password string) error {
	if tg.dataDir != "" {
		st, unlock, err := tg.offline()
		if err != nil {
			return err
		}
		defer unlock()
		creds, err := st.User(user)
		if err != nil {
			return err
		}
		if creds == nil {
			creds = map[string]string{}
		}
		if cred != nil {
			creds[mechanism] = cred.String()
		} else if _, ok := creds[mechanism]; !ok {
			return fmt.Errorf("users delete: user %s has no %s credential", user, mechanism)
		} else {
			delete(creds, mechanism)
		}
		return st.SetUser(user, creds)
	}
	adm, done, ctx, err := tg.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var res kadm.AlteredUserSCRAMs
	if cred != nil {
		res, err = adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadmMechanisms[mechanism], Iterations: int32(cred.Iterations), Password: password}})
	} else {
		res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadmMechanisms[mechanism]}}, nil)
	}
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("users: %s at %s: %w", user, tg.bootstrap, err)
	}
	return nil
}

func (tg *usersTarget) list(ctx context.Context, w io.Writer) error {
	if tg.dataDir != "" {
		st, unlock, err := tg.offline()
		if err != nil {
			return err
		}
		defer unlock()
		all, err := st.Users()
		if err != nil {
			return err
		}
		for _, u := range metadata.SortedUsers(all) {
			var mechs []string
			for _, m := range []string{security.ScramSHA256, security.ScramSHA512} {
				if s, ok := all[u][m]; ok {
					if c, err := security.ParseCredential(m, s); err == nil {
						mechs = append(mechs, fmt.Sprintf("%s(iterations=%d)", m, c.Iterations))
					}
				}
			}
			fmt.Fprintf(w, "%s\t%s\n", u, strings.Join(mechs, ","))
		}
		return nil
	}
	adm, done, ctx, err := tg.admin(ctx)
	if err != nil {
		return err
	}
	defer done()
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		return fmt.Errorf("users list: %w", err)
	}
	for _, d := range described.Sorted() {
		var mechs []string
		for _, ci := range d.CredInfos {
			mechs = append(mechs, fmt.Sprintf("%s(iterations=%d)", ci.Mechanism, ci.Iterations))
		}
		fmt.Fprintf(w, "%s\t%s\n", d.User, strings.Join(mechs, ","))
	}
	return nil
}
