package protoschema

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ErrUnsupported is wrapped by the refusal of a message the mapping cannot
// hold (a message that contains itself).
var ErrUnsupported = errors.New("protoschema: unsupported message")

// ErrValue is wrapped by the refusal of a decoded value the mapping cannot
// hold (a uint64 above 2^63-1).
var ErrValue = errors.New("protoschema: value out of range")

// AvroSchema is the Avro schema (as JSON) of the rows Row makes of md's
// messages. The mapping:
//
//	bool                          boolean
//	int32, sint32, sfixed32       int
//	uint32, int64, sint64,        long (a uint64 above 2^63-1 is refused)
//	  sfixed64, uint64, fixed*
//	float, double                 float, double
//	string, bytes                 string, bytes
//	enum                          string (the value's name; an unknown number as its digits)
//	message                       record (named by the message's full name), nullable
//	repeated T                    array of T
//	map<string, V>                map of V; other key types: array of record {key, value}
//	oneof member, optional,       ["null", T]: unset is null
//	  proto2 optional
//	proto3 singular scalar        T (unset is the zero value, as Protobuf reads it)
//	google.protobuf.Timestamp     long timestamp-micros, nullable
//	google.protobuf.Duration      long (microseconds), nullable
//	google.protobuf.*Value        the wrapped scalar, nullable
//	  (wrappers)
//	Struct, Value, ListValue,     string: the value as JSON (protojson); Any as
//	  Any, FieldMask, Empty         {"type_url": ..., "value": base64}
//
// A message that contains itself, directly or not, is refused.
func AvroSchema(md protoreflect.MessageDescriptor) (string, error) {
	b := &avroBuilder{defined: map[protoreflect.FullName]bool{}, open: map[protoreflect.FullName]bool{}}
	s, err := b.record(md)
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(s)
	return string(out), err
}

type avroBuilder struct {
	defined map[protoreflect.FullName]bool // records written in full once
	open    map[protoreflect.FullName]bool // records being written (recursion)
}

func (b *avroBuilder) record(md protoreflect.MessageDescriptor) (any, error) {
	name := md.FullName()
	if b.open[name] {
		return nil, fmt.Errorf("%w: message %s contains itself", ErrUnsupported, name)
	}
	if b.defined[name] {
		return string(name), nil
	}
	b.open[name] = true
	defer delete(b.open, name)
	fields := make([]any, 0, md.Fields().Len())
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		t, err := b.field(fd)
		if err != nil {
			return nil, err
		}
		f := map[string]any{"name": string(fd.Name()), "type": t}
		if u, ok := t.([]any); ok && u[0] == "null" {
			f["default"] = nil
		}
		fields = append(fields, f)
	}
	b.defined[name] = true
	return map[string]any{"type": "record", "name": string(name), "fields": fields}, nil
}

// field is the Avro type of a field.
func (b *avroBuilder) field(fd protoreflect.FieldDescriptor) (any, error) {
	switch {
	case fd.IsMap():
		v, err := b.elem(fd.MapValue())
		if err != nil {
			return nil, err
		}
		if fd.MapKey().Kind() == protoreflect.StringKind {
			return map[string]any{"type": "map", "values": v}, nil
		}
		k, _ := b.elem(fd.MapKey())
		entry := fd.Message().FullName()
		if b.defined[entry] {
			return map[string]any{"type": "array", "items": string(entry)}, nil
		}
		b.defined[entry] = true
		return map[string]any{"type": "array", "items": map[string]any{"type": "record", "name": string(entry), "fields": []any{
			map[string]any{"name": "key", "type": k}, map[string]any{"name": "value", "type": v}}}}, nil
	case fd.IsList():
		t, err := b.elem(fd)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": t}, nil
	}
	t, err := b.elem(fd)
	if err != nil {
		return nil, err
	}
	if fd.HasPresence() {
		return []any{"null", t}, nil
	}
	return t, nil
}

// elem is the Avro type of one value of a field.
func (b *avroBuilder) elem(fd protoreflect.FieldDescriptor) (any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return "boolean", nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "int", nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed64Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "long", nil
	case protoreflect.FloatKind:
		return "float", nil
	case protoreflect.DoubleKind:
		return "double", nil
	case protoreflect.StringKind, protoreflect.EnumKind:
		return "string", nil
	case protoreflect.BytesKind:
		return "bytes", nil
	}
	md := fd.Message()
	switch wellKnown(md.FullName()) {
	case wktTimestamp:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros"}, nil
	case wktDuration:
		return "long", nil
	case wktWrapper:
		return b.elem(md.Fields().ByName("value"))
	case wktJSON:
		return "string", nil
	}
	return b.record(md)
}

type wkt int

const (
	wktNone wkt = iota
	wktTimestamp
	wktDuration
	wktWrapper
	wktJSON
)

func wellKnown(name protoreflect.FullName) wkt {
	switch name {
	case "google.protobuf.Timestamp":
		return wktTimestamp
	case "google.protobuf.Duration":
		return wktDuration
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return wktWrapper
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
		"google.protobuf.Any", "google.protobuf.FieldMask", "google.protobuf.Empty":
		return wktJSON
	}
	return wktNone
}

// Row is a decoded message as a row of AvroSchema(m.Descriptor()): Go
// values as hamba/avro decodes them generically (int, int64, float32,
// float64, string, []byte, bool, time.Time, []any, map[string]any; nil for
// null).
func Row(m protoreflect.Message) (map[string]any, error) {
	md := m.Descriptor()
	out := make(map[string]any, md.Fields().Len())
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		v, err := fieldValue(m, fd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fd.Name(), err)
		}
		out[string(fd.Name())] = v
	}
	return out, nil
}

func fieldValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) (any, error) {
	switch {
	case fd.IsMap():
		mp := m.Get(fd).Map()
		keys := make([]protoreflect.MapKey, 0, mp.Len())
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { keys = append(keys, k); return true })
		if fd.MapKey().Kind() == protoreflect.StringKind {
			out := make(map[string]any, len(keys))
			for _, k := range keys {
				v, err := elemValue(fd.MapValue(), mp.Get(k))
				if err != nil {
					return nil, err
				}
				out[k.String()] = v
			}
			return out, nil
		}
		sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
		out := make([]any, 0, len(keys))
		for _, k := range keys {
			kv, err := elemValue(fd.MapKey(), k.Value())
			if err != nil {
				return nil, err
			}
			v, err := elemValue(fd.MapValue(), mp.Get(k))
			if err != nil {
				return nil, err
			}
			out = append(out, map[string]any{"key": kv, "value": v})
		}
		return out, nil
	case fd.IsList():
		l := m.Get(fd).List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			v, err := elemValue(fd, l.Get(i))
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	if fd.HasPresence() && !m.Has(fd) {
		return nil, nil
	}
	return elemValue(fd, m.Get(fd))
}

func lessKey(a, b protoreflect.MapKey) bool {
	switch x := a.Interface().(type) {
	case bool:
		return !x && b.Bool()
	case int32, int64:
		return a.Int() < b.Int()
	case uint32, uint64:
		return a.Uint() < b.Uint()
	}
	return a.String() < b.String()
}

func elemValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return int(v.Int()), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := v.Uint()
		if u > math.MaxInt64 {
			return nil, fmt.Errorf("%w: %d does not fit a long", ErrValue, u)
		}
		return int64(u), nil
	case protoreflect.FloatKind:
		return float32(v.Float()), nil
	case protoreflect.DoubleKind:
		return v.Float(), nil
	case protoreflect.StringKind:
		return v.String(), nil
	case protoreflect.BytesKind:
		return v.Bytes(), nil
	case protoreflect.EnumKind:
		n := v.Enum()
		if ev := fd.Enum().Values().ByNumber(n); ev != nil {
			return string(ev.Name()), nil
		}
		return strconv.Itoa(int(n)), nil
	}
	msg := v.Message()
	md := msg.Descriptor()
	switch wellKnown(md.FullName()) {
	case wktTimestamp:
		s, n := msg.Get(md.Fields().ByName("seconds")).Int(), msg.Get(md.Fields().ByName("nanos")).Int()
		return time.Unix(s, n).UTC(), nil
	case wktDuration:
		s, n := msg.Get(md.Fields().ByName("seconds")).Int(), msg.Get(md.Fields().ByName("nanos")).Int()
		if s > math.MaxInt64/1_000_000 || s < math.MinInt64/1_000_000 {
			return nil, fmt.Errorf("%w: a duration of %d s does not fit a long of microseconds", ErrValue, s)
		}
		return s*1_000_000 + n/1_000, nil
	case wktWrapper:
		f := md.Fields().ByName("value")
		return elemValue(f, msg.Get(f))
	case wktJSON:
		if md.FullName() == "google.protobuf.Any" {
			b, _ := json.Marshal(map[string]string{
				"type_url": msg.Get(md.Fields().ByName("type_url")).String(),
				"value":    base64.StdEncoding.EncodeToString(msg.Get(md.Fields().ByName("value")).Bytes()),
			})
			return string(b), nil
		}
		b, err := protojson.MarshalOptions{}.Marshal(msg.Interface())
		if err != nil {
			return nil, fmt.Errorf("%w: %s as JSON: %v", ErrValue, md.FullName(), err)
		}
		var compact json.RawMessage = b
		if c, err := json.Marshal(compact); err == nil {
			b = c
		}
		return string(b), nil
	}
	return Row(msg)
}
