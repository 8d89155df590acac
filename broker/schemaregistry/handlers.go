package schemaregistry

import (
	"context"
	"slices"
	"sort"
	"time"
)

// subjectVersion is a version's answer: GET /subjects/{s}/versions/{v} and
// POST /subjects/{s}.
type subjectVersion struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"` // none for AVRO, as Confluent answers
	References []reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

// versionOf is the answer for version v of subject holding ps.
func versionOf(subject string, v *version, ps parsedSchema) subjectVersion {
	return subjectVersion{Subject: subject, Version: v.number, ID: v.id, SchemaType: ps.typeName(), References: ps.references, Schema: ps.canonical}
}

func (r *Registry) listSubjects(req *request) (any, error) {
	var names []string
	r.store.view(func(st *state) { names = st.subjectNames(queryBool(req.URL.Query().Get("deleted"))) })
	return slices.DeleteFunc(names, func(n string) bool { return !r.mayRead(req, n) }), nil
}

func (r *Registry) listVersions(req *request) (any, error) {
	subject, deleted := req.PathValue("subject"), queryBool(req.URL.Query().Get("deleted"))
	versions := []int{}
	r.store.view(func(st *state) {
		if sub := st.subjects[subject]; sub != nil {
			for _, v := range sub.versions {
				if deleted || !v.deleted {
					versions = append(versions, v.number)
				}
			}
		}
	})
	if len(versions) == 0 {
		return nil, subjectNotFound(subject)
	}
	return versions, nil
}

// findVersion resolves the {subject}/{version} of a request.
func (r *Registry) findVersion(req *request) (subjectVersion, error) {
	subject := req.PathValue("subject")
	n, aerr := parseVersion(req.PathValue("version"))
	if aerr != nil {
		return subjectVersion{}, aerr
	}
	deleted := queryBool(req.URL.Query().Get("deleted"))
	var out subjectVersion
	r.store.view(func(st *state) {
		sub := st.subjects[subject]
		if sub == nil || !deleted && sub.live() == 0 {
			aerr = subjectNotFound(subject)
			return
		}
		v := sub.find(n, deleted)
		if v == nil {
			aerr = versionNotFound(subject, n)
			return
		}
		out = versionOf(subject, v, st.schemas[v.id].schema)
	})
	if aerr != nil {
		return out, aerr
	}
	return out, nil
}

func (r *Registry) getVersion(req *request) (any, error) { return r.findVersion(req) }

// getReferencedBy serves /subjects/{subject}/versions/{version}/referencedby:
// the ids of the schemas that reference that version (Confluent's answer, a
// JSON array of ids, ascending).
func (r *Registry) getReferencedBy(req *request) (any, error) {
	sv, err := r.findVersion(req)
	if err != nil {
		return nil, err
	}
	ids := []int{}
	r.store.view(func(st *state) {
		for _, by := range st.referencedBy(sv.Subject, sv.Version) {
			ids = append(ids, by.ID)
		}
	})
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func (r *Registry) getVersionSchema(req *request) (any, error) {
	sv, err := r.findVersion(req)
	if err != nil {
		return nil, err
	}
	return rawJSON(sv.Schema), nil
}

func (r *Registry) registerSchema(req *request) (any, error) {
	ps, aerr := r.parseSubmission(req)
	if aerr != nil {
		return nil, aerr
	}
	id, err := r.store.register(req.ctx, req.PathValue("subject"), ps, newCheckBudget(r.opts.MaxCheckSteps))
	if err != nil {
		return nil, err
	}
	return struct {
		ID int `json:"id"`
	}{id}, nil
}

func (r *Registry) lookupSchema(req *request) (any, error) {
	subject := req.PathValue("subject")
	ps, aerr := r.parseSubmission(req)
	if aerr != nil {
		return nil, aerr
	}
	deleted := queryBool(req.URL.Query().Get("deleted"))
	var out subjectVersion
	r.store.view(func(st *state) {
		sub := st.subjects[subject]
		if sub == nil || !deleted && sub.live() == 0 {
			aerr = subjectNotFound(subject)
			return
		}
		id, known := st.idByCanon[ps.key]
		for i := len(sub.versions) - 1; known && i >= 0; i-- {
			v := sub.versions[i]
			if (deleted || !v.deleted) && v.id == id {
				out = versionOf(subject, v, st.schemas[id].schema)
				return
			}
		}
		aerr = schemaNotFound()
	})
	if aerr != nil {
		return nil, aerr
	}
	return out, nil
}

func (r *Registry) deleteVersion(req *request) (any, error) {
	n, aerr := parseVersion(req.PathValue("version"))
	if aerr != nil {
		return nil, aerr
	}
	return r.store.deleteVersion(req.ctx, req.PathValue("subject"), n, queryBool(req.URL.Query().Get("permanent")))
}

func (r *Registry) deleteSubject(req *request) (any, error) {
	return r.store.deleteSubject(req.ctx, req.PathValue("subject"), queryBool(req.URL.Query().Get("permanent")))
}

// schemaByID finds an id's schema. An unknown id may have been registered
// through another instance a moment ago: the registry catches up with the
// topic once before answering 40403.
func (r *Registry) schemaByID(req *request) (int, parsedSchema, error) {
	id, aerr := parseID(req.PathValue("id"))
	if aerr != nil {
		return 0, parsedSchema{}, aerr
	}
	lookup := func() (ps parsedSchema, ok bool) {
		r.store.view(func(st *state) {
			if e := st.schemas[id]; e != nil {
				ps, ok = e.schema, true
			}
		})
		return ps, ok
	}
	if ps, ok := lookup(); ok {
		return id, ps, nil
	}
	ctx, cancel := context.WithTimeout(req.ctx, 5*time.Second)
	defer cancel()
	if err := r.store.sync(ctx); err != nil {
		return 0, parsedSchema{}, writeError(err)
	}
	if ps, ok := lookup(); ok {
		return id, ps, nil
	}
	return 0, parsedSchema{}, schemaIDNotFound(id)
}

func (r *Registry) getSchemaByID(req *request) (any, error) {
	_, ps, err := r.schemaByID(req)
	if err != nil {
		return nil, err
	}
	return struct {
		SchemaType string      `json:"schemaType,omitempty"`
		References []reference `json:"references,omitempty"`
		Schema     string      `json:"schema"`
	}{ps.typeName(), ps.references, ps.canonical}, nil
}

func (r *Registry) getSchemaTextByID(req *request) (any, error) {
	_, ps, err := r.schemaByID(req)
	if err != nil {
		return nil, err
	}
	return rawJSON(ps.canonical), nil
}

// idUsages lists the subject-versions that use the request's id.
func (r *Registry) idUsages(req *request) ([]subjectVersion, error) {
	id, _, err := r.schemaByID(req)
	if err != nil {
		return nil, err
	}
	deleted := queryBool(req.URL.Query().Get("deleted"))
	var out []subjectVersion
	r.store.view(func(st *state) {
		for _, v := range st.byNonce {
			if v.id == id && (deleted || !v.deleted) && r.mayRead(req, v.subject) {
				out = append(out, subjectVersion{Subject: v.subject, Version: v.number})
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		return out[i].Subject < out[j].Subject || out[i].Subject == out[j].Subject && out[i].Version < out[j].Version
	})
	return out, nil
}

func (r *Registry) getIDVersions(req *request) (any, error) {
	usages, err := r.idUsages(req)
	if err != nil {
		return nil, err
	}
	type sv struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	out := []sv{}
	for _, u := range usages {
		out = append(out, sv{u.Subject, u.Version})
	}
	return out, nil
}

func (r *Registry) getIDSubjects(req *request) (any, error) {
	usages, err := r.idUsages(req)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, u := range usages {
		if len(out) == 0 || out[len(out)-1] != u.Subject {
			out = append(out, u.Subject)
		}
	}
	return out, nil
}

type configAnswer struct {
	Level string `json:"compatibilityLevel"`
}

func (r *Registry) getConfig(req *request) (any, error) {
	subject := req.PathValue("subject")
	var (
		level string
		ok    bool
	)
	r.store.view(func(st *state) {
		level, ok = st.configs[subject]
		if !ok && (subject == "" || queryBool(req.URL.Query().Get("defaultToGlobal"))) {
			level, ok = st.level(""), true
		}
	})
	if !ok {
		return nil, errorf(codeSubjectCompatNotConfigured, "Subject '%s' does not have subject-level compatibility configured", subject)
	}
	return configAnswer{level}, nil
}

func (r *Registry) putConfig(req *request) (any, error) {
	level, aerr := parseConfigRequest(req.body)
	if aerr != nil {
		return nil, aerr
	}
	if err := r.store.setConfig(req.ctx, req.PathValue("subject"), level); err != nil {
		return nil, err
	}
	return struct {
		Compatibility string `json:"compatibility"`
	}{level}, nil
}

func (r *Registry) deleteConfig(req *request) (any, error) {
	old, err := r.store.deleteConfig(req.ctx, req.PathValue("subject"))
	if err != nil {
		return nil, err
	}
	return configAnswer{old}, nil
}

// checkCompatibility answers POST /compatibility/subjects/{s}/versions/{v}:
// the schema against that one version (latest = the newest live one) in the
// direction of the subject's level; without {v}, against the versions the
// level names (the latest, or all for the transitive levels), as a
// registration would be checked. The versions are taken under the state's
// read lock; the check runs outside it, within the check bound.
func (r *Registry) checkCompatibility(req *request) (any, error) {
	subject := req.PathValue("subject")
	n, all := 0, req.PathValue("version") == ""
	if !all {
		var aerr *apiError
		if n, aerr = parseVersion(req.PathValue("version")); aerr != nil {
			return nil, aerr
		}
	}
	ps, aerr := r.parseSubmission(req)
	if aerr != nil {
		return nil, aerr
	}
	var (
		level   string
		against []parsedSchema
	)
	r.store.view(func(st *state) {
		sub := st.subjects[subject]
		if sub == nil || sub.live() == 0 {
			if all {
				return // nothing to be incompatible with
			}
			aerr = subjectNotFound(subject)
			return
		}
		level = st.level(subject)
		if all {
			for _, v := range sub.versions {
				if !v.deleted {
					against = append(against, st.schemas[v.id].schema)
				}
			}
		} else {
			v := sub.find(n, false)
			if v == nil {
				aerr = versionNotFound(subject, n)
				return
			}
			against = []parsedSchema{st.schemas[v.id].schema}
			level = nonTransitive(level)
		}
	})
	if aerr != nil {
		return nil, aerr
	}
	if r.hooks.checking != nil {
		r.hooks.checking(subject)
	}
	budget := newCheckBudget(r.opts.MaxCheckSteps)
	reasons, err := checkCompatible(level, ps, against, budget)
	if err != nil {
		return nil, checkBoundError(subject, level, len(against), budget)
	}
	type answer struct {
		Is       bool      `json:"is_compatible"`
		Messages *[]string `json:"messages,omitempty"`
	}
	out := answer{Is: len(reasons) == 0}
	if queryBool(req.URL.Query().Get("verbose")) {
		if reasons == nil {
			reasons = []string{}
		}
		out.Messages = &reasons
	}
	return out, nil
}

func nonTransitive(level string) string {
	switch level {
	case LevelBackwardTransitive:
		return LevelBackward
	case LevelForwardTransitive:
		return LevelForward
	case LevelFullTransitive:
		return LevelFull
	}
	return level
}
