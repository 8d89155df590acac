package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/scheduler"
)

// payload is a queued attempt: what a worker needs to run it.
type payload struct {
	Run     string         `json:"run"`
	Job     string         `json:"job"`
	Path    string         `json:"path"`
	Spec    []byte         `json:"spec"`
	Task    scheduler.Task `json:"task"`
	Attempt int            `json:"attempt"`
}

// result is an attempt's outcome.
type result struct {
	OK     bool                 `json:"ok"`
	Report scheduler.TaskReport `json:"report"`
	Error  string               `json:"error,omitempty"`
	Worker string               `json:"worker"`
}

func attemptName(run string, task scheduler.Task, attempt int) string {
	return fmt.Sprintf("%s~%s~%d", run, task.ID(), attempt)
}

// Coordinator is the leader's side: a scheduler.Dispatcher that queues
// attempts for workers and a scheduler.RunTracker that keeps runs in
// flight in ZooKeeper.
type Coordinator struct {
	c *Conn
}

// NewCoordinator returns the leader's dispatcher and tracker on c.
func NewCoordinator(c *Conn) *Coordinator { return &Coordinator{c: c} }

// Dispatch queues attempt of task (unless queued or done already) and
// waits for a worker's result.
func (d *Coordinator) Dispatch(ctx context.Context, run scheduler.RunRef, job scheduler.Job, task scheduler.Task, attempt int) (scheduler.TaskReport, error) {
	name := attemptName(run.ID, task, attempt)
	data, err := json.Marshal(payload{Run: run.ID, Job: job.Name, Path: job.Path, Spec: job.Spec, Task: task, Attempt: attempt})
	if err != nil {
		return scheduler.TaskReport{}, err
	}
	queued := false
	for {
		ok, _, ch, err := d.c.zk.ExistsW(d.c.p("/results/" + name))
		if err != nil { // the connection dropped for a moment: watch again
			pause(ctx, d.c.Expired(), 200*time.Millisecond)
			switch {
			case ctx.Err() != nil:
				return scheduler.TaskReport{}, ctx.Err()
			case isClosed(d.c.Expired()):
				return scheduler.TaskReport{}, scheduler.ErrNotLeader
			}
			continue
		}
		if ok {
			return d.result(name)
		}
		if !queued {
			_, err := d.c.zk.Create(d.c.p("/queue/"+name), data, 0, zk.WorldACL(zk.PermAll))
			if err != nil && !errors.Is(err, zk.ErrNodeExists) {
				pause(ctx, d.c.Expired(), 200*time.Millisecond)
				continue // queue it again (an existing node is fine)
			}
			queued = true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return scheduler.TaskReport{}, ctx.Err()
		case <-d.c.Expired():
			return scheduler.TaskReport{}, scheduler.ErrNotLeader
		}
	}
}

func (d *Coordinator) result(name string) (scheduler.TaskReport, error) {
	b, _, err := d.c.zk.Get(d.c.p("/results/" + name))
	if err != nil {
		return scheduler.TaskReport{}, fmt.Errorf("cluster: reading the result of %s: %w", name, err)
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		return scheduler.TaskReport{}, fmt.Errorf("cluster: result of %s: %w", name, err)
	}
	if !r.OK {
		return scheduler.TaskReport{}, fmt.Errorf("on worker %s: %s", r.Worker, r.Error)
	}
	return r.Report, nil
}

// Begin records a run in flight.
func (d *Coordinator) Begin(ctx context.Context, rec scheduler.RunRecord, job scheduler.Job, plan scheduler.Plan) error {
	data, err := json.Marshal(scheduler.InFlightRun{Record: rec, Path: job.Path, Spec: job.Spec, Tasks: plan.Tasks,
		Partitions: plan.Partitions, Notes: plan.Notes, PlannedAt: rec.Started})
	if err != nil {
		return err
	}
	select {
	case <-d.c.Expired():
		return scheduler.ErrNotLeader
	default:
	}
	if _, err := d.c.zk.Create(d.c.p("/runs/"+rec.ID), data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		return fmt.Errorf("cluster: recording run %s: %w", rec.ID, err)
	}
	return nil
}

// End deletes a run's nodes.
func (d *Coordinator) End(ctx context.Context, runID string) error {
	for _, dir := range []string{"/queue", "/results", "/claims"} {
		names, _, err := d.c.zk.Children(d.c.p(dir))
		if err != nil {
			return err
		}
		for _, n := range names {
			if strings.HasPrefix(n, runID+"~") {
				if err := d.c.zk.Delete(d.c.p(dir+"/"+n), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return err
				}
			}
		}
	}
	err := d.c.zk.Delete(d.c.p("/runs/"+runID), -1)
	if errors.Is(err, zk.ErrNoNode) {
		err = nil
	}
	return err
}

// InFlight lists the runs begun and not ended.
func (d *Coordinator) InFlight(ctx context.Context) ([]scheduler.InFlightRun, error) {
	names, _, err := d.c.zk.Children(d.c.p("/runs"))
	if err != nil {
		return nil, err
	}
	var out []scheduler.InFlightRun
	for _, n := range names {
		b, _, err := d.c.zk.Get(d.c.p("/runs/" + n))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var r scheduler.InFlightRun
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("cluster: run %s in ZooKeeper: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}
