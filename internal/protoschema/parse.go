package protoschema

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// ErrInvalid is wrapped by every error of a schema that does not parse or
// link, or that is over a bound.
var ErrInvalid = errors.New("protoschema: invalid schema")

// Bounds on one schema and its references.
const (
	// MaxSchemaBytes bounds the text of one schema (the registry's bound).
	MaxSchemaBytes = 512 << 10
	// MaxFiles bounds the files one schema imports, transitively.
	MaxFiles = 256
)

// mainFile is the path the schema itself is compiled under; an import of
// it from a reference would be a cycle and is refused by the compiler.
const mainFile = "sluice-schema.proto"

// Parse compiles a Confluent Protobuf schema: .proto source text, or the
// base64 of a serialized FileDescriptorProto (what Confluent's Python
// serializer registers). deps maps each import path to its schema, in
// either form (the registry's references, resolved transitively); the
// well-known types (google/protobuf/*.proto) need no reference.
// Nothing is read from disk or the network.
func Parse(ctx context.Context, text string, deps map[string]string) (protoreflect.FileDescriptor, error) {
	if len(text) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(text), MaxSchemaBytes)
	}
	if len(deps) > MaxFiles {
		return nil, fmt.Errorf("%w: %d referenced files, more than %d", ErrInvalid, len(deps), MaxFiles)
	}
	files := make(map[string]string, len(deps)+1)
	for name, t := range deps {
		files[name] = t
	}
	files[mainFile] = text
	resolver := protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		t, ok := files[path]
		if !ok {
			return protocompile.SearchResult{}, fmt.Errorf("import %q is neither a reference of the schema nor a well-known type", path)
		}
		if fd := descriptorOf(t); fd != nil {
			fd.Name = proto.String(path)
			return protocompile.SearchResult{Proto: fd}, nil
		}
		return protocompile.SearchResult{Source: io.NopCloser(strings.NewReader(t))}, nil
	}))
	var errs []string
	comp := protocompile.Compiler{
		Resolver:       resolver,
		MaxParallelism: 1,
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			if len(errs) < 5 {
				errs = append(errs, err.Error())
			}
			return nil // gather a few, then fail
		}, nil),
	}
	out, err := compile(ctx, &comp)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.Join(errs, "; "))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return out, nil
}

func compile(ctx context.Context, comp *protocompile.Compiler) (fd protoreflect.FileDescriptor, err error) {
	defer func() {
		// A third-party compiler of untrusted text: a panic in it is
		// an invalid schema, not a dead server.
		if r := recover(); r != nil {
			fd, err = nil, fmt.Errorf("the Protobuf compiler failed on it (%v)", r)
		}
	}()
	files, err := comp.Compile(ctx, mainFile)
	if err != nil {
		return nil, err
	}
	return files[0], nil
}

// descriptorOf decodes the base64 form of a schema, or returns nil when
// text is not one (then it is .proto source).
func descriptorOf(text string) *descriptorpb.FileDescriptorProto {
	t := strings.TrimSpace(text)
	if t == "" || strings.ContainsAny(t, " \n\t;{") {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		return nil
	}
	var fd descriptorpb.FileDescriptorProto
	if proto.Unmarshal(b, &fd) != nil {
		return nil
	}
	for _, m := range fd.MessageType {
		clearEmptyJSONNames(m)
	}
	clearFields(fd.Extension)
	return &fd
}

// clearEmptyJSONNames gives every field without a json_name (or with an
// empty one) its default JSON name, as protoc fills it in: the compiler
// takes a descriptor as protoc's output and reads a missing one as the
// custom name "", which two fields then share.
func clearEmptyJSONNames(m *descriptorpb.DescriptorProto) {
	clearFields(m.Field)
	clearFields(m.Extension)
	for _, n := range m.NestedType {
		clearEmptyJSONNames(n)
	}
}

func clearFields(fs []*descriptorpb.FieldDescriptorProto) {
	for _, f := range fs {
		if f.GetJsonName() == "" {
			f.JsonName = proto.String(jsonName(f.GetName()))
		}
	}
}

// IsSerialized reports whether text is the base64 form of a descriptor.
func IsSerialized(text string) bool { return descriptorOf(text) != nil }

// jsonName is protoc's default JSON name of a field: underscores dropped,
// each letter after one upper-cased.
func jsonName(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		switch {
		case r == '_':
			up = true
		case up && r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			up = false
		default:
			b.WriteRune(r)
			up = false
		}
	}
	return b.String()
}
