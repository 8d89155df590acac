package avrocodec

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
)

// RecordBuilder turns generic Avro values (what hamba/avro decodes into
// map[string]any) into Arrow record batches typed by ArrowSchema, with the
// same conversions the Parquet writer uses: a query over Avro files sees the
// types a query over Parquet files of the same schema sees. It is not safe
// for concurrent use.
type RecordBuilder struct {
	rb   *array.RecordBuilder
	apps *Appenders
	n    int
}

// NewRecordBuilder returns a builder for records of the Avro record schema s.
func NewRecordBuilder(mem memory.Allocator, s avro.Schema) (*RecordBuilder, error) {
	as, err := ArrowSchema(s)
	if err != nil {
		return nil, err
	}
	rb := array.NewRecordBuilder(mem, as)
	apps, err := NewAppenders(s.(*avro.RecordSchema), rb.Fields())
	if err != nil {
		rb.Release()
		return nil, err
	}
	return &RecordBuilder{rb: rb, apps: apps}, nil
}

// Schema returns the Arrow schema of the built records.
func (b *RecordBuilder) Schema() *arrow.Schema { return b.rb.Schema() }

// Append adds one record. A value that does not fit returns an error
// wrapping ErrBadValue; the builder then holds a partial record and must
// be released, not used further.
func (b *RecordBuilder) Append(value map[string]any) error {
	if err := b.apps.Append(value); err != nil {
		return fmt.Errorf("record %d: %w", b.n, err)
	}
	b.n++
	return nil
}

// Len returns the number of records appended since the last NewRecordBatch.
func (b *RecordBuilder) Len() int { return b.n }

// NewRecordBatch returns the appended records as a batch (the caller
// releases it) and starts an empty one.
func (b *RecordBuilder) NewRecordBatch() arrow.RecordBatch {
	b.n = 0
	return b.rb.NewRecordBatch()
}

// Release frees the builder's buffers.
func (b *RecordBuilder) Release() { b.rb.Release() }
