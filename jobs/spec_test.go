package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodSpec = `
name: pageviews-hourly
source:
  bootstrap: [127.0.0.1:9092]
  topics: [pageviews]
  start: earliest
  on_offset_out_of_range: fail
  max_records_per_task: 1000000
decode:
  format: avro
  registry: http://127.0.0.1:8081
map:
  mapper: identity
  where: "status >= 200"
on_bad_record: fail
partition:
  by: hour
  time_field: ts
  timezone: UTC
output:
  uri: file:///var/warehouse/pageviews
  format: parquet
  compression: zstd
  metadata_columns: true
schedule: "@hourly"
`

// The DESIGN.md example parses as written, with every key taking effect.
func TestSpecDesignExample(t *testing.T) {
	s, err := ParseSpec([]byte(goodSpec), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "pageviews-hourly" || s.Source.Bootstrap[0] != "127.0.0.1:9092" || s.Source.Topics[0] != "pageviews" ||
		s.Source.Start != "earliest" || s.Source.OnOffsetOutOfRange != "fail" || s.Source.MaxRecordsPerTask != 1000000 ||
		s.Decode.Format != "avro" || s.Decode.Registry != "http://127.0.0.1:8081" || s.Map.Mapper != "identity" ||
		s.Map.Where != "status >= 200" || s.OnBadRecord != "fail" || s.Partition.By != "hour" || s.Partition.TimeField != "ts" ||
		s.Partition.Timezone != "UTC" || s.Output.URI != "file:///var/warehouse/pageviews" || s.Output.Format != "parquet" ||
		s.Output.Compression != "zstd" || !s.Output.MetadataColumns || s.Schedule != "@hourly" {
		t.Fatalf("spec not read as written: %+v", s)
	}
}

func TestSpecDefaults(t *testing.T) {
	s, err := ParseSpec([]byte("name: j\nsource: {topics: t}\ndecode: {format: string}\noutput: {uri: /tmp/x}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Source.Bootstrap[0] != "127.0.0.1:9092" || s.Source.Start != "earliest" || s.Source.MaxRecordsPerTask != DefaultMaxRecordsPerTask ||
		s.OnBadRecord != "fail" || s.Map.Mapper != "identity" || s.Output.Format != "parquet" || s.Output.Compression != "zstd" ||
		s.Partition.TimeField != "@timestamp" || s.Source.Isolation != ReadCommitted {
		t.Fatalf("defaults: %+v", s)
	}
}

// Every kind of mistake is refused with a message naming the field.
func TestSpecMistakes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.avsc"), []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, old, new, want string }{
		{"unknown top key", "schedule:", "shedule:", `shedule: unknown key`},
		{"unknown nested key", "  compression: zstd", "  compresion: zstd", `output.compresion: unknown key`},
		{"bad output format", "format: parquet", "format: parquett", `output.format: "parquett" is not one of parquet, avro, jsonl`},
		{"bad decode format", "format: avro", "format: protobuf", `decode.format: "protobuf" is not one of avro, json, string, bytes`},
		{"bad start", "start: earliest", "start: beginning", `source.start: "beginning" is not one of earliest, latest`},
		{"bad out of range", "on_offset_out_of_range: fail", "on_offset_out_of_range: reset", `source.on_offset_out_of_range: "reset" is not one of fail, skip`},
		{"bad policy", "on_bad_record: fail", "on_bad_record: ignore", `on_bad_record: "ignore" is not one of fail, skip, dead-letter`},
		{"bad partition", "by: hour", "by: minute", `partition.by: "minute" is not one of hour, day, none`},
		{"bad timezone", "timezone: UTC", "timezone: Mars/Olympus", `partition.timezone: "Mars/Olympus" is not a known time zone`},
		{"bad compression", "compression: zstd", "compression: lzma", `output.compression: "lzma" is not available for parquet`},
		{"bad uri", "uri: file:///var/warehouse/pageviews", "uri: s3://bucket/x", `output.uri: scheme "s3" is not file or hdfs`},
		{"missing uri", "  uri: file:///var/warehouse/pageviews\n", "", `output.uri: missing`},
		{"missing name", "name: pageviews-hourly\n", "", `name: missing`},
		{"bad name", "name: pageviews-hourly", "name: ../etc", `name: "../etc"`},
		{"no topics", "topics: [pageviews]", "topics: []", `source.topics: missing`},
		{"bad topic", "topics: [pageviews]", "topics: [a/b]", `source.topics[0]: "a/b"`},
		{"bad bootstrap", "bootstrap: [127.0.0.1:9092]", "bootstrap: [localhost]", `source.bootstrap[0]: "localhost" is not HOST:PORT`},
		{"negative max", "max_records_per_task: 1000000", "max_records_per_task: -5", `source.max_records_per_task: -5`},
		{"wrong type", "max_records_per_task: 1000000", "max_records_per_task: lots", `cannot unmarshal`},
		{"both schemas", "registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  schema_file: x.avsc", `decode: avro needs exactly one of registry`},
		{"no schema", "  registry: http://127.0.0.1:8081\n", "", `decode: avro needs exactly one of registry`},
		{"bad registry", "registry: http://127.0.0.1:8081", "registry: 127.0.0.1:8081", `decode.registry: "127.0.0.1:8081" is not an http(s) URL`},
		{"missing schema file", "registry: http://127.0.0.1:8081", "schema_file: nope.avsc", `decode.schema_file: "nope.avsc" cannot be read`},
		{"unknown mapper", "mapper: identity", "mapper: upcase", `map.mapper: "upcase" is not a registered mapper`},
		{"bad where", `where: "status >= 200"`, `where: "status >= "`, `map.where:`},
		{"select without config", "mapper: identity", "mapper: select", `map.select: missing`},
		{"not yaml", "name: pageviews-hourly", "name: [unclosed", `bad job spec`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(goodSpec, c.old, c.new, 1)
			if text == goodSpec {
				t.Fatalf("case does not change the spec")
			}
			_, err := ParseSpec([]byte(text), dir)
			if err == nil {
				t.Fatalf("accepted:\n%s", text)
			}
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestLoadSpecNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(goodSpec, "format: parquet", "format: csv", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSpec(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "output.format") {
		t.Fatalf("got %v", err)
	}
	if _, err := LoadSpec(p + ".missing"); err == nil {
		t.Fatal("missing file accepted")
	}
}
