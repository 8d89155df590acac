package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/scheduler/cluster"
)

func init() { extraCommands = append(extraCommands, newSchedulerCommand, newWorkerCommand) }

// serviceFlags are the flags the scheduler and the worker share.
type serviceFlags struct {
	zookeeper, metricsListen, logLevel, name string
	sessionTimeout                           time.Duration
}

func (f *serviceFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:9405)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.StringVar(&f.name, "name", "", "name of this process in ZooKeeper and run records (default host-pid)")
	fl.DurationVar(&f.sessionTimeout, "session-timeout", 10*time.Second, "ZooKeeper session timeout: how soon a dead process's claims and leadership vanish")
}

func (f *serviceFlags) logger(what string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("%s: --log-level %q: use debug, info, warn or error", what, f.logLevel)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

// serveMetrics starts /metrics when asked and returns the registry and a stop function.
func (f *serviceFlags) serveMetrics(what string, log *slog.Logger) (*prometheus.Registry, func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if f.metricsListen == "" {
		return reg, func() {}, nil
	}
	ln, err := net.Listen("tcp", f.metricsListen)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: --metrics-listen %s: %w", what, f.metricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("metrics endpoint", "metrics_addr", ln.Addr().String(), "path", "/metrics")
	go srv.Serve(ln)
	return reg, func() { srv.Close() }, nil
}

func newSchedulerCommand() *cobra.Command {
	var (
		sf      serviceFlags
		jobsDir string
		workers int
		scan    time.Duration
		minIv   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "scheduler --jobs DIR",
		Short: "Run the job specs in a directory on their schedules (embedded workers, or a cluster through ZooKeeper)",
		Long: `Run every job spec (*.yaml) in --jobs on its schedule: cron fields (optionally with seconds),
@hourly, @every 10m, CRON_TZ=Zone. Specs added, changed or removed are picked up without a restart.
A schedule that never fires, or fires sooner than --min-interval (1m) after its previous firing, is refused.
One run of a job at a time; failed tasks are retried (retry: in the spec); complete hours get _SUCCESS.
Without --zookeeper, tasks run in this process on --workers goroutines. With --zookeeper HOSTS/chroot,
schedulers elect a leader (the others stand by) and tasks run on 'sluice worker' processes.
SIGTERM or SIGINT stops; runs in flight resume (or are marked abandoned) at the next start.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if jobsDir == "" {
				return errors.New("scheduler: --jobs DIR is required (a directory of job specs)")
			}
			log, err := sf.logger("scheduler")
			if err != nil {
				return err
			}
			reg, stop, err := sf.serveMetrics("scheduler", log)
			if err != nil {
				return err
			}
			defer stop()
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			opts := scheduler.Options{Engine: &scheduler.LoaderEngine{}, JobsDir: jobsDir, Workers: workers,
				ScanInterval: scan, MinInterval: minIv, Logger: log, Metrics: scheduler.NewMetrics(reg, nil), Name: sf.name}
			if sf.zookeeper == "" {
				s, err := scheduler.New(opts)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "sluice scheduler running the jobs in %s with %d workers\n", jobsDir, workers)
				return s.Run(ctx)
			}
			if _, err := scheduler.New(opts); err != nil { // check the flags before joining the election
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "sluice scheduler running the jobs in %s, tasks through ZooKeeper %s\n", jobsDir, sf.zookeeper)
			return cluster.RunScheduler(ctx, cluster.SchedulerOptions{Connect: sf.zookeeper, SessionTimeout: sf.sessionTimeout,
				Name: sf.name, Scheduler: opts, Logger: log})
		},
	}
	sf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&jobsDir, "jobs", "", "directory of job specs (*.yaml, *.yml)")
	f.IntVar(&workers, "workers", 2, "tasks run at once in this process (without --zookeeper)")
	f.DurationVar(&scan, "scan-interval", 5*time.Second, "how often the jobs directory is read again")
	f.DurationVar(&minIv, "min-interval", jobs.DefaultMinScheduleInterval, "the floor under the time between two runs of a job: schedules that fire sooner are refused (at least 1s)")
	f.StringVar(&sf.zookeeper, "zookeeper", "", "HOSTS/chroot (e.g. 127.0.0.1:2181/sluice): run as one of several schedulers, tasks on 'sluice worker' processes")
	return cmd
}

func newWorkerCommand() *cobra.Command {
	var (
		sf    serviceFlags
		tasks int
	)
	cmd := &cobra.Command{
		Use:   "worker --zookeeper HOSTS/chroot",
		Short: "Run the tasks the scheduler leader publishes in ZooKeeper",
		Long: `Register in ZooKeeper and run load tasks: each task is claimed with an ephemeral node, so when
a worker dies its claims vanish with its session and another worker runs the task again; the
output's exclusive commit manifests keep every record exactly once. Job specs come with the tasks;
their paths (schema_file, a relative output uri) must be valid on this machine too.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if sf.zookeeper == "" {
				return errors.New("worker: --zookeeper HOSTS/chroot is required (the same as the scheduler's)")
			}
			log, err := sf.logger("worker")
			if err != nil {
				return err
			}
			reg, stop, err := sf.serveMetrics("worker", log)
			if err != nil {
				return err
			}
			defer stop()
			ctx, cancel := signalContext(c.Context())
			defer cancel()
			fmt.Fprintf(c.OutOrStdout(), "sluice worker taking tasks from ZooKeeper %s\n", sf.zookeeper)
			return cluster.RunWorker(ctx, cluster.WorkerOptions{Connect: sf.zookeeper, SessionTimeout: sf.sessionTimeout,
				Name: sf.name, Engine: &scheduler.LoaderEngine{}, Tasks: tasks, Logger: log, Metrics: scheduler.NewMetrics(reg, nil)})
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&sf.zookeeper, "zookeeper", "", "HOSTS/chroot of the scheduler (e.g. 127.0.0.1:2181/sluice)")
	cmd.Flags().IntVar(&tasks, "tasks", 1, "tasks run at once")
	return cmd
}
