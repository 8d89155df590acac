package schemaregistry

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
)

// state is the registry's view of the _schemas topic: what applying its
// records in log order gives. Every instance applies the same records with
// the same rules and so reaches the same state; the rules below are the
// only place where two racing writers are told apart (the first record in
// log order wins, see doc.go). state is not safe for concurrent use: the
// store guards it.
type state struct {
	schemas   map[int]*schemaEntry // id → schema, while a version uses it
	idByCanon map[string]int       // schema identity (parsedSchema.key) → id
	subjects  map[string]*subject
	byNonce   map[string]*version // accepted registrations by record nonce
	configs   map[string]string   // subject → level; "" = global
	maxID     int                 // highest id used so far
	// retired are ids whose versions were all permanently deleted: id →
	// fingerprint of its schema, and back. Such an id goes only to its
	// own schema again.
	retired   map[int]string
	retiredID map[string]int
	// rejected are registration records that lost a race and have no
	// tombstone yet; the store writes one (see cleanup in store.go).
	rejected map[string]recordKey
}

type schemaEntry struct {
	id     int
	schema parsedSchema
	refs   int // versions (soft-deleted ones too) that use it
}

type subject struct {
	versions []*version // ascending by number
}

type version struct {
	subject string
	number  int
	id      int
	nonce   string
	deleted bool // soft-deleted
	// deletes are the Delete fields of the soft-delete records applied to
	// it, in log order ("" for a record from before they had one).
	deletes []string
}

func newState() *state {
	return &state{
		schemas:   map[int]*schemaEntry{},
		idByCanon: map[string]int{},
		subjects:  map[string]*subject{},
		byNonce:   map[string]*version{},
		configs:   map[string]string{},
		rejected:  map[string]recordKey{},
		retired:   map[int]string{},
		retiredID: map[string]int{},
	}
}

// applyResult says what a record did to the state.
type applyResult int

const (
	applied  applyResult = iota
	rejected             // a registration that lost a race
	skipped              // a record not understood, or about nothing known
)

// apply applies one record of the log. value is nil for a tombstone.
func (s *state) apply(key recordKey, value []byte) applyResult {
	return s.applyParsed(key, value, nil)
}

// applyParsed is apply with the schemas of the records already parsed
// (canonical or stored text → schema), so that a caller can parse them
// before it takes the lock that guards the state; a schema missing from
// parsed is parsed here.
func (s *state) applyParsed(key recordKey, value []byte, parsed map[string]parsedSchema) applyResult {
	switch key.Type {
	case keySchema:
		if key.Nonce == "" {
			return skipped
		}
		if value == nil {
			delete(s.rejected, key.Nonce)
			return s.hardDelete(key.Nonce)
		}
		var v schemaValue
		if json.Unmarshal(value, &v) != nil {
			return skipped
		}
		return s.register(key, v, parsed)
	case keyDeleteVersion:
		if value == nil {
			return skipped // the registration's tombstone does the work
		}
		var d deleteVersionValue
		if json.Unmarshal(value, &d) != nil {
			return skipped
		}
		v := s.byNonce[d.Nonce]
		if v == nil || key.Nonce != d.Nonce {
			return skipped
		}
		v.deleted = true
		if !slices.Contains(v.deletes, key.Delete) {
			v.deletes = append(v.deletes, key.Delete)
		}
		return applied
	case keyConfig:
		subj := ""
		if key.Subject != nil {
			subj = *key.Subject
		}
		if value == nil {
			delete(s.configs, subj)
			return applied
		}
		var c configValue
		if json.Unmarshal(value, &c) != nil || !validLevel(c.Level) {
			return skipped
		}
		s.configs[subj] = c.Level
		return applied
	case keyID:
		var v idValue
		if value == nil || json.Unmarshal(value, &v) != nil || v.ID != key.ID || v.Fingerprint == "" {
			return skipped
		}
		s.maxID = max(s.maxID, v.ID)
		s.retired[v.ID] = v.Fingerprint
		s.retiredID[v.Fingerprint] = v.ID
		return applied
	}
	return skipped
}

// register applies a SCHEMA record. It is accepted when, at its place in
// the log:
//  1. its (subject, version) is free and version is above every version of
//     the subject (versions grow);
//  2. the schema is not already a live version of the subject;
//  3. its id is not held by another schema, the schema holds no other id,
//     and the id was not retired from another schema.
//
// A record that breaks a rule lost a race with another writer: it is
// ignored by every instance alike and remembered for cleanup. Each rule
// only looks at what is live or retired, never at what compaction may
// remove before the record, so the compacted log accepts every record the
// whole log accepted (TestRacingWritersAndCompaction).
func (s *state) register(key recordKey, v schemaValue, parsed map[string]parsedSchema) applyResult {
	typ := v.Type
	if typ == "" {
		typ = typeAvro
	}
	if key.Subject == nil || *key.Subject != v.Subject || key.Version != v.Version || v.Version < 1 || v.ID < 1 || typ != typeAvro && typ != typeProtobuf && typ != typeJSON {
		return skipped
	}
	if _, dup := s.byNonce[key.Nonce]; dup {
		return skipped
	}
	pk := v.parseKey()
	ps, ok := parsed[pk]
	if e := s.schemas[v.ID]; e != nil && parseKey(e.schema.schemaType, e.schema.references, e.schema.canonical) == pk {
		ps = e.schema // stored text is canonical: no second parse
	} else if !ok {
		var err error
		if typ == typeAvro && len(v.References) == 0 {
			ps, err = parseAvro(v.Schema)
		} else {
			// References resolve against the state at this record's
			// place in the log: the same on every instance.
			refs, deps, depth, aerr := s.resolve(v.References)
			if aerr != nil {
				return skipped
			}
			ps, err = parseTyped(context.Background(), submission{schemaType: typ, text: v.Schema, references: refs}, deps, depth)
		}
		if err != nil {
			return skipped
		}
	}
	sub := s.subjects[v.Subject]
	reject := false
	heldID, held := s.idByCanon[ps.key]
	if sub != nil {
		if n := len(sub.versions); n > 0 && sub.versions[n-1].number >= v.Version {
			reject = true
		}
		for _, old := range sub.versions {
			if !old.deleted && held && old.id == heldID {
				reject = true
			}
		}
	}
	if held && heldID != v.ID {
		reject = true
	}
	if e := s.schemas[v.ID]; e != nil && e.schema.key != ps.key {
		reject = true
	}
	if fp, ok := s.retired[v.ID]; ok && fp != ps.fingerprint {
		reject = true
	}
	if reject {
		s.rejected[key.Nonce] = key
		return rejected
	}
	if sub == nil {
		sub = &subject{}
		s.subjects[v.Subject] = sub
	}
	ver := &version{subject: v.Subject, number: v.Version, id: v.ID, nonce: key.Nonce}
	sub.versions = append(sub.versions, ver)
	s.byNonce[key.Nonce] = ver
	e := s.schemas[v.ID]
	if e == nil {
		e = &schemaEntry{id: v.ID, schema: ps}
		s.schemas[v.ID] = e
		s.idByCanon[ps.key] = v.ID
	}
	e.refs++
	s.maxID = max(s.maxID, v.ID)
	return applied
}

// hardDelete applies the tombstone of a registration.
func (s *state) hardDelete(nonce string) applyResult {
	v := s.byNonce[nonce]
	if v == nil {
		return skipped
	}
	delete(s.byNonce, nonce)
	sub := s.subjects[v.subject]
	sub.versions = slices.DeleteFunc(sub.versions, func(o *version) bool { return o == v })
	if len(sub.versions) == 0 {
		delete(s.subjects, v.subject)
	}
	if e := s.schemas[v.id]; e != nil {
		if e.refs--; e.refs <= 0 {
			delete(s.schemas, v.id)
			delete(s.idByCanon, e.schema.key)
		}
	}
	return applied
}

// subjectNames lists subjects with a live version, or with any version when
// deleted is set, sorted.
func (s *state) subjectNames(deleted bool) []string {
	names := []string{}
	for name, sub := range s.subjects {
		if deleted || sub.live() > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// live counts the versions not soft-deleted.
func (sub *subject) live() int {
	n := 0
	for _, v := range sub.versions {
		if !v.deleted {
			n++
		}
	}
	return n
}

// find returns version number n of the subject (soft-deleted ones only when
// deleted is set), or the latest such version when n is -1.
func (sub *subject) find(n int, deleted bool) *version {
	for i := len(sub.versions) - 1; i >= 0; i-- {
		v := sub.versions[i]
		if v.deleted && !deleted {
			continue
		}
		if n == -1 || v.number == n {
			return v
		}
	}
	return nil
}

// level is the compatibility level that applies to subject.
func (s *state) level(subject string) string {
	if l, ok := s.configs[subject]; ok && subject != "" {
		return l
	}
	if l, ok := s.configs[""]; ok {
		return l
	}
	return DefaultLevel
}

// nextVersion is the version number a new registration in subject gets.
func (s *state) nextVersion(subject string) int {
	if sub := s.subjects[subject]; sub != nil && len(sub.versions) > 0 {
		return sub.versions[len(sub.versions)-1].number + 1
	}
	return 1
}

// idFor is the id a new registration of the schema gets: its own if it has
// (or had) one, the next unused one otherwise.
func (s *state) idFor(ps parsedSchema) int {
	if id, ok := s.idByCanon[ps.key]; ok {
		return id
	}
	if id, ok := s.retiredID[ps.fingerprint]; ok {
		return id
	}
	return s.maxID + 1
}
