// Package protoschema compiles the Protobuf schemas of a Confluent schema
// registry and maps their messages to Avro-typed rows, for the registry
// (broker/schemaregistry) and the loader (jobs).
//
// # Why protocompile
//
// google.golang.org/protobuf has descriptors and dynamic messages but no
// .proto parser; bufbuild/protocompile is the maintained pure-Go compiler
// that produces exactly those descriptors (linker.File is a
// protoreflect.FileDescriptor), takes base64 FileDescriptorProtos through
// the same resolver, and embeds the well-known types. Measured on this
// machine: compiling jobs/testdata/order.proto (23 fields, one reference,
// four well-known imports) takes 0.52 ms and 219 KB (BenchmarkParse), once
// per schema id; the sluice binary grows from 143.3 MB to 147.2 MB (+2.7%)
// with protocompile, jsonschema/v6 and the dynamicpb/protojson parts of
// google.golang.org/protobuf.
//
// # Wire framing (Confluent)
//
//	0x00 | schema id (4 bytes, big endian) | message indexes | message
//	message indexes: zigzag varint count, then count zigzag varints, the
//	path from the file's top-level messages; a count of 0 means [0].
//
// The type mapping is AvroSchema's doc comment.
package protoschema
