package schemaregistry

import (
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// DefaultMaxCheckSteps is the default bound on the steps of one
// compatibility check (Options.MaxCheckSteps). A step is one pair of
// schema nodes compared, one field, alias or enum symbol looked at. A
// check of a 1,000-field record against one version in both directions
// (FULL) takes about 6,000 steps; 10,000,000 steps is a FULL_TRANSITIVE
// subject of 1,500 such versions, or about a second of one core.
const DefaultMaxCheckSteps = 10_000_000

// errCheckBound is returned by a check that ran out of steps.
var errCheckBound = errors.New("schemaregistry: compatibility check bound reached")

// checkCompatible checks candidate against the existing schemas (oldest
// first) under level and returns the reasons it is incompatible (none when
// it is compatible). Non-transitive levels look at the newest existing
// schema only. Every comparison spends steps of budget; when it runs out,
// the check stops with an error wrapping errCheckBound.
//
// Avro's rule: a reader schema R can read data written with W when
// Compatible(R, W). BACKWARD: the new schema reads the old data. FORWARD:
// the old schemas read the new data. FULL: both.
func checkCompatible(level string, candidate parsedSchema, existing []parsedSchema, budget *checkBudget) ([]string, error) {
	if level == LevelNone || len(existing) == 0 {
		return nil, nil
	}
	switch level {
	case LevelBackward, LevelForward, LevelFull:
		existing = existing[len(existing)-1:]
	}
	backward := level != LevelForward && level != LevelForwardTransitive
	forward := level != LevelBackward && level != LevelBackwardTransitive
	var reasons []string
	for i := len(existing) - 1; i >= 0; i-- {
		old := existing[i]
		if backward {
			err := compatible(candidate, old, budget)
			if errors.Is(err, errCheckBound) {
				return nil, err
			}
			if err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: the new schema cannot read data written with the old schema %s: %v", level, abbreviate(old.canonical, 200), err))
			}
		}
		if forward {
			err := compatible(old, candidate, budget)
			if errors.Is(err, errCheckBound) {
				return nil, err
			}
			if err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: the old schema %s cannot read data written with the new schema: %v", level, abbreviate(old.canonical, 200), err))
			}
		}
	}
	return reasons, nil
}

// checkBudget is what one request's compatibility checks may still spend.
type checkBudget struct {
	limit int // the bound, for messages
	left  int
}

func newCheckBudget(limit int) *checkBudget { return &checkBudget{limit: limit, left: limit} }

func (b *checkBudget) spend(n int) error {
	if b.left -= n; b.left < 0 {
		b.left = -1
		return fmt.Errorf("%w: more than %d steps", errCheckBound, b.limit)
	}
	return nil
}

// avroCompatible reports whether reader can read what writer wrote, by
// Avro's schema resolution rules as hamba/avro's SchemaCompatibility
// applies them (the same verdicts and messages). It is not that checker:
// hamba/avro looks fields up by a linear scan and builds each record's
// canonical text by repeated concatenation, both quadratic in the number of
// fields (21 s for a 15,000-field record); this one indexes the writer's
// fields, keys its memo by node identity instead of parsing-canonical
// fingerprints (which ignore defaults), and counts its steps.
func avroCompatible(reader, writer parsedSchema, budget *checkBudget) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the Avro compatibility checker failed: %v", r)
		}
	}()
	c := &compatChecker{budget: budget, memo: map[schemaPair]*compatResult{}, fields: map[*avro.RecordSchema]map[string]int{}}
	return c.compatible(reader.avro, writer.avro)
}

type schemaPair struct{ reader, writer avro.Schema }

// compatResult is a pair's verdict; done is false while the pair is being
// compared (a recursive type meeting itself again, taken as compatible).
type compatResult struct {
	done bool
	err  error
}

type compatChecker struct {
	budget *checkBudget
	memo   map[schemaPair]*compatResult
	fields map[*avro.RecordSchema]map[string]int // writer record → field name → first position
}

func (c *compatChecker) compatible(reader, writer avro.Schema) error {
	if r, ok := reader.(*avro.RefSchema); ok {
		reader = r.Schema()
	}
	if w, ok := writer.(*avro.RefSchema); ok {
		writer = w.Schema()
	}
	if err := c.budget.spend(1); err != nil {
		return err
	}
	if !named(reader) && !named(writer) {
		// Only a named type can recur or be met again by reference:
		// the others are compared where they stand.
		return c.match(reader, writer)
	}
	key := schemaPair{reader, writer}
	if res, ok := c.memo[key]; ok {
		if !res.done {
			return nil
		}
		return res.err
	}
	res := &compatResult{}
	c.memo[key] = res
	err := c.match(reader, writer)
	res.done, res.err = true, err
	return err
}

func (c *compatChecker) match(reader, writer avro.Schema) error {
	if reader.Type() != writer.Type() {
		if wu, ok := writer.(*avro.UnionSchema); ok {
			// The reader must read every branch the writer may write.
			for _, branch := range wu.Types() {
				if err := c.compatible(reader, branch); err != nil {
					return err
				}
			}
			return nil
		}
		if ru, ok := reader.(*avro.UnionSchema); ok {
			// One of the reader's branches must read what the writer wrote.
			for _, branch := range ru.Types() {
				err := c.compatible(branch, writer)
				if err == nil || errors.Is(err, errCheckBound) {
					return err
				}
			}
			return fmt.Errorf("reader union lacking writer schema %s", writer.Type())
		}
		if promotable(writer.Type(), reader.Type()) {
			return nil
		}
		return fmt.Errorf("reader schema %s not compatible with writer schema %s", reader.Type(), writer.Type())
	}
	switch r := reader.(type) {
	case *avro.ArraySchema:
		return c.compatible(r.Items(), writer.(*avro.ArraySchema).Items())
	case *avro.MapSchema:
		return c.compatible(r.Values(), writer.(*avro.MapSchema).Values())
	case *avro.FixedSchema:
		w := writer.(*avro.FixedSchema)
		if err := c.checkName(r, w); err != nil {
			return err
		}
		if r.Size() != w.Size() {
			return fmt.Errorf("%s reader and writer fixed sizes do not match", r.FullName())
		}
	case *avro.EnumSchema:
		w := writer.(*avro.EnumSchema)
		if err := c.checkName(r, w); err != nil {
			return err
		}
		if err := c.checkSymbols(r, w); err != nil {
			if r.HasDefault() && !errors.Is(err, errCheckBound) {
				return nil
			}
			return err
		}
	case *avro.RecordSchema:
		w := writer.(*avro.RecordSchema)
		if err := c.checkName(r, w); err != nil {
			return err
		}
		return c.checkFields(r, w)
	case *avro.UnionSchema:
		for _, branch := range writer.(*avro.UnionSchema).Types() {
			if err := c.compatible(reader, branch); err != nil {
				return err
			}
		}
	}
	return nil
}

func named(s avro.Schema) bool {
	switch s.(type) {
	case *avro.RecordSchema, *avro.EnumSchema, *avro.FixedSchema:
		return true
	}
	return false
}

// promotable reports whether a reader of type to reads a writer's from.
func promotable(from, to avro.Type) bool {
	switch from {
	case avro.Int:
		return to == avro.Long || to == avro.Float || to == avro.Double
	case avro.Long:
		return to == avro.Float || to == avro.Double
	case avro.Float:
		return to == avro.Double
	case avro.String:
		return to == avro.Bytes
	case avro.Bytes:
		return to == avro.String
	}
	return false
}

func (c *compatChecker) checkName(reader, writer avro.NamedSchema) error {
	if reader.Name() == writer.Name() {
		return nil
	}
	if err := c.budget.spend(len(reader.Aliases())); err != nil {
		return err
	}
	for _, a := range reader.Aliases() {
		if a == writer.FullName() {
			return nil
		}
	}
	return fmt.Errorf("reader schema %s and writer schema %s  names do not match", reader.FullName(), writer.FullName())
}

func (c *compatChecker) checkSymbols(reader, writer *avro.EnumSchema) error {
	if err := c.budget.spend(len(reader.Symbols()) + len(writer.Symbols())); err != nil {
		return err
	}
	have := make(map[string]bool, len(reader.Symbols()))
	for _, s := range reader.Symbols() {
		have[s] = true
	}
	for _, s := range writer.Symbols() {
		if !have[s] {
			return fmt.Errorf("reader %s is missing symbol %s", reader.FullName(), s)
		}
	}
	return nil
}

// checkFields matches each reader field with the writer's field of the same
// name, or of one of its aliases, whichever comes first in the writer.
func (c *compatChecker) checkFields(reader, writer *avro.RecordSchema) error {
	index, err := c.fieldIndex(writer)
	if err != nil {
		return err
	}
	wf := writer.Fields()
	for _, f := range reader.Fields() {
		if err := c.budget.spend(1 + len(f.Aliases())); err != nil {
			return err
		}
		pos, found := index[f.Name()]
		for _, a := range f.Aliases() {
			if p, ok := index[a]; ok && (!found || p < pos) {
				pos, found = p, true
			}
		}
		if !found {
			if f.HasDefault() {
				continue
			}
			return fmt.Errorf("reader field %s is missing in writer schema and has no default", f.Name())
		}
		if err := c.compatible(f.Type(), wf[pos].Type()); err != nil {
			return err
		}
	}
	return nil
}

func (c *compatChecker) fieldIndex(rec *avro.RecordSchema) (map[string]int, error) {
	if index, ok := c.fields[rec]; ok {
		return index, nil
	}
	if err := c.budget.spend(len(rec.Fields())); err != nil {
		return nil, err
	}
	index := make(map[string]int, len(rec.Fields()))
	for i, f := range rec.Fields() {
		if _, dup := index[f.Name()]; !dup {
			index[f.Name()] = i
		}
	}
	c.fields[rec] = index
	return index, nil
}
