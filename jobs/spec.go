package jobs

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/internal/topicname"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// ErrSpec is wrapped by every error a job spec's content causes.
var ErrSpec = errors.New("jobs: bad job spec")

// Spec is a load job, as written in its YAML file. See the README's job-spec
// reference; every key below is part of the contract.
type Spec struct {
	// Name is unique per output and names the checkpoint history.
	Name        string    `yaml:"name"`
	Source      Source    `yaml:"source"`
	Decode      Decode    `yaml:"decode"`
	Map         Map       `yaml:"map"`
	OnBadRecord string    `yaml:"on_bad_record"`
	Partition   Partition `yaml:"partition"`
	Output      Output    `yaml:"output"`
	// Schedule is a cron expression the scheduler uses ("@hourly", "0 * * * *").
	Schedule string `yaml:"schedule"`
	// Retry is how the scheduler retries a failed task (see scheduling.go).
	Retry Retry `yaml:"retry"`
	// AllowedLateness is how long after a time directory's end its records
	// may still arrive; the scheduler writes _SUCCESS only after it ("10m").
	AllowedLateness string `yaml:"allowed_lateness"`
	// CompleteWhen is when the scheduler marks a time directory complete:
	// "loaded" (the default: every partition's loaded position passed its
	// end plus the lateness) or "audit" (that, and the directory's loaded
	// count equals the producer tier's count in _audit; see
	// scheduler/complete.go). It does not change what a run writes.
	CompleteWhen string `yaml:"complete_when" json:"-"`
	// Compact is when and how the scheduler compacts small files
	// (compact_spec.go; `sluice compact`).
	Compact Compact `yaml:"compact" json:"-"`

	// dir is the directory of the spec file: relative paths start there.
	dir string
	// minInterval is the schedule's floor (SpecOptions.MinScheduleInterval).
	minInterval time.Duration
}

// Source says what to read.
type Source struct {
	// Bootstrap lists HOST:PORT of any Kafka-protocol cluster (a YAML list or
	// one comma-separated string). Default 127.0.0.1:9092.
	Bootstrap StringList `yaml:"bootstrap"`
	Topics    StringList `yaml:"topics"`
	// Start is where a job with no checkpoint starts: earliest | latest.
	Start string `yaml:"start"`
	// OnOffsetOutOfRange: fail | skip, when the checkpoint lies below the
	// log start offset (retention deleted records not yet loaded).
	OnOffsetOutOfRange string `yaml:"on_offset_out_of_range"`
	// OnTopicRecreated: fail | restart, when a topic was deleted and
	// created again under its name since the job loaded it (see identity.go).
	OnTopicRecreated string `yaml:"on_topic_recreated"`
	// MaxRecordsPerTask bounds the offsets of one split (default 1,000,000).
	MaxRecordsPerTask int64 `yaml:"max_records_per_task"`
	// Isolation: read_committed (default: aborted transactions are skipped
	// and planning stops at the last stable offset) | read_uncommitted.
	Isolation string `yaml:"isolation"`
	// Security is how the loader authenticates to and encrypts its
	// connections with the cluster (see security.go). It does not change
	// what a run writes, so it is left out of SpecFingerprint.
	Security Security `yaml:"security" json:"-"`
}

// Decode says how record values are decoded.
type Decode struct {
	// Format: avro | protobuf | json | string | bytes.
	Format string `yaml:"format"`
	// Registry is a Confluent-compatible schema registry URL: values framed
	// 0x00 + 4-byte schema id, then Avro binary (avro), the message indexes
	// and a Protobuf message (protobuf), or a JSON document valid under a
	// JSON Schema (json).
	Registry string `yaml:"registry"`
	// RegistryAuth authenticates to the registry (basic auth, a CA for
	// https, a client certificate); see security.go. Not in the
	// fingerprint: it does not change what a run writes.
	RegistryAuth RegistryAuth `yaml:"registry_auth" json:"-"`
	// SchemaFile is an Avro schema (.avsc): the fixed schema of unframed Avro
	// values, or the types of JSON values. Relative to the spec's directory.
	SchemaFile string `yaml:"schema_file"`
	// InferSample is how many JSON records type a JSON job with no
	// schema_file (default 100); the inferred schema is then held.
	InferSample int `yaml:"infer_sample"`
}

// Map says how decoded records become rows.
type Map struct {
	// Mapper names a registered mapper (default identity).
	Mapper string `yaml:"mapper"`
	// Where is an optional filter expression over a row's fields.
	Where string `yaml:"where"`
	// Select keeps and renames fields (the select mapper).
	Select *Select `yaml:"select"`
	// Options are handed to a custom mapper as they are.
	Options map[string]any `yaml:"options"`
	// Field is the array field the explode mapper makes one row per
	// element of.
	Field string `yaml:"field" json:",omitempty"`
	// Derive adds computed columns to every row the mapper emits.
	Derive Derive `yaml:"derive" json:",omitempty"`
}

// Select configures the select mapper: Keep lists the fields kept (in
// order; empty keeps all), Rename maps old names to new ones.
type Select struct {
	Keep   []string          `yaml:"keep"`
	Rename map[string]string `yaml:"rename"`
}

// Partition says how rows are placed in Hive-style directories.
type Partition struct {
	By        string `yaml:"by"`         // hour | day | none
	TimeField string `yaml:"time_field"` // a record field or "@timestamp"
	Timezone  string `yaml:"timezone"`
	// TimeRange bounds a record's partition time and its log timestamp in
	// the _timestamp column; a record outside is a bad record.
	TimeRange TimeRange `yaml:"time_range"`
}

// TimeRange is partition.time_range: RFC 3339 times, min <= t <= max
// (default: the years 1970 through 9999).
type TimeRange struct {
	Min string `yaml:"min"`
	Max string `yaml:"max"`
}

// Default bounds of partition.time_range.
const (
	DefaultMinTime = "1970-01-01T00:00:00Z"
	DefaultMaxTime = "9999-12-31T23:59:59.999999999Z"
)

// timeRange parses partition.time_range.
func (p Partition) timeRange() (writers.TimeRange, error) {
	var r writers.TimeRange
	var err error
	if r.Min, err = time.Parse(time.RFC3339Nano, p.TimeRange.Min); err != nil {
		return r, fmt.Errorf("%w: partition.time_range.min: %q is not an RFC 3339 time (such as %s)", ErrSpec, p.TimeRange.Min, DefaultMinTime)
	}
	if r.Max, err = time.Parse(time.RFC3339Nano, p.TimeRange.Max); err != nil {
		return r, fmt.Errorf("%w: partition.time_range.max: %q is not an RFC 3339 time (such as %s)", ErrSpec, p.TimeRange.Max, DefaultMaxTime)
	}
	if !r.Min.Before(r.Max) {
		return r, fmt.Errorf("%w: partition.time_range: min %s is not before max %s", ErrSpec, p.TimeRange.Min, p.TimeRange.Max)
	}
	return r, nil
}

// Output says where and how files are written.
type Output struct {
	URI             string `yaml:"uri"`
	Format          string `yaml:"format"`      // parquet | avro | jsonl
	Compression     string `yaml:"compression"` // per format; default zstd (jsonl: none)
	MetadataColumns bool   `yaml:"metadata_columns"`
	// MaxFileRecords rotates a file after this many records (0: one file per
	// partition directory per task).
	MaxFileRecords int64 `yaml:"max_file_records"`
	// Kerberos logs in to a Kerberized HDFS (hdfs:// only; see
	// OutputKerberos).
	Kerberos *OutputKerberos `yaml:"kerberos"`
}

// OutputKerberos is output.kerberos: the principal and keytab an hdfs://
// output logs in with (the keytab relative to the spec's directory; the
// principal defaults to the keytab's first). Without it, a cluster whose
// HADOOP_CONF_DIR says hadoop.security.authentication=kerberos is reached
// with KRB5_CLIENT_KTNAME or the ticket cache (KRB5CCNAME).
type OutputKerberos struct {
	Principal string `yaml:"principal"`
	Keytab    string `yaml:"keytab"`
}

// HDFSOptions are the options of the job's hdfs:// output
// (output.kerberos).
func (s *Spec) HDFSOptions() filesystem.HDFSOptions {
	var o filesystem.HDFSOptions
	if k := s.Output.Kerberos; k != nil {
		o.Kerberos.Principal = k.Principal
		o.Kerberos.Keytab = k.Keytab
		if k.Keytab != "" && !filepath.IsAbs(k.Keytab) && s.dir != "" {
			o.Kerberos.Keytab = filepath.Join(s.dir, k.Keytab)
		}
	}
	return o
}

// StringList is a YAML list of strings that also accepts one
// comma-separated string.
type StringList []string

// UnmarshalYAML accepts a sequence or a scalar.
func (l *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = nil
		for _, s := range strings.Split(n.Value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*l = append(*l, s)
			}
		}
		return nil
	case yaml.SequenceNode:
		var out []string
		if err := n.Decode(&out); err != nil {
			return err
		}
		*l = out
		return nil
	}
	return fmt.Errorf("line %d: want a list of strings", n.Line)
}

// Policies and enumerations of the spec.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"

	OutOfRangeFail = "fail"
	OutOfRangeSkip = "skip"

	TopicRecreatedFail    = "fail"
	TopicRecreatedRestart = "restart"

	BadRecordFail       = "fail"
	BadRecordSkip       = "skip"
	BadRecordDeadLetter = "dead-letter"

	ReadCommitted   = "read_committed"
	ReadUncommitted = "read_uncommitted"

	DefaultMaxRecordsPerTask = 1_000_000
	defaultInferSample       = 100

	maxRecordsPerTask = 1 << 40 // offsets of one split: beyond any partition's log
	maxInferSample    = 10_000  // JSON objects held to infer a schema
)

// LoadSpec reads, defaults and validates a job spec file.
func LoadSpec(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jobs: reading job spec: %w", err)
	}
	s, err := ParseSpec(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseSpec parses, defaults and validates a job spec; dir is where
// relative paths (schema_file, a relative output uri) start.
func ParseSpec(b []byte, dir string) (*Spec, error) { return ParseSpecWith(b, dir, SpecOptions{}) }

// ParseSpecWith is ParseSpec under the operator's options.
func ParseSpecWith(b []byte, dir string, o SpecOptions) (*Spec, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%w: the file is empty", ErrSpec)
	}
	if err := checkKeys(root.Content[0], reflect.TypeOf(Spec{}), ""); err != nil {
		return nil, err
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrSpec, strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n  "), "\n  ", "; "))
	}
	s.dir, s.minInterval = dir, o.MinScheduleInterval
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// checkKeys rejects keys the spec does not know, naming them by path, and
// lists the known ones.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode || t == reflect.TypeOf(StringList{}) {
		return nil
	}
	known := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		known[tag] = f.Type
		names = append(names, tag)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ft, ok := known[k.Value]
		if !ok {
			return fmt.Errorf("%w: line %d: %s%s: unknown key (known here: %s)", ErrSpec, k.Line, path, k.Value, strings.Join(names, ", "))
		}
		if err := checkValue(k, v, ft, path); err != nil {
			return err
		}
		if err := checkKeys(v, ft, path+k.Value+"."); err != nil {
			return err
		}
	}
	return nil
}

func (s *Spec) applyDefaults() {
	if len(s.Source.Bootstrap) == 0 {
		s.Source.Bootstrap = StringList{kafka.DefaultBootstrap}
	}
	def := func(p *string, v string) {
		if strings.TrimSpace(*p) == "" {
			*p = v
		}
	}
	def(&s.Source.Start, StartEarliest)
	def(&s.Source.OnOffsetOutOfRange, OutOfRangeFail)
	def(&s.Source.OnTopicRecreated, TopicRecreatedFail)
	def(&s.Source.Isolation, ReadCommitted)
	if s.Source.MaxRecordsPerTask == 0 {
		s.Source.MaxRecordsPerTask = DefaultMaxRecordsPerTask
	}
	if s.Decode.InferSample == 0 {
		s.Decode.InferSample = defaultInferSample
	}
	def(&s.Map.Mapper, "identity")
	def(&s.OnBadRecord, BadRecordFail)
	def(&s.Partition.By, "hour")
	def(&s.Partition.TimeField, "@timestamp")
	def(&s.Partition.Timezone, "UTC")
	def(&s.Partition.TimeRange.Min, DefaultMinTime)
	def(&s.Partition.TimeRange.Max, DefaultMaxTime)
	def(&s.Output.Format, "parquet")
	if s.Output.Compression == "" && s.Output.Format != "jsonl" {
		s.Output.Compression = "zstd"
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Validate checks every field and returns the first problem, naming the
// field: `output.format: "parquett" is not one of parquet, avro, jsonl`.
func (s *Spec) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSpec, field, fmt.Sprintf(format, args...))
	}
	oneOf := func(field, v string, allowed ...string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return bad(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	if s.Name == "" {
		return bad("name", "missing: every job needs a unique name (it names the checkpoint history)")
	}
	if !nameRE.MatchString(s.Name) {
		return bad("name", "%q: use letters, digits, '.', '_' and '-' (at most 128, not starting with a punctuation mark)", s.Name)
	}
	for i, b := range s.Source.Bootstrap {
		if err := kafka.CheckAddress(b); err != nil {
			return bad(fmt.Sprintf("source.bootstrap[%d]", i), "%v", err)
		}
	}
	if len(s.Source.Topics) == 0 {
		return bad("source.topics", "missing: list at least one topic")
	}
	seen := map[string]bool{}
	for i, t := range s.Source.Topics {
		if topicname.Check(t) != nil {
			return bad(fmt.Sprintf("source.topics[%d]", i), "%q is not a Kafka topic name: use %s", t, topicname.Rule)
		}
		if seen[t] {
			return bad(fmt.Sprintf("source.topics[%d]", i), "%q is listed twice", t)
		}
		seen[t] = true
	}
	if err := oneOf("source.start", s.Source.Start, StartEarliest, StartLatest); err != nil {
		return err
	}
	if err := oneOf("source.on_offset_out_of_range", s.Source.OnOffsetOutOfRange, OutOfRangeFail, OutOfRangeSkip); err != nil {
		return err
	}
	if err := oneOf("source.on_topic_recreated", s.Source.OnTopicRecreated, TopicRecreatedFail, TopicRecreatedRestart); err != nil {
		return err
	}
	if err := oneOf("source.isolation", s.Source.Isolation, ReadCommitted, ReadUncommitted); err != nil {
		return err
	}
	if s.Source.MaxRecordsPerTask < 0 || s.Source.MaxRecordsPerTask > maxRecordsPerTask {
		return bad("source.max_records_per_task", "%d: must be 1 to %d", s.Source.MaxRecordsPerTask, int64(maxRecordsPerTask))
	}
	if err := s.validateSecurity(); err != nil {
		return err
	}
	if err := s.validateRegistryAuth(); err != nil {
		return err
	}
	if err := s.validateDecode(bad, oneOf); err != nil {
		return err
	}
	if err := oneOf("on_bad_record", s.OnBadRecord, BadRecordFail, BadRecordSkip, BadRecordDeadLetter); err != nil {
		return err
	}
	if err := s.validateMap(bad); err != nil {
		return err
	}
	if err := oneOf("partition.by", s.Partition.By, "hour", "day", "none"); err != nil {
		return err
	}
	if _, err := time.LoadLocation(s.Partition.Timezone); err != nil {
		return bad("partition.timezone", "%q is not a known time zone (use an IANA name such as UTC or Europe/Paris)", s.Partition.Timezone)
	}
	if err := s.validateTimeField(bad); err != nil {
		return err
	}
	if _, err := s.Partition.timeRange(); err != nil {
		return err
	}
	if err := s.validateScheduling(bad); err != nil {
		return err
	}
	if err := s.validateCompact(bad); err != nil {
		return err
	}
	return s.validateOutput(bad, oneOf)
}

type badFunc func(field, format string, args ...any) error
type oneOfFunc func(field, v string, allowed ...string) error

func (s *Spec) validateDecode(bad badFunc, oneOf oneOfFunc) error {
	d := s.Decode
	if d.Format == "" {
		return bad("decode.format", "missing: use avro, protobuf, json, string or bytes")
	}
	if err := oneOf("decode.format", d.Format, "avro", "protobuf", "json", "string", "bytes"); err != nil {
		return err
	}
	switch d.Format {
	case "avro":
		if (d.Registry == "") == (d.SchemaFile == "") {
			return bad("decode", "avro needs exactly one of registry (Confluent-framed values) or schema_file")
		}
	case "protobuf":
		if d.Registry == "" || d.SchemaFile != "" {
			return bad("decode", "protobuf needs registry (Confluent-framed values) and no schema_file")
		}
	case "json":
		if d.Registry != "" && d.SchemaFile != "" {
			return bad("decode", "json takes registry (Confluent-framed JSON Schema values) or schema_file (an Avro schema typing plain JSON), not both")
		}
	default:
		if d.Registry != "" || d.SchemaFile != "" {
			return bad("decode", "%s values take neither registry nor schema_file", d.Format)
		}
	}
	if d.Registry != "" {
		u, err := url.Parse(d.Registry)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("decode.registry", "%q is not an http(s) URL", d.Registry)
		}
	}
	if d.SchemaFile != "" {
		if _, err := readSchemaFile(s.SchemaPath()); err != nil {
			return err
		}
	}
	if d.InferSample < 0 || d.InferSample > maxInferSample {
		return bad("decode.infer_sample", "%d: must be 1 to %d (the sample is held in memory)", d.InferSample, maxInferSample)
	}
	return nil
}

// builtinMapper reports whether name is one of the mappers of this package.
func builtinMapper(name string) bool {
	switch name {
	case "identity", "where", "select", "explode":
		return true
	}
	return false
}

func (s *Spec) validateMap(bad badFunc) error {
	if _, ok := lookupMapper(s.Map.Mapper); !ok {
		return bad("map.mapper", "%q is not a registered mapper (known: %s)", s.Map.Mapper, strings.Join(MapperNames(), ", "))
	}
	if s.Map.Select != nil && s.Map.Mapper != "select" {
		return bad("map.select", "is only for mapper: select (the mapper is %q)", s.Map.Mapper)
	}
	if s.Map.Field != "" && s.Map.Mapper != "explode" {
		return bad("map.field", "is only for mapper: explode (the mapper is %q)", s.Map.Mapper)
	}
	if s.Map.Mapper == "explode" {
		m, err := newExplode(MapperConfig{Field: s.Map.Field})
		if err != nil {
			return err
		}
		if s.Decode.SchemaFile != "" { // the schema is known: check the field now
			schema, err := readSchemaFile(s.SchemaPath())
			if err != nil {
				return err
			}
			if _, err := m.Schema(schema); err != nil {
				return err
			}
		}
	}
	if s.Map.Mapper == "select" && s.Map.Select == nil {
		return bad("map.select", "missing: mapper select needs keep and/or rename")
	}
	if s.Map.Mapper == "select" {
		m, err := newSelectMapper(MapperConfig{Select: s.Map.Select})
		if err != nil {
			return err
		}
		if s.Decode.SchemaFile != "" { // the schema is known: check the mapping against it now
			schema, err := readSchemaFile(s.SchemaPath())
			if err != nil {
				return err
			}
			if _, err := m.Schema(schema); err != nil {
				return err
			}
		}
	}
	cols, err := compileDerive(s.Map.Derive)
	if err != nil {
		return err
	}
	if len(cols) > 0 && s.Decode.SchemaFile != "" && builtinMapper(s.Map.Mapper) { // the rows' schema is known: type the columns now
		schema, err := readSchemaFile(s.SchemaPath())
		if err != nil {
			return err
		}
		f, _ := lookupMapper(s.Map.Mapper)
		m, err := f(MapperConfig{Select: s.Map.Select, Field: s.Map.Field})
		if err != nil {
			return err
		}
		if _, err := withDerive(m, cols).Schema(schema); err != nil {
			return err
		}
	}
	if s.Map.Where != "" {
		if _, err := compileWhere(s.Map.Where); err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n")
			return bad("map.where", "%q: %s", s.Map.Where, first)
		}
	}
	return nil
}

func (s *Spec) validateOutput(bad badFunc, oneOf oneOfFunc) error {
	o := s.Output
	if o.URI == "" {
		return bad("output.uri", "missing: use file:///abs/dir or hdfs://host:port/dir")
	}
	u, err := url.Parse(o.URI)
	if err != nil {
		return bad("output.uri", "%q: %v", o.URI, err)
	}
	switch u.Scheme {
	case "", "file", "hdfs":
	default:
		return bad("output.uri", "scheme %q is not file or hdfs", u.Scheme)
	}
	if u.Scheme == "hdfs" && u.Host == "" {
		return bad("output.uri", "%q names no NameNode (hdfs://host:port/dir)", o.URI)
	}
	if err := checkOutputDir(o.URI, u, s.OutputURI()); err != nil {
		return bad("output.uri", "%v", err)
	}
	if err := oneOf("output.format", o.Format, "parquet", "avro", "jsonl"); err != nil {
		return err
	}
	fo := format.Options{Kind: format.Kind(o.Format), Compression: o.Compression}
	if err := fo.Validate(); err != nil {
		return bad("output.compression", "%q is not available for %s", o.Compression, o.Format)
	}
	if k := o.Kerberos; k != nil {
		if u.Scheme != "hdfs" {
			return bad("output.kerberos", "only for an hdfs:// output.uri")
		}
		if k.Keytab == "" {
			return bad("output.kerberos.keytab", "missing (a ticket cache needs no output.kerberos: set KRB5CCNAME)")
		}
		if p := k.Principal; p != "" {
			name, realm, hasRealm := strings.Cut(p, "@")
			if name == "" || (hasRealm && realm == "") || strings.ContainsAny(p, " \t\n") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
				return bad("output.kerberos.principal", "%q is not name[/instance][@REALM]", p)
			}
		}
	}
	if o.MaxFileRecords < 0 {
		return bad("output.max_file_records", "%d: must be positive (0: one file per directory per task)", o.MaxFileRecords)
	}
	if (o.Format == "parquet" || o.Format == "avro") && s.Decode.Format == "json" && s.Decode.SchemaFile == "" && s.Decode.InferSample == 0 {
		return bad("decode.schema_file", "parquet and avro output need a schema")
	}
	return nil
}

// SchemaPath returns decode.schema_file resolved against the spec's directory.
func (s *Spec) SchemaPath() string {
	if s.Decode.SchemaFile == "" || filepath.IsAbs(s.Decode.SchemaFile) {
		return s.Decode.SchemaFile
	}
	return filepath.Join(s.dir, s.Decode.SchemaFile)
}

// OutputURI returns output.uri with a relative local path resolved against
// the spec's directory.
func (s *Spec) OutputURI() string {
	u, err := url.Parse(s.Output.URI)
	if err == nil && u.Scheme == "" && !filepath.IsAbs(s.Output.URI) && s.dir != "" {
		return filepath.Join(s.dir, s.Output.URI)
	}
	return s.Output.URI
}

// Topics returns the source topics sorted.
func (s *Spec) Topics() []string {
	t := append([]string(nil), s.Source.Topics...)
	sort.Strings(t)
	return t
}
