// Package rangeload is a small, real load engine for the scheduler's own
// tests: it plans offset-range tasks from a real Kafka-protocol cluster's
// high watermarks and the writers' commit manifests, reads each range with
// franz-go and commits it as JSON lines through writers (exclusive
// manifests), so the scheduler's exactly-once claims are checked against
// the real commit protocol. sluice's loader (package jobs) is the engine
// users run; this one reads the same spec keys it needs and ignores the
// others.
package rangeload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// Spec is the subset of the job spec this engine reads.
type Spec struct {
	Name   string `yaml:"name"`
	Source struct {
		Bootstrap         []string `yaml:"bootstrap"`
		Topics            []string `yaml:"topics"`
		Start             string   `yaml:"start"`
		MaxRecordsPerTask int64    `yaml:"max_records_per_task"`
	} `yaml:"source"`
	Partition struct {
		By        string `yaml:"by"`
		TimeField string `yaml:"time_field"`
		Timezone  string `yaml:"timezone"`
	} `yaml:"partition"`
	Output struct {
		URI string `yaml:"uri"`
	} `yaml:"output"`
	Schedule string `yaml:"schedule"`
	Retry    struct {
		MaxAttempts int    `yaml:"max_attempts"`
		Backoff     string `yaml:"backoff"`
	} `yaml:"retry"`
	AllowedLateness string `yaml:"allowed_lateness"`
}

// Engine implements scheduler.Engine.
type Engine struct {
	// RecordHook, when set, runs before each record is written (tests slow
	// tasks down with it, to kill a worker mid-task).
	RecordHook func(task scheduler.Task, offset int64)
}

type parsed struct {
	spec Spec
	part *writers.Partitioner
}

// ParseJob parses a spec.
func (e *Engine) ParseJob(path string, data []byte) (scheduler.Job, error) {
	var s Spec
	if err := yaml.Unmarshal(data, &s); err != nil {
		return scheduler.Job{}, fmt.Errorf("rangeload: %s: %w", path, err)
	}
	if len(s.Source.Bootstrap) == 0 || len(s.Source.Topics) == 0 {
		return scheduler.Job{}, fmt.Errorf("rangeload: %s: source.bootstrap and source.topics are required", path)
	}
	if s.Source.MaxRecordsPerTask <= 0 {
		s.Source.MaxRecordsPerTask = 1_000_000
	}
	part, err := writers.NewPartitioner(writers.Granularity(s.Partition.By), s.Partition.TimeField, s.Partition.Timezone)
	if err != nil {
		return scheduler.Job{}, fmt.Errorf("rangeload: %s: %w", path, err)
	}
	job := scheduler.Job{Name: s.Name, Path: path, Spec: data, Schedule: s.Schedule, Output: s.Output.URI,
		Engine: &parsed{spec: s, part: part}}
	job.Retry.MaxAttempts = s.Retry.MaxAttempts
	if s.Retry.Backoff != "" {
		if job.Retry.Backoff, err = time.ParseDuration(s.Retry.Backoff); err != nil {
			return scheduler.Job{}, fmt.Errorf("rangeload: %s: retry.backoff: %w", path, err)
		}
	}
	if s.AllowedLateness != "" {
		if job.AllowedLateness, err = time.ParseDuration(s.AllowedLateness); err != nil {
			return scheduler.Job{}, fmt.Errorf("rangeload: %s: allowed_lateness: %w", path, err)
		}
	}
	job.Partition.By = s.Partition.By
	if job.Partition.By == "" {
		job.Partition.By = "hour"
	}
	if s.Partition.Timezone != "" {
		job.Partition.Location, _ = time.LoadLocation(s.Partition.Timezone)
	}
	return job, nil
}

func specOf(job scheduler.Job) (*parsed, error) {
	p, ok := job.Engine.(*parsed)
	if !ok {
		return nil, errors.New("rangeload: job was not parsed by this engine")
	}
	return p, nil
}

// Plan reads high watermarks and checkpoints and splits the difference.
func (e *Engine) Plan(ctx context.Context, job scheduler.Job) (scheduler.Plan, error) {
	p, err := specOf(job)
	if err != nil {
		return scheduler.Plan{}, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.spec.Source.Bootstrap...))
	if err != nil {
		return scheduler.Plan{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, p.spec.Source.Topics...)
	if err != nil {
		return scheduler.Plan{}, fmt.Errorf("rangeload: high watermarks: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, p.spec.Source.Topics...)
	if err != nil {
		return scheduler.Plan{}, fmt.Errorf("rangeload: start offsets: %w", err)
	}
	fs, err := filesystem.Open(job.Output)
	if err != nil {
		return scheduler.Plan{}, err
	}
	defer fs.Close()
	store := writers.NewStore(fs, writers.StoreOptions{})
	var plan scheduler.Plan
	var perr error
	ends.Each(func(lo kadm.ListedOffset) {
		if perr != nil {
			return
		}
		if lo.Err != nil {
			perr = fmt.Errorf("rangeload: %s/%d: %w", lo.Topic, lo.Partition, lo.Err)
			return
		}
		def := lo.Offset
		if p.spec.Source.Start != "latest" {
			s, _ := starts.Lookup(lo.Topic, lo.Partition)
			def = s.Offset
		}
		from, err := store.NextStart(lo.Topic, lo.Partition, def)
		if err != nil {
			perr = err
			return
		}
		plan.Partitions = append(plan.Partitions, scheduler.PartitionPosition{Topic: lo.Topic, Partition: lo.Partition,
			Loaded: from, HighWatermark: lo.Offset})
		for s := from; s < lo.Offset; s += p.spec.Source.MaxRecordsPerTask {
			plan.Tasks = append(plan.Tasks, scheduler.Task{Topic: lo.Topic, Partition: lo.Partition, Start: s,
				End: min(s+p.spec.Source.MaxRecordsPerTask, lo.Offset)})
		}
	})
	return plan, perr
}

// RunTask reads [Start, End) and commits it.
func (e *Engine) RunTask(ctx context.Context, job scheduler.Job, task scheduler.Task) (scheduler.TaskReport, error) {
	p, err := specOf(job)
	if err != nil {
		return scheduler.TaskReport{}, err
	}
	fs, err := filesystem.Open(job.Output)
	if err != nil {
		return scheduler.TaskReport{}, err
	}
	defer fs.Close()
	store := writers.NewStore(fs, writers.StoreOptions{})
	split := writers.Split{Topic: task.Topic, Partition: task.Partition, Start: task.Start, End: task.End}
	w, err := writers.NewSplitWriter(store, split, writers.Config{Format: format.Options{Kind: format.JSONLines, MetadataColumns: true},
		Partitioner: p.part})
	if err != nil {
		return scheduler.TaskReport{}, err
	}
	if err := e.read(ctx, p, task, w); err != nil {
		w.Abort()
		return scheduler.TaskReport{}, err
	}
	res, err := w.Commit(task.End) // read() returns nil only once the reader reached task.End
	if err != nil {
		return scheduler.TaskReport{}, err
	}
	rep := scheduler.TaskReport{Committed: res.Won}
	if res.Won && res.Manifest != nil {
		rep.Records = res.Manifest.Records
		for _, f := range res.Manifest.Files {
			rep.Bytes += f.Bytes
		}
	}
	return rep, nil
}

func (e *Engine) read(ctx context.Context, p *parsed, task scheduler.Task, w *writers.SplitWriter) error {
	if task.End <= task.Start {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.spec.Source.Bootstrap...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{task.Topic: {task.Partition: kgo.NewOffset().At(task.Start)}}))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("rangeload: fetch %s: %w", task, ferr)
		}
		done := false
		var werr error
		fetches.EachRecord(func(r *kgo.Record) {
			if done || werr != nil || r.Offset < task.Start {
				return
			}
			if r.Offset >= task.End {
				done = true
				return
			}
			if e.RecordHook != nil {
				e.RecordHook(task, r.Offset)
			}
			var v map[string]any
			if json.Unmarshal(r.Value, &v) != nil {
				v = map[string]any{"value": string(r.Value)}
			}
			werr = w.Write(nil, v, format.Meta{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp})
			if r.Offset == task.End-1 {
				done = true
			}
		})
		if werr != nil {
			return werr
		}
		if done {
			return nil
		}
	}
}
