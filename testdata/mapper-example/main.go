// Command pageviews-loader is a worked example of a custom mapper: a
// sluice loader binary of your own, with the `load`, `checkpoints` and
// `replay` commands of `sluice`, plus a mapper named "enrich" that job
// specs can use (map: {mapper: enrich, options: {error_from: 400}}).
//
//	go build -o pageviews-loader ./testdata/mapper-example
//	./pageviews-loader load run job.yaml
package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/jobs/jobcli"
)

func main() {
	jobs.RegisterMapper("enrich", newEnrich)
	jobcli.Main()
}

// enrich adds two columns to each page view — section (the first segment of
// the URL's path) and is_error (status at or above error_from) — and drops
// redirects (3xx): a mapper may emit zero rows for a record.
type enrich struct {
	errorFrom int
}

func newEnrich(cfg jobs.MapperConfig) (jobs.Mapper, error) {
	e := &enrich{errorFrom: 400}
	if v, ok := cfg.Options["error_from"]; ok {
		n, ok := v.(int)
		if !ok {
			return nil, fmt.Errorf("map.options.error_from: %v is not a number", v)
		}
		e.errorFrom = n
	}
	return e, nil
}

// Schema: the input record plus section and is_error.
func (e *enrich) Schema(in avro.Schema) (avro.Schema, error) {
	return jobs.ExtendSchema(in, [2]string{"section", `"string"`}, [2]string{"is_error", `"boolean"`})
}

// Map sees the decoded record (rec.Value, plus rec.Topic, Partition,
// Offset, Timestamp, Key and Headers) and emits its rows.
func (e *enrich) Map(rec *jobs.Record, emit func(map[string]any) error) error {
	status, _ := rec.Value["status"].(int)
	if status >= 300 && status < 400 {
		return nil // redirects are not page views
	}
	raw, _ := rec.Value["url"].(string)
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url %q: %w", raw, err) // a bad record: on_bad_record decides
	}
	section, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if section == "" {
		section = "home"
	}
	row := rec.Value
	row["section"] = section
	row["is_error"] = status >= e.errorFrom
	return emit(row)
}
