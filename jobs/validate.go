package jobs

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// checkValue refuses a value whose YAML kind does not fit its key, naming
// the key: the decoder would take 1.5 as 1 and 1e3 as 1000 for an integer,
// and report a list given for a string without the key.
func checkValue(k, v *yaml.Node, t reflect.Type, path string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s%s: %s", ErrSpec, k.Line, path, k.Value, fmt.Sprintf(format, args...))
	}
	if v.ShortTag() == "!!null" {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch {
		case v.Kind != yaml.ScalarNode:
			return bad("want a whole number")
		case v.ShortTag() == "!!int":
			return nil
		case v.ShortTag() == "!!float" && strings.Trim(v.Value, "+-0123456789_") == "":
			return bad("%s is too large", v.Value)
		}
		return bad("%q is not a whole number", v.Value)
	case reflect.Bool:
		switch {
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		case v.Kind == yaml.ScalarNode && strings.Contains(" y yes on n no off ", " "+strings.ToLower(v.Value)+" "): // YAML 1.1 words the decoder takes
		default:
			return bad("%q is not true or false", v.Value)
		}
	case reflect.String:
		if v.Kind != yaml.ScalarNode {
			return bad("want a single value, not a list or a mapping")
		}
	case reflect.Struct, reflect.Map:
		if t != reflect.TypeOf(StringList{}) && v.Kind != yaml.MappingNode {
			return bad("want a mapping of keys")
		}
	case reflect.Slice:
		if t == reflect.TypeOf(Derive{}) {
			if v.Kind != yaml.MappingNode {
				return bad("want a mapping of column names to expressions")
			}
			return nil
		}
		if t == reflect.TypeOf(StringList{}) && v.Kind == yaml.MappingNode {
			return bad("want a list of strings (or one comma-separated string)")
		}
		if t != reflect.TypeOf(StringList{}) && v.Kind != yaml.SequenceNode {
			return bad("want a list")
		}
	}
	return nil
}

// validateTimeField refuses a partition.time_field path with an empty part
// ("a..b", ".a").
func (s *Spec) validateTimeField(bad badFunc) error {
	f := s.Partition.TimeField
	if f == "@timestamp" {
		return nil
	}
	for _, part := range strings.Split(f, ".") {
		if strings.TrimSpace(part) == "" {
			return bad("partition.time_field", "%q: give @timestamp or a field path such as ts or meta.ts", f)
		}
	}
	return nil
}

// systemDirs are the top-level directories of a Unix system: an output is a
// directory of its own below one of them, never one of them.
var systemDirs = map[string]bool{"bin": true, "boot": true, "dev": true, "etc": true, "home": true, "lib": true,
	"lib32": true, "lib64": true, "media": true, "mnt": true, "opt": true, "proc": true, "root": true, "run": true,
	"sbin": true, "srv": true, "sys": true, "tmp": true, "usr": true, "var": true}

// virtualDirs hold kernel file systems: nothing is written below them.
var virtualDirs = map[string]bool{"dev": true, "proc": true, "sys": true}

// checkOutputDir refuses an output.uri that is not a directory below the
// root: the root itself ("/", "file:///", "hdfs://nn:8020/"), a top-level
// system directory, anything below /proc, /sys or /dev, a file URI with a
// host, and a query or fragment (which would be ignored). resolved is the
// URI with a relative path resolved against the spec's directory.
func checkOutputDir(raw string, u *url.URL, resolved string) error {
	var p string
	switch u.Scheme {
	case "":
		p = filepath.ToSlash(resolved)
	case "file", "hdfs":
		if u.Scheme == "file" && u.Host != "" && u.Host != "localhost" {
			return fmt.Errorf("%q: a file URI has no host (file:///abs/dir)", raw)
		}
		if u.Opaque != "" || (u.Path != "" && !strings.HasPrefix(u.Path, "/")) {
			return fmt.Errorf("%q: the path must be absolute (%s:///abs/dir)", raw, u.Scheme)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return fmt.Errorf("%q has a query or fragment; an output is a directory", raw)
		}
		p = u.Path
	}
	if p == "" {
		return fmt.Errorf("%q names no directory", raw)
	}
	p = path.Clean(p)
	if !path.IsAbs(p) { // a relative path with no spec directory: checked where it is used
		return nil
	}
	top, _, hasBelow := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	switch {
	case p == "/":
		return fmt.Errorf("%q is the root: give a directory below it (file:///var/warehouse/topic)", raw)
	case u.Scheme != "hdfs" && virtualDirs[top]:
		return fmt.Errorf("%q is below /%s, a kernel file system", raw, top)
	case u.Scheme != "hdfs" && !hasBelow && systemDirs[top]:
		return fmt.Errorf("%q is a system directory: give a directory of its own below it", raw)
	}
	return nil
}
