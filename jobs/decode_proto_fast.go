package jobs

import (
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// fastDescriptor rebuilds a compiled schema (the compiler's descriptors)
// as the protobuf runtime's own descriptors, the same file, imports
// included: dynamicpb asks a field's presence, kind and number for every
// field of every record, and the runtime's descriptors answer from fields
// where the compiler's resolve them each time (64% of a Protobuf load's
// CPU went to decoding before; see testdata/bench/load.sh VARIANT=protobuf).
// On any failure it returns fd as it is.
func fastDescriptor(fd protoreflect.FileDescriptor) protoreflect.FileDescriptor {
	files := new(protoregistry.Files)
	out, err := rebuildFile(fd, files)
	if err != nil {
		return fd
	}
	return out
}

func rebuildFile(fd protoreflect.FileDescriptor, files *protoregistry.Files) (protoreflect.FileDescriptor, error) {
	if got, err := files.FindFileByPath(fd.Path()); err == nil {
		return got, nil
	}
	imports := fd.Imports()
	for i := 0; i < imports.Len(); i++ {
		if _, err := rebuildFile(imports.Get(i).FileDescriptor, files); err != nil {
			return nil, err
		}
	}
	out, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(fd), files)
	if err != nil {
		return nil, err
	}
	if err := files.RegisterFile(out); err != nil {
		return nil, err
	}
	return out, nil
}

// hasRequired reports whether md, or a message it holds at any depth, has
// a required field (proto2): only then must a decoded message be checked
// for missing fields (proto.UnmarshalOptions.AllowPartial otherwise).
func hasRequired(md protoreflect.MessageDescriptor) bool {
	seen := map[protoreflect.FullName]bool{}
	var walk func(protoreflect.MessageDescriptor) bool
	walk = func(m protoreflect.MessageDescriptor) bool {
		if seen[m.FullName()] {
			return false
		}
		seen[m.FullName()] = true
		if m.RequiredNumbers().Len() > 0 {
			return true
		}
		fields := m.Fields()
		for i := 0; i < fields.Len(); i++ {
			f := fields.Get(i)
			if f.Message() != nil && walk(f.Message()) {
				return true
			}
			if f.IsMap() && f.MapValue().Message() != nil && walk(f.MapValue().Message()) {
				return true
			}
		}
		return false
	}
	return walk(md)
}
