package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// contentType is the type of every answer, as Confluent's registry sends.
const contentType = "application/vnd.schemaregistry.v1+json"

// endpoint answers one route: a value to send as JSON (or rawJSON), or an
// error (an *apiError for the client, anything else is a 500).
type endpoint func(req *request) (any, error)

// rawJSON is an answer sent as is (a schema's text).
type rawJSON string

// request is what an endpoint gets: the HTTP request, its bounded body and
// a context bounded by the write timeout.
type request struct {
	*http.Request
	ctx     context.Context
	body    []byte
	release func() // gives back the body's slot, when it holds one
}

// maxBodiesInFlight bounds the request bodies held at once.
const maxBodiesInFlight = 64

func (r *Registry) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, e endpoint) { mux.Handle(pattern, r.wrap(pattern, e)) }
	handle("GET /{$}", func(*request) (any, error) { return struct{}{}, nil })
	handle("GET /schemas/types", func(*request) (any, error) { return []string{"AVRO"}, nil })
	handle("GET /subjects", r.listSubjects)
	handle("GET /subjects/{subject}/versions", r.listVersions)
	handle("POST /subjects/{subject}/versions", r.registerSchema)
	handle("GET /subjects/{subject}/versions/{version}", r.getVersion)
	handle("GET /subjects/{subject}/versions/{version}/schema", r.getVersionSchema)
	handle("DELETE /subjects/{subject}/versions/{version}", r.deleteVersion)
	handle("POST /subjects/{subject}", r.lookupSchema)
	handle("DELETE /subjects/{subject}", r.deleteSubject)
	handle("GET /schemas/ids/{id}", r.getSchemaByID)
	handle("GET /schemas/ids/{id}/schema", r.getSchemaTextByID)
	handle("GET /schemas/ids/{id}/versions", r.getIDVersions)
	handle("GET /schemas/ids/{id}/subjects", r.getIDSubjects)
	handle("GET /config", r.getConfig)
	handle("PUT /config", r.putConfig)
	handle("DELETE /config", r.deleteConfig)
	handle("GET /config/{subject}", r.getConfig)
	handle("PUT /config/{subject}", r.putConfig)
	handle("DELETE /config/{subject}", r.deleteConfig)
	handle("POST /compatibility/subjects/{subject}/versions/{version}", r.checkCompatibility)
	handle("POST /compatibility/subjects/{subject}/versions", r.checkCompatibility)
	mux.Handle("GET /metrics", r.metricsHandler())
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, pattern := mux.Handler(req); pattern != "" {
			mux.ServeHTTP(w, req)
			return
		}
		// No route: a JSON 405 when another method has one, else 404.
		code, msg := codeNotFound, "HTTP 404 Not Found"
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
			probe := req.Clone(req.Context())
			probe.Method = m
			if _, p := mux.Handler(probe); p != "" {
				code, msg = codeMethodNotAllowed, "HTTP 405 Method Not Allowed"
				break
			}
		}
		r.metrics.requests.WithLabelValues("unmatched", strconv.Itoa(code)).Inc()
		writeJSON(w, code, errorBody{Code: code, Message: msg})
	})
}

type errorBody struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// wrap adds to an endpoint what every route needs: content-type check,
// bounded body, timeout, panic guard, metrics, logs and the error shape.
func (r *Registry) wrap(pattern string, e endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(hr.Context(), r.opts.WriteTimeout)
		defer cancel()
		status := http.StatusOK
		req := &request{Request: hr, ctx: ctx}
		defer func() {
			if req.release != nil {
				req.release()
			}
			if p := recover(); p != nil {
				r.logger.Error("schema registry: handler panic (a bug)", "route", pattern, "panic", p)
				status = http.StatusInternalServerError
				writeJSON(w, status, errorBody{Code: codeStoreError, Message: "Internal error"})
			}
			r.metrics.requests.WithLabelValues(pattern, strconv.Itoa(status)).Inc()
			r.metrics.latency.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
			r.logger.Debug("schema registry request", "method", hr.Method, "path", hr.URL.Path, "status", status, "elapsed", time.Since(start))
		}()
		var answer any
		err := r.prepare(req)
		if err == nil {
			answer, err = e(req)
		}
		if err != nil {
			var aerr *apiError
			if !errors.As(err, &aerr) {
				aerr = storeError(err)
			}
			if aerr.status() >= 500 {
				r.logger.Warn("schema registry: request failed", "route", pattern, "err", err)
			}
			status = aerr.status()
			writeJSON(w, status, errorBody{Code: aerr.code, Message: aerr.message})
			return
		}
		if raw, ok := answer.(rawJSON); ok {
			w.Header().Set("Content-Type", contentType)
			_, _ = io.WriteString(w, string(raw))
			return
		}
		writeJSON(w, status, answer)
	})
}

// prepare checks the content type and the subject, and reads the body up to
// the limit, holding one of the bodies slots: at most maxBodiesInFlight
// bodies are read or held at once, so requests in flight hold at most that
// many times MaxRequestBytes; the others wait for a slot.
func (r *Registry) prepare(req *request) error {
	if strings.Contains(req.Pattern, "{subject}") {
		if aerr := checkSubject(req.PathValue("subject")); aerr != nil {
			return aerr
		}
	}
	if req.Method != http.MethodPost && req.Method != http.MethodPut {
		return nil
	}
	if aerr := checkContentType(req.Header.Get("Content-Type")); aerr != nil {
		return aerr
	}
	select {
	case r.bodies <- struct{}{}:
		req.release = func() { <-r.bodies }
	case <-req.ctx.Done():
		return errorf(codeOperationTimeout, "Too many requests in flight; retry")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, r.opts.MaxRequestBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			r.metrics.reqTooBig.Inc()
			return errorf(codeRequestEntityTooLarge, "The request body is larger than %d bytes", r.opts.MaxRequestBytes)
		}
		return errorf(codeBadRequest, "Reading the request body failed: %v", err)
	}
	req.body = body
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error_code":50001,"message":"Internal error: cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
