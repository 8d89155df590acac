package schemaregistry

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// maxWriteAttempts bounds how often one write retries after losing a race
// with another instance.
const maxWriteAttempts = 16

// maxSchemaBytes bounds a schema's canonical text, so that its record stays
// below the broker's default message.max.bytes (1 MiB) once JSON-escaped.
const maxSchemaBytes = 512 << 10

// writeError turns a store failure into the answer a client sees.
func writeError(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{code: codeOperationTimeout, message: "Timed out waiting for the _schemas topic; check that the broker is up and retry", cause: err}
	default:
		return storeError(err)
	}
}

// register adds ps to subject and returns its id: the id of the live
// version that already holds the same schema, else a new version whose id
// is the schema's global id (shared with other subjects) or a new one.
//
// The compatibility check, the costly part, runs outside both locks:
// against a snapshot of the subject's live versions and level taken after
// catching up with the topic, spending steps of budget. Then, under
// writeMu and caught up again, the registration is written only if the
// subject still has the snapshot's live versions and level; otherwise it is
// checked again against the new ones. So no registration is checked against
// a stale version, and none waits behind another's check.
func (s *store) register(ctx context.Context, subject string, ps parsedSchema, budget *checkBudget) (int, error) {
	if n := len(ps.canonical); n > maxSchemaBytes {
		return 0, errorf(codeSchemaTooLarge, "Schema is too large: %d bytes in canonical form, more than %d", n, maxSchemaBytes)
	}
	for range maxWriteAttempts {
		if err := s.sync(ctx); err != nil {
			return 0, writeError(err)
		}
		var snap subjectSnapshot
		s.view(func(st *state) { snap = snapshotSubject(st, subject, ps) })
		if snap.existing > 0 {
			return snap.existing, nil
		}
		if s.hooks.checking != nil {
			s.hooks.checking(subject)
		}
		if aerr := snap.check(subject, ps, budget); aerr != nil {
			return 0, aerr
		}
		id, done, err := s.writeRegistration(ctx, subject, ps, snap)
		if err != nil || done {
			return id, err
		}
	}
	return 0, errorf(codeStoreError, "Gave up registering under subject '%s' after %d attempts: other writers kept changing the subject first; retry", subject, maxWriteAttempts)
}

// writeRegistration writes the registration of ps, checked against snap,
// if snap is still the subject's state once caught up. done is false when
// it is not (or when another instance's record won the race): the caller
// checks again.
func (s *store) writeRegistration(ctx context.Context, subject string, ps parsedSchema, snap subjectSnapshot) (id int, done bool, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.sync(ctx); err != nil {
		return 0, false, writeError(err)
	}
	var (
		d       registration
		current = true
		nonce   = uuid.NewString()
	)
	s.view(func(st *state) {
		if current = snapshotSubject(st, subject, ps).same(snap); current {
			d = decideWrite(st, subject, ps, nonce)
		}
	})
	if !current {
		s.metrics.raceLost.Inc()
		return 0, false, nil
	}
	pk := parseKey(ps.schemaType, ps.references, ps.canonical)
	s.pending.Store(pk, ps) // the reader applies it without parsing it again
	defer s.pending.Delete(pk)
	if err := s.produce(ctx, *d.record); err != nil {
		return 0, false, writeError(err)
	}
	won := false
	s.view(func(st *state) { _, won = st.byNonce[nonce] })
	if !won {
		s.metrics.raceLost.Inc()
	}
	return d.id, won, nil
}

// subjectSnapshot is what a registration's compatibility check depends on:
// the subject's level and live versions.
type subjectSnapshot struct {
	level    string
	nonces   []string       // the live versions' records, oldest first
	against  []parsedSchema // their schemas
	existing int            // id of the live version holding the schema, 0 if none
}

func snapshotSubject(st *state, subject string, ps parsedSchema) subjectSnapshot {
	snap := subjectSnapshot{level: st.level(subject)}
	id, known := st.idByCanon[ps.key]
	if sub := st.subjects[subject]; sub != nil {
		for _, v := range sub.versions {
			if v.deleted {
				continue
			}
			if known && v.id == id {
				snap.existing = id
			}
			snap.nonces = append(snap.nonces, v.nonce)
			snap.against = append(snap.against, st.schemas[v.id].schema)
		}
	}
	return snap
}

// same reports whether two snapshots of a subject give the same check.
func (snap subjectSnapshot) same(o subjectSnapshot) bool {
	return snap.level == o.level && snap.existing == o.existing && slices.Equal(snap.nonces, o.nonces)
}

// check checks ps against the snapshot: nil, a 409 naming the reasons, or
// a 42201 when the check needs more steps than budget has.
func (snap subjectSnapshot) check(subject string, ps parsedSchema, budget *checkBudget) *apiError {
	reasons, err := checkCompatible(snap.level, ps, snap.against, budget)
	if err != nil {
		return checkBoundError(subject, snap.level, len(snap.against), budget)
	}
	if len(reasons) > 0 {
		return errorf(codeIncompatibleSchema, "Schema being registered is incompatible with an earlier schema for subject \"%s\", details: [%s]", subject, strings.Join(reasons, "; "))
	}
	return nil
}

// checkBoundError is the answer to a check that ran out of steps.
func checkBoundError(subject, level string, versions int, budget *checkBudget) *apiError {
	if level == nonTransitive(level) {
		versions = min(versions, 1)
	}
	return errorf(codeInvalidSchema, "Invalid schema: checking it under %s against %d version(s) of subject '%s' needs more than %d steps, the bound of one compatibility check (fields, union branches and enum symbols compared, times the versions compared); use a smaller schema, fewer versions or a non-transitive level, or raise the registry's max check steps", level, versions, subject, budget.limit)
}

// registration is what registering a schema decides from a view of the
// state: an error, or the id, and the record to write when the schema is
// not already a live version of the subject.
type registration struct {
	id     int
	record *logRecord
	err    *apiError
}

// decideRegister decides a registration from one view: the check and the
// write as register makes them, in one step (the simulation's writer).
func decideRegister(st *state, subject string, ps parsedSchema, nonce string) registration {
	snap := snapshotSubject(st, subject, ps)
	if snap.existing > 0 {
		return registration{id: snap.existing}
	}
	if aerr := snap.check(subject, ps, newCheckBudget(DefaultMaxCheckSteps)); aerr != nil {
		return registration{err: aerr}
	}
	return decideWrite(st, subject, ps, nonce)
}

// decideWrite is the record of a registration already checked: the
// schema's id and the subject's next version.
func decideWrite(st *state, subject string, ps parsedSchema, nonce string) registration {
	id, version := st.idFor(ps), st.nextVersion(subject)
	return registration{id: id, record: &logRecord{schemaKey(subject, version, nonce), schemaValue{Subject: subject, Version: version, ID: id, Type: ps.typeName(), References: ps.references, Schema: ps.canonical}}}
}

// deleteVersion soft-deletes (or, when permanent, hard-deletes an already
// soft-deleted) version of subject and returns its number. version -1 is
// the latest.
func (s *store) deleteVersion(ctx context.Context, subject string, version int, permanent bool) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.sync(ctx); err != nil {
		return 0, writeError(err)
	}
	var (
		recs []logRecord
		num  int
		aerr *apiError
	)
	s.view(func(st *state) { num, recs, aerr = decideDeleteVersion(st, subject, version, permanent) })
	if aerr != nil {
		return 0, aerr
	}
	if err := s.produce(ctx, recs...); err != nil {
		return 0, writeError(err)
	}
	return num, nil
}

// decideDeleteVersion applies Confluent's rules: a soft delete needs a live
// version, a permanent one a soft-deleted version.
func decideDeleteVersion(st *state, subject string, version int, permanent bool) (int, []logRecord, *apiError) {
	sub := st.subjects[subject]
	if sub == nil || !permanent && sub.live() == 0 {
		return 0, nil, subjectNotFound(subject)
	}
	v := sub.find(version, permanent)
	if v == nil {
		v = sub.find(version, true)
	}
	switch {
	case v == nil:
		return 0, nil, versionNotFound(subject, version)
	case len(st.referencedBy(subject, v.number)) > 0:
		return 0, nil, referenceExists(st, subject, v.number)
	case !permanent && v.deleted:
		return 0, nil, errorf(codeVersionSoftDeleted, "Subject '%s' Version %d was soft deleted. Set permanent=true to delete permanently", subject, v.number)
	case permanent && !v.deleted:
		return 0, nil, errorf(codeVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted", subject, v.number)
	case permanent:
		return v.number, append(loserTombstones(st), hardDeleteRecords(st, v)...), nil
	default:
		return v.number, []logRecord{softDeleteRecord(v)}, nil
	}
}

// softDeleteRecord is a soft delete of v under a key of its own (see
// recordKey.Delete).
func softDeleteRecord(v *version) logRecord {
	return logRecord{deleteVersionKey(v.subject, v.number, v.nonce, uuid.NewString()), deleteVersionValue{Subject: v.subject, Version: v.number, Nonce: v.nonce}}
}

// loserTombstones are tombstones for the registrations that lost a race and
// have none yet. A permanent delete writes them before its own: a winner's
// record is then never tombstoned (and compacted away) while a loser it beat
// could still be read without its tombstone and taken for a winner.
func loserTombstones(st *state) []logRecord {
	var recs []logRecord
	for _, key := range st.rejected {
		recs = append(recs, logRecord{key: key})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].key.Nonce < recs[j].key.Nonce })
	return recs
}

// hardDeleteRecords are the records that remove a soft-deleted version:
// the id's marker (so the id is never reused), then tombstones for its soft
// deletes and its registration. A soft delete this view has not seen yet is
// left behind; it names a registration that is gone and is skipped.
func hardDeleteRecords(st *state, v *version) []logRecord {
	recs := []logRecord{{idKey(v.id), idValue{ID: v.id, Fingerprint: st.schemas[v.id].schema.fingerprint}}}
	for _, del := range v.deletes {
		recs = append(recs, logRecord{key: deleteVersionKey(v.subject, v.number, v.nonce, del)})
	}
	return append(recs, logRecord{key: schemaKey(v.subject, v.number, v.nonce)})
}

// deleteSubject soft-deletes every live version of subject (and its
// config), or, when permanent, hard-deletes a subject whose versions are all
// soft-deleted. It returns the version numbers deleted.
func (s *store) deleteSubject(ctx context.Context, subject string, permanent bool) ([]int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.sync(ctx); err != nil {
		return nil, writeError(err)
	}
	var (
		recs     []logRecord
		versions []int
		aerr     *apiError
	)
	s.view(func(st *state) { versions, recs, aerr = decideDeleteSubject(st, subject, permanent) })
	if aerr != nil {
		return nil, aerr
	}
	if err := s.produce(ctx, recs...); err != nil {
		return nil, writeError(err)
	}
	return versions, nil
}

func decideDeleteSubject(st *state, subject string, permanent bool) ([]int, []logRecord, *apiError) {
	sub := st.subjects[subject]
	switch {
	case sub == nil:
		return nil, nil, subjectNotFound(subject)
	case !permanent && sub.live() == 0:
		return nil, nil, errorf(codeSubjectSoftDeleted, "Subject '%s' was soft deleted. Set permanent=true to delete permanently", subject)
	case permanent && sub.live() > 0:
		return nil, nil, errorf(codeSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted", subject)
	}
	if n, ok := st.lowestReferenced(subject, sub); ok {
		return nil, nil, referenceExists(st, subject, n)
	}
	var recs []logRecord
	if permanent {
		recs = loserTombstones(st)
	}
	versions := []int{}
	for _, v := range sub.versions {
		switch {
		case permanent:
			recs = append(recs, hardDeleteRecords(st, v)...)
		case v.deleted:
			continue
		default:
			recs = append(recs, softDeleteRecord(v))
		}
		versions = append(versions, v.number)
	}
	if _, ok := st.configs[subject]; ok {
		recs = append(recs, logRecord{key: configKey(subject)})
	}
	return versions, recs, nil
}

// setConfig sets the compatibility level of subject ("" = global).
func (s *store) setConfig(ctx context.Context, subject, level string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.produce(ctx, logRecord{configKey(subject), configValue{Level: level}}); err != nil {
		return writeError(err)
	}
	return nil
}

// deleteConfig removes subject's level ("" = the global one, which falls
// back to BACKWARD) and returns the level it had.
func (s *store) deleteConfig(ctx context.Context, subject string) (string, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.sync(ctx); err != nil {
		return "", writeError(err)
	}
	var (
		old string
		ok  bool
	)
	s.view(func(st *state) { old, ok = st.configs[subject] })
	if !ok {
		if subject != "" {
			return "", errorf(codeSubjectCompatNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subject)
		}
		return DefaultLevel, nil
	}
	if err := s.produce(ctx, logRecord{key: configKey(subject)}); err != nil {
		return "", writeError(err)
	}
	return old, nil
}

// referenceExists refuses to delete a version other schemas reference, as
// Confluent does: a replay of the log could no longer parse them.
func referenceExists(st *state, subject string, version int) *apiError {
	by := st.referencedBy(subject, version)
	return errorf(codeReferenceExists, "One or more references exist to the schema {subject=%s, version=%d}: %d registration(s) reference it, the first %s version %d; delete them first", subject, version, len(by), by[0].Subject, by[0].Version)
}
