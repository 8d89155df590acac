package schemaregistry

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluicehq/sluice/internal/jschema"
)

// compatible reports whether a consumer using reader can read what a
// producer using writer wrote, for schemas of any one type; a change of
// type is never compatible.
func compatible(reader, writer parsedSchema, budget *checkBudget) error {
	if reader.schemaType != writer.schemaType {
		return fmt.Errorf("the schema type changed from %s to %s", writer.schemaType, reader.schemaType)
	}
	switch reader.schemaType {
	case typeProtobuf:
		return protoCompatible(reader.proto, writer.proto, budget)
	case typeJSON:
		c := &jsonChecker{budget: budget, seen: map[[2]*jsonschema.Schema]bool{}}
		return c.accepts("#", reader.json, writer.json)
	}
	return avroCompatible(reader, writer, budget)
}

// protoCompatible applies Confluent's Protobuf rules with reader the
// schema that reads and writer the one that wrote (BACKWARD: new, old).
// Fields are matched by number. Incompatible: the package changed, a
// message of the writer is gone, a field's kind (scalar, message, enum),
// scalar type outside its wire-compatible group, or named type changed, a
// required field removed or added, several existing fields moved into one
// oneof, or a field moved into an existing oneof. A field removed, added
// (optional) or renamed, and enum values added or removed, are compatible.
func protoCompatible(reader, writer protoreflect.FileDescriptor, budget *checkBudget) error {
	if reader.Package() != writer.Package() {
		return fmt.Errorf("PACKAGE_CHANGED: package %q became %q", writer.Package(), reader.Package())
	}
	readers := map[protoreflect.FullName]protoreflect.MessageDescriptor{}
	var collect func(ms protoreflect.MessageDescriptors, into func(protoreflect.MessageDescriptor))
	collect = func(ms protoreflect.MessageDescriptors, into func(protoreflect.MessageDescriptor)) {
		for i := range ms.Len() {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}
			into(m)
			collect(m.Messages(), into)
		}
	}
	collect(reader.Messages(), func(m protoreflect.MessageDescriptor) { readers[m.FullName()] = m })
	var err error
	collect(writer.Messages(), func(w protoreflect.MessageDescriptor) {
		if err != nil {
			return
		}
		if err = budget.spend(1 + w.Fields().Len()); err != nil {
			return
		}
		r, ok := readers[w.FullName()]
		if !ok {
			err = fmt.Errorf("MESSAGE_REMOVED: message %s", w.FullName())
			return
		}
		err = protoMessageCompatible(r, w)
	})
	return err
}

func protoMessageCompatible(r, w protoreflect.MessageDescriptor) error {
	rf, wf := r.Fields(), w.Fields()
	for i := range wf.Len() {
		f := wf.Get(i)
		g := rf.ByNumber(f.Number())
		if g == nil {
			if f.Cardinality() == protoreflect.Required {
				return fmt.Errorf("REQUIRED_FIELD_REMOVED: %s.%s (number %d)", w.FullName(), f.Name(), f.Number())
			}
			continue
		}
		if err := protoFieldCompatible(g, f); err != nil {
			return fmt.Errorf("%s.%s (number %d): %w", w.FullName(), f.Name(), f.Number(), err)
		}
	}
	for i := range rf.Len() {
		g := rf.Get(i)
		if g.Cardinality() == protoreflect.Required && wf.ByNumber(g.Number()) == nil {
			return fmt.Errorf("REQUIRED_FIELD_ADDED: %s.%s (number %d)", r.FullName(), g.Name(), g.Number())
		}
	}
	for i := range r.Oneofs().Len() {
		o := r.Oneofs().Get(i)
		if o.IsSynthetic() {
			continue
		}
		moved, existing := 0, false
		for j := range o.Fields().Len() {
			f := wf.ByNumber(o.Fields().Get(j).Number())
			switch {
			case f == nil:
			case f.ContainingOneof() == nil || f.ContainingOneof().IsSynthetic():
				moved++
			default:
				existing = true
			}
		}
		if moved > 1 {
			return fmt.Errorf("MULTIPLE_FIELDS_MOVED_TO_ONEOF: %d fields of %s moved into oneof %s", moved, w.FullName(), o.Name())
		}
		if moved == 1 && existing {
			return fmt.Errorf("FIELD_MOVED_TO_EXISTING_ONEOF: a field of %s moved into the existing oneof %s", w.FullName(), o.Name())
		}
	}
	return nil
}

func protoFieldCompatible(r, w protoreflect.FieldDescriptor) error {
	if r.IsMap() != w.IsMap() {
		return fmt.Errorf("FIELD_KIND_CHANGED: map and non-map")
	}
	if r.IsMap() {
		if err := protoFieldCompatible(r.MapKey(), w.MapKey()); err != nil {
			return fmt.Errorf("map key: %w", err)
		}
		return protoFieldCompatible(r.MapValue(), w.MapValue())
	}
	rk, wk := protoKindClass(r.Kind()), protoKindClass(w.Kind())
	if rk != wk {
		return fmt.Errorf("FIELD_KIND_CHANGED: %s became %s", w.Kind(), r.Kind())
	}
	switch rk {
	case "message":
		if r.Message().FullName() != w.Message().FullName() {
			return fmt.Errorf("FIELD_NAMED_TYPE_CHANGED: %s became %s", w.Message().FullName(), r.Message().FullName())
		}
	case "enum":
		if r.Enum().FullName() != w.Enum().FullName() {
			return fmt.Errorf("FIELD_NAMED_TYPE_CHANGED: %s became %s", w.Enum().FullName(), r.Enum().FullName())
		}
	default:
		if scalarGroup(r.Kind()) != scalarGroup(w.Kind()) {
			return fmt.Errorf("FIELD_SCALAR_KIND_CHANGED: %s became %s", w.Kind(), r.Kind())
		}
	}
	return nil
}

func protoKindClass(k protoreflect.Kind) string {
	switch k {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "message"
	case protoreflect.EnumKind:
		return "enum"
	}
	return "scalar"
}

// scalarGroup names the scalar types that read each other's wire values.
func scalarGroup(k protoreflect.Kind) string {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Uint64Kind, protoreflect.BoolKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "length-delimited"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	}
	return k.String()
}

// jsonChecker decides whether a JSON Schema (the reader) accepts every
// instance another (the writer) accepts: BACKWARD is "the new schema
// accepts every old instance". It proves the common cases (types kept or
// widened, integer to number; properties added to a closed model, removed
// from an open one; additionalProperties opened; required names dropped;
// enums grown; bounds relaxed; anyOf/oneOf branches added) and refuses
// what it cannot prove, naming the place.
type jsonChecker struct {
	budget *checkBudget
	seen   map[[2]*jsonschema.Schema]bool // pairs under comparison ($ref cycles)
}

func (c *jsonChecker) accepts(path string, r, w *jsonschema.Schema) error {
	if err := c.budget.spend(1); err != nil {
		return err
	}
	r, w = jschema.Deref(r), jschema.Deref(w)
	if r == nil || w == nil {
		return nil
	}
	pair := [2]*jsonschema.Schema{r, w}
	if c.seen[pair] {
		return nil
	}
	c.seen[pair] = true
	if w.Bool != nil && !*w.Bool || r.Bool != nil && *r.Bool {
		return nil
	}
	if r.Bool != nil {
		return fmt.Errorf("%s: the new schema is false (accepts nothing)", path)
	}
	if len(w.AnyOf) > 0 || len(w.OneOf) > 0 {
		for i, b := range append(slices.Clone(w.AnyOf), w.OneOf...) {
			if err := c.accepts(fmt.Sprintf("%s/anyOf/%d", path, i), r, b); err != nil {
				return err
			}
		}
		return nil
	}
	if len(r.AnyOf) > 0 || len(r.OneOf) > 0 {
		for _, b := range append(slices.Clone(r.AnyOf), r.OneOf...) {
			err := c.accepts(path, b, w)
			if err == nil || errors.Is(err, errCheckBound) {
				return err
			}
		}
		return fmt.Errorf("%s: no branch of the new anyOf/oneOf accepts the old schema", path)
	}
	if len(r.AllOf) > 0 || r.Not != nil || r.If != nil {
		return fmt.Errorf("%s: the new schema uses allOf/not/if, which this registry cannot compare: keep it unchanged", path)
	}
	if err := jsonTypesAccept(path, r, w); err != nil {
		return err
	}
	if err := jsonBoundsAccept(path, r, w); err != nil {
		return err
	}
	if err := c.objectAccepts(path, r, w); err != nil {
		return err
	}
	return c.accepts(path+"/items", items(r), itemsOrAny(w, r))
}

func jsonTypesAccept(path string, r, w *jsonschema.Schema) error {
	if r.Types == nil || r.Types.IsEmpty() {
		return nil
	}
	if w.Types == nil || w.Types.IsEmpty() {
		return fmt.Errorf("%s: TYPE_NARROWED: any type became %s", path, r.Types)
	}
	rt := r.Types.ToStrings()
	for _, t := range w.Types.ToStrings() {
		if !slices.Contains(rt, t) && !(t == "integer" && slices.Contains(rt, "number")) {
			return fmt.Errorf("%s: TYPE_CHANGED: %s became %s", path, w.Types, r.Types)
		}
	}
	return nil
}

func jsonBoundsAccept(path string, r, w *jsonschema.Schema) error {
	if r.Enum != nil {
		if w.Enum == nil {
			return fmt.Errorf("%s: ENUM_ADDED", path)
		}
		have := map[string]bool{}
		for _, v := range r.Enum.Values {
			b, _ := json.Marshal(v)
			have[string(b)] = true
		}
		for _, v := range w.Enum.Values {
			if b, _ := json.Marshal(v); !have[string(b)] {
				return fmt.Errorf("%s: ENUM_ARRAY_NARROWED: value %s removed", path, b)
			}
		}
	}
	narrowedInt := func(rv, wv *int, larger bool) bool {
		return rv != nil && (wv == nil || larger && *rv > *wv || !larger && *rv < *wv)
	}
	if narrowedInt(r.MaxLength, w.MaxLength, false) || narrowedInt(r.MinLength, w.MinLength, true) ||
		narrowedInt(r.MaxItems, w.MaxItems, false) || narrowedInt(r.MinItems, w.MinItems, true) {
		return fmt.Errorf("%s: a length or item bound was narrowed", path)
	}
	if r.Maximum != nil && (w.Maximum == nil || r.Maximum.Cmp(w.Maximum) < 0) || r.Minimum != nil && (w.Minimum == nil || r.Minimum.Cmp(w.Minimum) > 0) {
		return fmt.Errorf("%s: a numeric bound was narrowed", path)
	}
	if r.Pattern != nil && (w.Pattern == nil || r.Pattern.String() != w.Pattern.String()) {
		return fmt.Errorf("%s: PATTERN_CHANGED", path)
	}
	return nil
}

// objectAccepts compares properties, additionalProperties and required.
func (c *jsonChecker) objectAccepts(path string, r, w *jsonschema.Schema) error {
	for _, name := range r.Required {
		if !slices.Contains(w.Required, name) {
			return fmt.Errorf("%s: REQUIRED_ATTRIBUTE_ADDED: %q", path, name)
		}
	}
	for name, wp := range w.Properties {
		p := path + "/properties/" + name
		if rp, ok := r.Properties[name]; ok {
			if err := c.accepts(p, rp, wp); err != nil {
				return err
			}
			continue
		}
		switch a := r.AdditionalProperties.(type) {
		case bool:
			if !a {
				return fmt.Errorf("%s: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", p)
			}
		case *jsonschema.Schema:
			if err := c.accepts(p, a, wp); err != nil {
				return err
			}
		}
	}
	for name, rp := range r.Properties {
		if _, ok := w.Properties[name]; ok {
			continue
		}
		p := path + "/properties/" + name
		switch a := w.AdditionalProperties.(type) {
		case nil:
			return fmt.Errorf("%s: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", p)
		case bool:
			if a {
				return fmt.Errorf("%s: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", p)
			}
		case *jsonschema.Schema:
			if err := c.accepts(p, rp, a); err != nil {
				return err
			}
		}
	}
	switch ra := r.AdditionalProperties.(type) {
	case bool:
		if !ra {
			if wa, ok := w.AdditionalProperties.(bool); !ok || wa {
				return fmt.Errorf("%s: ADDITIONAL_PROPERTIES_REMOVED", path)
			}
		}
	case *jsonschema.Schema:
		switch wa := w.AdditionalProperties.(type) {
		case *jsonschema.Schema:
			return c.accepts(path+"/additionalProperties", ra, wa)
		case bool:
			if wa {
				return fmt.Errorf("%s: ADDITIONAL_PROPERTIES_NARROWED", path)
			}
		case nil:
			return fmt.Errorf("%s: ADDITIONAL_PROPERTIES_NARROWED", path)
		}
	}
	return nil
}

// items is a schema's items schema (nil: any item).
func items(s *jsonschema.Schema) *jsonschema.Schema {
	if s.Items2020 != nil {
		return s.Items2020
	}
	if it, ok := s.Items.(*jsonschema.Schema); ok {
		return it
	}
	return nil
}

// itemsOrAny is the writer's items; when it has none but the reader has,
// a schema that is only "true" would be needed: an empty schema stands in.
func itemsOrAny(w, r *jsonschema.Schema) *jsonschema.Schema {
	if it := items(w); it != nil {
		return it
	}
	if items(r) != nil {
		t := true
		return &jsonschema.Schema{Bool: &t}
	}
	return nil
}
