package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/scheduler"
)

// SchedulerOptions configure RunScheduler.
type SchedulerOptions struct {
	// Connect is host:port[,host:port]/chroot.
	Connect        string
	SessionTimeout time.Duration // default 10s
	// Name identifies this scheduler (default host/pid).
	Name string
	// Scheduler configures the scheduler run while leading; its
	// Dispatcher and Tracker are set here.
	Scheduler scheduler.Options
	Logger    *slog.Logger
	// OnLeader, when set, is called each time this scheduler becomes the
	// leader (tests and logs).
	OnLeader func()
}

// RunScheduler takes part in the leader election until ctx ends and runs
// the scheduler whenever it leads. A session that expires ends the
// leadership; the scheduler then reconnects and rejoins the election.
func RunScheduler(ctx context.Context, opts SchedulerOptions) error {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Name == "" {
		opts.Name = opts.Scheduler.Name
	}
	log := opts.Logger.With("scheduler", opts.Name)
	first := true
	for ctx.Err() == nil {
		c, err := Dial(opts.Connect, opts.SessionTimeout, log)
		if err != nil {
			if first || errors.Is(err, ErrConfig) {
				return err
			}
			log.Warn("cannot reach ZooKeeper; retrying", "err", err)
			pause(ctx, nil, time.Second)
			continue
		}
		first = false
		err = lead(ctx, c, opts, log)
		c.Close()
		if errors.Is(err, scheduler.ErrJob) {
			return err // a configuration error: retrying does not help
		}
		if ctx.Err() == nil {
			log.Warn("rejoining the election", "err", err)
			pause(ctx, nil, 500*time.Millisecond)
		}
	}
	return nil
}

// lead waits for the leadership on c, then schedules until c's session
// ends or ctx ends.
func lead(ctx context.Context, c *Conn, opts SchedulerOptions, log *slog.Logger) error {
	for {
		_, err := c.zk.Create(c.p("/leader"), []byte(opts.Name), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("cluster: election: %w", err)
		}
		ok, _, ch, err := c.zk.ExistsW(c.p("/leader"))
		if err != nil {
			return fmt.Errorf("cluster: election: %w", err)
		}
		if !ok {
			continue
		}
		if b, _, err := c.zk.Get(c.p("/leader")); err == nil {
			log.Info("standing by", "leader", string(b))
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		case <-c.Expired():
			return nil
		}
	}
	log.Info("elected leader")
	if opts.OnLeader != nil {
		opts.OnLeader()
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.Expired():
			log.Warn("leadership lost with the ZooKeeper session; stopping the scheduler")
			cancel()
		case <-lctx.Done():
		}
	}()
	so := opts.Scheduler
	coord := NewCoordinator(c)
	so.Dispatcher, so.Tracker = coord, coord
	if so.Name == "" {
		so.Name = opts.Name
	}
	s, err := scheduler.New(so)
	if err != nil {
		return err
	}
	err = s.Run(lctx)
	c.deleteOwned("/leader")
	return err
}
