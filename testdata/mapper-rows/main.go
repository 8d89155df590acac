// Command fanout-loader is a loader binary with a custom mapper that emits
// many rows per record, for the loader's tests: "fanout" (map: {mapper:
// fanout, options: {rows: 3}}) emits each record rows times, with a column
// copy (0 … rows-1). With metadata columns each row also carries _offset
// and _row, its index among its record's rows.
package main

import (
	"fmt"
	"maps"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/jobs/jobcli"
)

func main() {
	jobs.RegisterMapper("fanout", newFanout)
	jobcli.Main()
}

type fanout struct{ rows int }

func newFanout(cfg jobs.MapperConfig) (jobs.Mapper, error) {
	f := &fanout{rows: 3}
	if v, ok := cfg.Options["rows"]; ok {
		n, ok := v.(int)
		if !ok || n < 0 {
			return nil, fmt.Errorf("map.options.rows: %v is not a count", v)
		}
		f.rows = n
	}
	return f, nil
}

func (f *fanout) Schema(in avro.Schema) (avro.Schema, error) {
	return jobs.ExtendSchema(in, [2]string{"copy", `"int"`})
}

// Map emits f.rows rows; each is a map of its own (emit takes ownership).
func (f *fanout) Map(rec *jobs.Record, emit func(map[string]any) error) error {
	for i := 0; i < f.rows; i++ {
		row := maps.Clone(rec.Value)
		row["copy"] = i
		if err := emit(row); err != nil {
			return err
		}
	}
	return nil
}
