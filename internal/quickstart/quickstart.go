// Package quickstart is `sluice quickstart`: the whole pipeline on one
// machine. It starts a broker and the schema registry in this process over
// a local directory, creates the pageviews topic, registers an Avro
// schema, produces a few hours of page views, loads them hourly into
// Parquet through the scheduler (whose complete hours get _SUCCESS), and
// ends with SQL over the loaded files. Everything it starts is stopped
// before Run returns; the files stay in the directory.
package quickstart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/schemaregistry"
	"github.com/sluicehq/sluice/broker/server"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/jobs/query"
	"github.com/sluicehq/sluice/scheduler"
)

// Options configure a quickstart.
type Options struct {
	// Dir is the working directory (created; its previous content is kept).
	Dir string
	// Out receives what the user reads: steps, progress and query results.
	Out io.Writer
	// Events is the number of page views produced first (default 30,000),
	// spread over the last Hours hours (default 3).
	Events int
	Hours  int
	// Clock is the time source (nil = clock.Real); the page views end at
	// its Now.
	Clock clock.Clock
}

// Topic is the quickstart's topic and JobName the name of its job.
const (
	Topic   = "pageviews"
	JobName = "pageviews-hourly"
)

type env struct {
	opts     Options
	out      io.Writer
	log      *slog.Logger
	broker   string
	registry string
	stops    []func()
}

func (e *env) step(format string, args ...any) {
	fmt.Fprintf(e.out, "==> "+format+"\n", args...)
}

func (e *env) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("quickstart: no directory")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Events <= 0 {
		o.Events = 30000
	}
	if o.Hours <= 0 {
		o.Hours = 3
	}
	o.Clock = clock.OrReal(o.Clock)
	return os.MkdirAll(o.Dir, 0o755)
}

// logger writes the components' logs to DIR/quickstart.log.
func (e *env) openLog() error {
	f, err := os.OpenFile(filepath.Join(e.opts.Dir, "quickstart.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	e.log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e.stops = append(e.stops, func() { f.Close() })
	return nil
}

// startBroker starts a broker on a free loopback port over DIR/broker.
func (e *env) startBroker() error {
	srv, err := server.New(server.Options{DataDir: filepath.Join(e.opts.Dir, "broker"), Config: config.Default(), Logger: e.log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	e.broker = ln.Addr().String()
	e.stops = append(e.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return nil
}

// startRegistry starts the schema registry on a free loopback port,
// stored in the broker's _schemas topic.
func (e *env) startRegistry(ctx context.Context) error {
	reg, err := schemaregistry.New(ctx, schemaregistry.Options{Bootstrap: []string{e.broker}, Logger: e.log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		reg.Close(context.Background())
		return err
	}
	done := make(chan struct{})
	go func() { reg.Serve(ln); close(done) }()
	e.registry = "http://" + ln.Addr().String()
	e.stops = append(e.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		reg.Close(ctx)
		<-done
	})
	return nil
}

// newEnv applies the defaults and opens DIR/quickstart.log.
func newEnv(opts Options) (*env, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	e := &env{opts: opts, out: opts.Out}
	if err := e.openLog(); err != nil {
		return nil, err
	}
	return e, nil
}

// Run runs the quickstart.
func Run(ctx context.Context, opts Options) error {
	e, err := newEnv(opts)
	if err != nil {
		return err
	}
	defer e.stop()
	opts = e.opts // with the defaults
	start := time.Now()
	e.step("starting a sluice broker and the schema registry in %s (logs: quickstart.log)", opts.Dir)
	if err := e.startBroker(); err != nil {
		return fmt.Errorf("quickstart: broker: %w", err)
	}
	if err := e.startRegistry(ctx); err != nil {
		return fmt.Errorf("quickstart: schema registry: %w", err)
	}
	fmt.Fprintf(e.out, "    broker %s, schema registry %s\n", e.broker, e.registry)

	e.step("creating the topic %s (3 partitions) and registering the Avro schema %s-value", Topic, Topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := createTopic(ctx, cl); err != nil {
		return err
	}
	schema, id, err := e.registerSchema(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "    schema id %d\n", id)

	now := opts.Clock.Now()
	from := now.Add(-time.Duration(opts.Hours) * time.Hour)
	e.step("producing %d page views from %s to %s (Avro, Confluent framing, keyed by user)",
		opts.Events, from.UTC().Format("15:04"), now.UTC().Format("15:04 MST"))
	views := generate(opts.Events, from, now, 1)
	if err := produce(ctx, cl, schema, id, views); err != nil {
		return err
	}

	jobsDir, warehouse := filepath.Join(opts.Dir, "jobs"), filepath.Join(opts.Dir, "warehouse")
	specPath, err := writeJob(jobsDir, e.broker, e.registry, filepath.Join(warehouse, Topic))
	if err != nil {
		return err
	}
	e.step("scheduling the hourly job %s (%s) every 2 seconds for the demo", JobName, specPath)
	if err := e.schedule(ctx, jobsDir, cl, schema, id, now); err != nil {
		return err
	}
	if err := e.query(ctx, warehouse); err != nil {
		return err
	}
	e.stop()
	e.step("done in %s: everything stopped; the data stays in %s", time.Since(start).Round(100*time.Millisecond), opts.Dir)
	fmt.Fprintf(e.out, "    sluice runs list %s\n    sluice query --warehouse file://%s \"SELECT * FROM %s LIMIT 5\"\n", specPath, warehouse, Topic)
	return nil
}

func createTopic(ctx context.Context, cl *kgo.Client) error {
	res, err := kadm.NewClient(cl).CreateTopics(ctx, 3, 1, nil, Topic)
	if err == nil {
		if r, ok := res[Topic]; ok && r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("quickstart: creating %s: %w", Topic, err)
	}
	return nil
}

func (e *env) registerSchema(ctx context.Context) (avro.Schema, int, error) {
	schema, err := avro.Parse(Schema)
	if err != nil {
		return nil, 0, err
	}
	rc, err := sr.NewClient(sr.URLs(e.registry))
	if err != nil {
		return nil, 0, err
	}
	ss, err := rc.CreateSchema(ctx, Topic+"-value", sr.Schema{Schema: Schema, Type: sr.TypeAvro})
	if err != nil {
		return nil, 0, fmt.Errorf("quickstart: registering the schema: %w", err)
	}
	return schema, ss.ID, nil
}

// produce sends the page views, framed 0x00 + schema id + Avro binary.
func produce(ctx context.Context, cl *kgo.Client, schema avro.Schema, id int, views []pageView) error {
	recs := make([]*kgo.Record, 0, len(views))
	for _, v := range views {
		body, err := avro.Marshal(schema, v.value)
		if err != nil {
			return fmt.Errorf("quickstart: encoding a page view: %w", err)
		}
		val := make([]byte, 5, 5+len(body))
		binary.BigEndian.PutUint32(val[1:], uint32(id))
		recs = append(recs, &kgo.Record{Topic: Topic, Key: []byte(v.key), Value: append(val, body...), Timestamp: v.at})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("quickstart: producing: %w", err)
	}
	return nil
}

const jobSpec = `# The quickstart's job: page views from Kafka into hourly Parquet directories.
name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: 5000
decode:
  format: avro
  registry: %s
partition:
  by: hour
  time_field: ts
  timezone: UTC
output:
  uri: file://%s
  format: parquet
  compression: zstd
  metadata_columns: true
schedule: "*/2 * * * * *"   # every 2 seconds for the demo (below the 1m floor: sluice scheduler --min-interval 1s); "5 * * * *" is five past every hour
retry:
  max_attempts: 3
  backoff: 1s
allowed_lateness: 1m
`

func writeJob(dir, broker, registry, out string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, JobName+".yaml")
	return p, os.WriteFile(p, []byte(fmt.Sprintf(jobSpec, JobName, broker, Topic, registry, out)), 0o644)
}

// schedule runs the scheduler until a run has loaded the backlog, then
// produces a few more page views and waits for the next run to load only
// those.
func (e *env) schedule(ctx context.Context, jobsDir string, cl *kgo.Client, schema avro.Schema, id int, now time.Time) error {
	var mu sync.Mutex
	ended := make(chan scheduler.RunRecord, 16)
	s, err := scheduler.New(scheduler.Options{Engine: &scheduler.LoaderEngine{}, JobsDir: jobsDir, Workers: 3,
		Logger: e.log, ScanInterval: time.Second, MinInterval: time.Second, // the demo's 2-second schedule
		OnTaskEnd: func(run scheduler.RunRef, t scheduler.TaskRecord) {
			mu.Lock()
			defer mu.Unlock()
			if t.State == scheduler.StateSucceeded {
				fmt.Fprintf(e.out, "    task %-28s %6d rows  %5d ms\n", t.Task.String(), t.Records, t.Millis)
			} else {
				fmt.Fprintf(e.out, "    task %-28s %s after %d attempts: %s\n", t.Task.String(), t.State, t.Attempts, t.Error)
			}
		},
		OnRunEnd: func(r scheduler.RunRecord) { ended <- r },
	})
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(sctx) }()
	defer func() { cancel(); <-done }()

	wait := func(what string) (scheduler.RunRecord, error) {
		timeout := time.After(90 * time.Second)
		for {
			select {
			case r := <-ended:
				if r.State != scheduler.StateSucceeded {
					return r, fmt.Errorf("quickstart: run %s %s: %s", r.ID, r.State, r.Error)
				}
				if r.Records == 0 {
					continue // a tick with nothing new
				}
				mu.Lock()
				fmt.Fprintf(e.out, "    run %s: %s, %d rows in %d tasks, %s\n", r.ID, r.State, r.Records, len(r.Tasks),
					r.Ended.Sub(r.Started).Round(time.Millisecond))
				if len(r.Complete) > 0 {
					fmt.Fprintf(e.out, "    complete hours (_SUCCESS written): %s\n", strings.Join(r.Complete, ", "))
				}
				mu.Unlock()
				return r, nil
			case err := <-done:
				return scheduler.RunRecord{}, fmt.Errorf("quickstart: the scheduler stopped: %v", err)
			case <-timeout:
				return scheduler.RunRecord{}, fmt.Errorf("quickstart: no run loaded the %s within 90s (see quickstart.log)", what)
			case <-ctx.Done():
				return scheduler.RunRecord{}, ctx.Err()
			}
		}
	}
	if _, err := wait("backlog"); err != nil {
		return err
	}
	e.step("producing 500 more page views in the current hour; the next tick loads only those")
	if err := produce(ctx, cl, schema, id, generate(500, now.Add(-5*time.Minute), now, 2)); err != nil {
		return err
	}
	_, err = wait("new page views")
	return err
}

// query prints page views per hour and the top pages, read by DuckDB from
// the committed Parquet files.
func (e *env) query(ctx context.Context, warehouse string) error {
	q, err := query.Open(ctx, "file://"+warehouse, query.Options{Warnings: e.out})
	if err != nil {
		return err
	}
	defer q.Close()
	for _, s := range []struct{ title, sql string }{
		{"page views per hour", fmt.Sprintf("SELECT dt, hr, count(*) AS page_views, count(DISTINCT user_id) AS users, "+
			"round(avg(latency_ms)) AS avg_latency_ms FROM %s GROUP BY dt, hr ORDER BY dt, hr", Topic)},
		{"top pages", fmt.Sprintf("SELECT url, count(*) AS views, sum(CASE WHEN status >= 400 THEN 1 ELSE 0 END) AS errors "+
			"FROM %s GROUP BY url ORDER BY views DESC, url LIMIT 5", Topic)},
	} {
		e.step("sluice query: %s\n    %s", s.title, s.sql)
		rows, _, err := q.Query(ctx, s.sql)
		if err != nil {
			return fmt.Errorf("quickstart: query: %w", err)
		}
		_, err = query.Write(e.out, rows, query.Output{Format: query.FormatTable, Location: q.Location()})
		rows.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
