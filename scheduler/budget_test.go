package scheduler

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
)

// budgetJob parses a job of its own output directory; its loader never
// reaches the broker (opening one does not dial).
func budgetJob(t *testing.T, e *LoaderEngine, name string) Job {
	t.Helper()
	spec := fmt.Sprintf(`name: %s
source:
  bootstrap: [127.0.0.1:1]
  topics: [%s]
decode:
  format: json
output:
  uri: file://%s
  format: parquet
schedule: "@every 1m"
`, name, name, t.TempDir())
	job, err := e.ParseJob("", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// TestLoaderEngineLoadersShareOneMemoryBudget: the loaders an engine opens
// (a held one for a run, and one a worker's task opens for itself) buffer
// their rows under one budget, of writers.DefaultMemoryBudget, not one each;
// a budget given in Options is the one they share.
func TestLoaderEngineLoadersShareOneMemoryBudget(t *testing.T) {
	ctx := context.Background()
	given := writers.NewMemoryBudget(1 << 20)
	for _, c := range []struct {
		name  string
		opts  jobs.Options
		limit int64
	}{
		{"default", jobs.Options{}, writers.DefaultMemoryBudget},
		{"given", jobs.Options{MemoryBudget: given}, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &LoaderEngine{Options: c.opts}
			release, err := e.HoldJob(ctx, budgetJob(t, e, "held"))
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			held, done, err := e.loader(ctx, budgetJob(t, e, "held"))
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			var budgets []*writers.MemoryBudget
			for _, name := range []string{"task-a", "task-b"} {
				l, done, err := e.loader(ctx, budgetJob(t, e, name))
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				if l == held {
					t.Fatalf("%s: the loader of another job is the held one", name)
				}
				budgets = append(budgets, l.MemoryBudget())
			}
			b := held.MemoryBudget()
			if b == nil || budgets[0] != b || budgets[1] != b {
				t.Fatalf("the engine's loaders have budgets %p (held), %p and %p: want one", b, budgets[0], budgets[1])
			}
			if b.Limit() != c.limit {
				t.Fatalf("the shared budget's limit is %d, want %d", b.Limit(), c.limit)
			}
			if c.opts.MemoryBudget != nil && b != c.opts.MemoryBudget {
				t.Fatal("the engine did not use the budget its Options give")
			}
		})
	}
}
