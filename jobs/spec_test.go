package jobs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
		{"bad decode format", "format: avro", "format: thrift", `decode.format: "thrift" is not one of avro, protobuf, json, string, bytes`},
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
		{"wrong type", "max_records_per_task: 1000000", "max_records_per_task: lots", `source.max_records_per_task: "lots" is not a whole number`},
		{"both schemas", "registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  schema_file: x.avsc", `decode: avro needs exactly one of registry`},
		{"no schema", "  registry: http://127.0.0.1:8081\n", "", `decode: avro needs exactly one of registry`},
		{"bad registry", "registry: http://127.0.0.1:8081", "registry: 127.0.0.1:8081", `decode.registry: "127.0.0.1:8081" is not an http(s) URL`},
		{"missing schema file", "registry: http://127.0.0.1:8081", "schema_file: nope.avsc", `nope.avsc: cannot be read`},
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

// FuzzParseSpec: no input makes the parser panic; an accepted spec
// validates.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{goodSpec, "", "hello", "[1, 2]", "name: [a]", "source: 5", "output: {uri: [x]}",
		"name: j\nsource: {topics: t}\ndecode: {format: string}\noutput: {uri: /x}\nmap: {select: {keep: 3}}\n",
		"name: j\nsource: {topics: t}\ndecode: {format: json}\noutput: {uri: /x}\nmap: {where: 'a ? b : c'}\n", "---\n---\n", "*x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseSpec([]byte(text), t.TempDir())
		if err == nil {
			if verr := s.Validate(); verr != nil {
				t.Fatalf("accepted a spec that does not validate: %v", verr)
			}
		}
	})
}

// TestSpecEveryFieldRefusesBadValues: every key of the spec refuses a bad
// value at load time with a one-line error naming the key (non-integers,
// negatives and absurd sizes for numbers; the root and system directories
// for the output; a schema file's errors without its content; a select
// that would give two fields one name), and no key of the spec is left
// without a case here.
func TestSpecEveryFieldRefusesBadValues(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pv.avsc", `{"type": "record", "name": "pv", "fields": [{"name": "id", "type": "long"}, {"name": "page", "type": "string"}, {"name": "ts", "type": "long"}]}`)
	write("string.avsc", `{"type": "string"}`)
	write("items.avsc", `{"type": "record", "name": "order", "fields": [{"name": "id", "type": "long"}, {"name": "items", "type": {"type": "array", "items": "string"}}]}`)
	write("passwd", "root:x:0:0:topsecret:/root:/bin/bash\ndaemon:x:1:1:topsecret:/usr/sbin:/usr/sbin/nologin\n")
	write("secrets.json", `{"password": "topsecret"}`)
	write("badtype.avsc", `{"type": "record", "name": "r", "fields": [{"name": "a", "type": "nosuchtype"}]}`)
	write("big.avsc", strings.Repeat(" ", maxSchemaFileBytes+1))
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	withSchema := func(file, mapping string) (string, string) {
		return "registry: http://127.0.0.1:8081\nmap:\n  mapper: identity", "schema_file: " + file + "\nmap:\n  " + mapping
	}
	sel := func(sel string) (string, string) { return withSchema("pv.avsc", "mapper: select\n  select: "+sel) }
	type tc struct{ old, new, want string }
	c := func(old, new, want string) tc { return tc{old, new, want} }
	cases := []tc{
		c("name: pageviews-hourly", "name: ../x", `name:`),
		c("name: pageviews-hourly", "name: [a, b]", `name: want a single value`),
		c("bootstrap: [127.0.0.1:9092]", "bootstrap: [127.0.0.1:99999999999]", `source.bootstrap[0]: "127.0.0.1:99999999999": the port must be 1 to 65535`),
		c("bootstrap: [127.0.0.1:9092]", "bootstrap: [a:9092, b:0]", `source.bootstrap[1]: "b:0": the port must be 1 to 65535`),
		c("bootstrap: [127.0.0.1:9092]", "bootstrap: {a: b}", `source.bootstrap`),
		c("topics: [pageviews]", "topics: [a, a]", `source.topics[1]: "a" is listed twice`),
		c("start: earliest", "start: 0", `source.start: "0" is not one of`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: [fail]", `source.on_offset_out_of_range: want a single value`),
		c("max_records_per_task: 1000000", "max_records_per_task: 1.5", `source.max_records_per_task: "1.5" is not a whole number`),
		c("max_records_per_task: 1000000", "max_records_per_task: 1e3", `source.max_records_per_task: "1e3" is not a whole number`),
		c("max_records_per_task: 1000000", "max_records_per_task: 99999999999999999999", `source.max_records_per_task: 99999999999999999999 is too large`),
		c("max_records_per_task: 1000000", "max_records_per_task: 9223372036854775807", `source.max_records_per_task: 9223372036854775807: must be 1 to`),
		c("max_records_per_task: 1000000", "max_records_per_task: -1", `source.max_records_per_task: -1: must be 1 to`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  isolation: serializable", `source.isolation: "serializable" is not one of`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  on_topic_recreated: reset", `source.on_topic_recreated: "reset" is not one of fail, restart`),
		c("format: avro", "format: 7", `decode.format: "7" is not one of`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: 5", `source.security: want a mapping of keys`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: TLS}", `source.security.protocol: unknown security protocol "TLS"`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SASL_SSL, sasl: 5}", `source.security.sasl: want a mapping of keys`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SASL_SSL}", `source.security.sasl.mechanism: SASL_SSL needs a SASL mechanism`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: [a]}}", `source.security.sasl.username: want a single value`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u}}", `source.security.sasl.password_file: SASL_SSL with PLAIN needs a password`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u, password_env: [a]}}", `source.security.sasl.password_env: want a single value`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SSL, tls: 5}", `source.security.tls: want a mapping of keys`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {tls: {ca: ca.pem}}", `source.security.tls.ca: a TLS setting is given but the security protocol is PLAINTEXT`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SSL, tls: {cert: [a]}}", `source.security.tls.cert: want a single value`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SSL, tls: {cert: c.pem}}", `source.security.tls.key: a client certificate is given without its key`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SSL, tls: {server_name: [a]}}", `source.security.tls.server_name: want a single value`),
		c("on_offset_out_of_range: fail", "on_offset_out_of_range: fail\n  security: {protocol: SSL, tls: {insecure_skip_verify: maybe}}", `source.security.tls.insecure_skip_verify:`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: 5", `decode.registry_auth: want a mapping of keys`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: {password_env: X}", `decode.registry_auth.username: missing`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: {username: u}", `decode.registry_auth.password_file: missing`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: {username: u, password_env: [a]}", `decode.registry_auth.password_env: want a single value`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: {username: u, password_env: X, ca: [a]}", `decode.registry_auth.ca: want a single value`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: {username: u, password_env: X, cert: [a]}", `decode.registry_auth.cert: want a single value`),
		c("registry: http://127.0.0.1:8081", "registry: http://127.0.0.1:8081\n  registry_auth: {username: u, password_env: X, cert: c.pem}", `decode.registry_auth.key: cert and key go together`),
		c("registry: http://127.0.0.1:8081", "registry: file:///etc/passwd", `decode.registry: "file:///etc/passwd" is not an http(s) URL`),
		c("registry: http://127.0.0.1:8081", "schema_file: passwd", `decode.schema_file: `+filepath.Join(dir, "passwd")+`: line 1: not JSON`),
		c("registry: http://127.0.0.1:8081", "schema_file: secrets.json", `decode.schema_file: `+filepath.Join(dir, "secrets.json")+`: the top level is not an Avro record schema`),
		c("registry: http://127.0.0.1:8081", "schema_file: badtype.avsc", `badtype.avsc: not an Avro schema: avro: unknown type: nosuchtype`),
		c("registry: http://127.0.0.1:8081", "schema_file: string.avsc", `string.avsc: the top level is not an Avro record schema`),
		c("registry: http://127.0.0.1:8081", "schema_file: big.avsc", `big.avsc: is larger than 4194304 bytes`),
		c("registry: http://127.0.0.1:8081", "schema_file: adir", `adir: is not a regular file`),
		c("registry: http://127.0.0.1:8081", "schema_file: /nonexistent/x.avsc", `decode.schema_file: /nonexistent/x.avsc: cannot be read: no such file or directory`),
		c("format: avro\n  registry: http://127.0.0.1:8081", "format: json\n  infer_sample: 1.5", `decode.infer_sample: "1.5" is not a whole number`),
		c("format: avro\n  registry: http://127.0.0.1:8081", "format: json\n  infer_sample: -3", `decode.infer_sample: -3: must be 1 to 10000`),
		c("format: avro\n  registry: http://127.0.0.1:8081", "format: json\n  infer_sample: 100000000", `decode.infer_sample: 100000000: must be 1 to 10000`),
		c("mapper: identity", "mapper: [select]", `map.mapper: want a single value`),
		c(`where: "status >= 200"`, `where: "status >="`, `map.where:`),
		c("mapper: identity", "mapper: identity\n  options: 5", `map.options: want a mapping of keys`),
		c("mapper: identity", "mapper: identity\n  select: {keep: [a]}", `map.select: is only for mapper: select`),
		c("mapper: identity", "mapper: select\n  select: {keep: [a, a]}", `map.select.keep[1]: "a" is empty or listed twice`),
		c("mapper: identity", "mapper: select\n  select: {keep: a}", `map.select.keep: want a list`),
		c("mapper: identity", "mapper: select\n  select: {rename: {a: x, b: x}}", `map.select.rename.b: "a" and "b" are both renamed to "x"`),
		c("mapper: identity", "mapper: select\n  select: {keep: [a, b], rename: {a: b}}", `map.select.rename.a: "a" → "b" collides with the field "b"`),
		c("mapper: identity", "mapper: select\n  select: {keep: [a], rename: {b: c}}", `map.select.rename.b: renames "b", which keep drops`),
		c("mapper: identity", "mapper: select\n  select: {rename: {a: ''}}", `map.select.rename: "a" → "": both names must be given`),
		c("mapper: identity", "mapper: select\n  select: {rename: [a]}", `map.select.rename: want a mapping of keys`),
		tc(func() tc {
			o, n := sel("{rename: {id: page}}")
			return c(o, n, `map.select.rename.id: "id" → "page" collides with the field "page"`)
		}()),
		tc(func() tc {
			o, n := sel("{rename: {nope: x}}")
			return c(o, n, `map.select.rename.nope: "nope" is not a field of the record (fields: id, page, ts)`)
		}()),
		tc(func() tc {
			o, n := sel("{keep: [id, nope]}")
			return c(o, n, `map.select.keep[1]: "nope" is not a field of the record`)
		}()),
		c("mapper: identity", "mapper: explode", `map.field: missing: mapper explode needs the array field to explode`),
		c("mapper: identity", "mapper: identity\n  field: items", `map.field: is only for mapper: explode (the mapper is "identity")`),
		tc(func() tc {
			o, n := withSchema("items.avsc", "mapper: explode\n  field: nope")
			return c(o, n, `map.field: "nope" is not a field of the record order (fields: id, items)`)
		}()),
		tc(func() tc {
			o, n := withSchema("items.avsc", "mapper: explode\n  field: id")
			return c(o, n, `map.field: "id" is a long in order, not an array: explode takes an array field`)
		}()),
		c("mapper: identity", "mapper: identity\n  derive: [a]", `map.derive: want a mapping of column names to expressions`),
		c("mapper: identity", "mapper: identity\n  derive: {x: 'a +'}", `map.derive.x: "a +": unexpected token EOF`),
		c("mapper: identity", "mapper: identity\n  derive: {x: ''}", `map.derive.x: no expression`),
		c("mapper: identity", "mapper: identity\n  derive: {a-b: '1'}", `map.derive.a-b: "a-b" is not a column name`),
		c("mapper: identity", "mapper: identity\n  derive: {x: {expr: a, type: number}}", `map.derive.x.type: "number" is not one of string, long`),
		c("mapper: identity", "mapper: identity\n  derive: {x: {exp: a}}", `map.derive.x.exp: unknown key (known here: expr, type)`),
		c("mapper: identity", "mapper: identity\n  derive: {x: [a]}", `map.derive.x: want an expression or {expr: ..., type: ...}`),
		tc(func() tc {
			o, n := withSchema("pv.avsc", "mapper: identity\n  derive: {id: 'ts * 2'}")
			return c(o, n, `map.derive.id: the rows of pv have a field id already`)
		}()),
		tc(func() tc {
			o, n := withSchema("pv.avsc", "mapper: identity\n  derive: {x: 'page + 1'}")
			return c(o, n, `map.derive.x: "page + 1" over the fields of pv: invalid operation: + (mismatched types string and int)`)
		}()),
		tc(func() tc {
			o, n := withSchema("pv.avsc", "mapper: identity\n  derive: {x: 'nope'}")
			return c(o, n, `map.derive.x: the type of "nope" cannot be told from the fields of pv: declare it`)
		}()),
		c("on_bad_record: fail", "on_bad_record: true", `on_bad_record: "true" is not one of`),
		c("by: hour", "by: [hour]", `partition.by: want a single value`),
		c("time_field: ts", "time_field: a..b", `partition.time_field: "a..b"`),
		c("timezone: UTC", "timezone: ../../etc/passwd", `partition.timezone: "../../etc/passwd" is not a known time zone`),
		c("timezone: UTC", "timezone: UTC\n  time_range: [1970, 9999]", `partition.time_range`),
		c("timezone: UTC", "timezone: UTC\n  time_range: {min: \"1970-01-01\"}", `partition.time_range.min: "1970-01-01" is not an RFC 3339 time`),
		c("timezone: UTC", "timezone: UTC\n  time_range: {max: \"tomorrow\"}", `partition.time_range.max: "tomorrow" is not an RFC 3339 time`),
		c("uri: file:///var/warehouse/pageviews", "uri: /", `output.uri: "/" is the root`),
		c("uri: file:///var/warehouse/pageviews", "uri: file:///", `output.uri: "file:///" is the root`),
		c("uri: file:///var/warehouse/pageviews", "uri: file://", `output.uri: "file://" names no directory`),
		c("uri: file:///var/warehouse/pageviews", "uri: file:///var/../", `output.uri: "file:///var/../" is the root`),
		c("uri: file:///var/warehouse/pageviews", "uri: ../../../../../../../../../../../..", `is the root`),
		c("uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020/", `output.uri: "hdfs://nn:8020/" is the root`),
		c("uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020", `output.uri: "hdfs://nn:8020" names no directory`),
		c("uri: file:///var/warehouse/pageviews", "uri: /etc", `output.uri: "/etc" is a system directory`),
		c("uri: file:///var/warehouse/pageviews", "uri: file:///proc/self/x", `output.uri: "file:///proc/self/x" is below /proc`),
		c("uri: file:///var/warehouse/pageviews", "uri: file://otherhost/x", `output.uri: "file://otherhost/x": a file URI has no host`),
		c("uri: file:///var/warehouse/pageviews", "uri: file:x/y", `output.uri: "file:x/y": the path must be absolute`),
		c("uri: file:///var/warehouse/pageviews", "uri: file:///var/w?x=1", `output.uri: "file:///var/w?x=1" has a query or fragment`),
		c("format: parquet", "format: 1", `output.format: "1" is not one of`),
		c("compression: zstd", "compression: brotli", `output.compression: "brotli" is not available`),
		c("metadata_columns: true", "metadata_columns: maybe", `output.metadata_columns: "maybe" is not true or false`),
		c("metadata_columns: true", "metadata_columns: true\n  max_file_records: 2.5", `output.max_file_records: "2.5" is not a whole number`),
		c("metadata_columns: true", "metadata_columns: true\n  max_file_records: -1", `output.max_file_records: -1: must be positive`),
		c("metadata_columns: true", "metadata_columns: true\n  kerberos: {keytab: loader.keytab}", `output.kerberos: only for an hdfs:// output.uri`),
		c("uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020/w\n  kerberos: {principal: loader@EXAMPLE.COM}", `output.kerberos.keytab: missing`),
		c("uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020/w\n  kerberos: {principal: loader@, keytab: k}", `output.kerberos.principal: "loader@" is not name[/instance][@REALM]`),
		c("uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020/w\n  kerberos: {principal: [a], keytab: k}", `output.kerberos.principal: want a single value`),
		c("uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020/w\n  kerberos: {keytab: k, password: x}", `output.kerberos`),
		c(`schedule: "@hourly"`, `schedule: "0 0 30 2 *"`, `schedule: "0 0 30 2 *" never fires (February 30 does not exist)`),
		c(`schedule: "@hourly"`, `schedule: "@every 0s"`, `schedule: "@every 0s" never fires`),
		c(`schedule: "@hourly"`, "schedule: [a]", `schedule: want a single value`),
		c(`schedule: "@hourly"`, "retry: 3", `retry: want a mapping of keys`),
		c(`schedule: "@hourly"`, "retry: {max_attempts: 1.5}", `retry.max_attempts: "1.5" is not a whole number`),
		c(`schedule: "@hourly"`, "retry: {max_attempts: 1000000}", `retry.max_attempts: 1000000: must be 1 to 100`),
		c(`schedule: "@hourly"`, "retry: {backoff: 5}", `retry.backoff: "5" is not a duration`),
		c(`schedule: "@hourly"`, "retry: {backoff: 100000h}", `retry.backoff: "100000h" is longer than 24h0m0s`),
		c(`schedule: "@hourly"`, "retry: {max_backoff: -1s}", `retry.max_backoff: "-1s" is not a duration`),
		c(`schedule: "@hourly"`, "retry: {backoff: 10s, max_backoff: 1s}", `retry.max_backoff: "1s" is shorter than retry.backoff "10s"`),
		c(`schedule: "@hourly"`, "allowed_lateness: 87600h", `allowed_lateness: "87600h" is longer than 720h0m0s`),
		c(`schedule: "@hourly"`, "allowed_lateness: 1.5", `allowed_lateness: "1.5" is not a duration`),
		c(`schedule: "@hourly"`, "complete_when: balanced", `complete_when: "balanced": want loaded (the default) or audit`),
	}
	named := map[string]bool{}
	for _, c := range cases {
		text := strings.Replace(goodSpec, c.old, c.new, 1)
		if text == goodSpec {
			t.Fatalf("case %q does not change the spec", c.new)
		}
		_, err := ParseSpec([]byte(text), dir)
		if err == nil {
			t.Errorf("%q accepted", c.new)
			continue
		}
		if msg := err.Error(); !errors.Is(err, ErrSpec) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") || strings.Contains(msg, "topsecret") {
			t.Errorf("%q: error %q, want one line without the file's content containing %q", c.new, msg, c.want)
		}
		named[strings.FieldsFunc(c.want, func(r rune) bool { return r == ':' || r == '[' || r == ' ' })[0]] = true
	}
	for _, key := range specKeys(reflect.TypeOf(Spec{}), "") {
		if strings.Contains(key, ".") || named[key] {
			continue
		}
		_, err := ParseSpec([]byte("name: j\n"+key+": [5]\n"), dir)
		if err == nil || !strings.Contains(err.Error(), key+": want") || !errors.Is(err, ErrSpec) {
			t.Errorf("%s: [5]: %v, want an error naming %s", key, err, key)
			continue
		}
		named[key] = true
	}
	for _, key := range specKeys(reflect.TypeOf(Spec{}), "") {
		if !named[key] {
			t.Errorf("the spec's key %s has no case here: add a bad value and the error naming it", key)
		}
	}
}

// Right values next to the refused ones stay accepted.
func TestSpecAcceptsNearMisses(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pv.avsc"), []byte(`{"type": "record", "name": "pv", "fields": [{"name": "id", "type": "long"}, {"name": "page", "type": "string"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := "schema_file: pv.avsc\nmap:\n  mapper: select\n  select: "
	for _, c := range []struct{ old, new string }{
		{"registry: http://127.0.0.1:8081\nmap:\n  mapper: identity", schema + "{rename: {id: page, page: id}}"}, // a swap
		{"registry: http://127.0.0.1:8081\nmap:\n  mapper: identity", schema + "{keep: [page], rename: {page: url}}"},
		{"bootstrap: [127.0.0.1:9092]", "bootstrap: \"[::1]:9092, kafka-1:65535\""},
		{"metadata_columns: true", "metadata_columns: yes"},
		{"max_records_per_task: 1000000", "max_records_per_task: 1_000"},
		{"uri: file:///var/warehouse/pageviews", "uri: /tmp/warehouse"},
		{"uri: file:///var/warehouse/pageviews", "uri: hdfs://nn:8020/warehouse"},
		{"uri: file:///var/warehouse/pageviews", "uri: warehouse/pv"},
		{`schedule: "@hourly"`, `schedule: "CRON_TZ=Europe/Paris */5 * * * *"`},
		{`schedule: "@hourly"`, "retry: {max_attempts: 100, backoff: 24h, max_backoff: 24h}\nallowed_lateness: 720h"},
	} {
		text := strings.Replace(goodSpec, c.old, c.new, 1)
		if text == goodSpec {
			t.Fatalf("case %q does not change the spec", c.new)
		}
		if _, err := ParseSpec([]byte(text), dir); err != nil {
			t.Errorf("%q refused: %v", c.new, err)
		}
	}
}

// specKeys lists the spec's keys by path, the leaves and map.select's own.
func specKeys(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, prefix+tag)
			out = append(out, specKeys(ft, prefix+tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}
