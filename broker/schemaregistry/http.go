package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
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
	ctx  context.Context
	body []byte
	held int64  // bytes of the bodies' budget this request holds
	slot bool   // whether it holds a work slot
	user string // the authenticated user (Options.Auth), or ""
}

// maxBodiesInFlight bounds the requests with a body at work at once (each
// holds a work slot while it is parsed, checked and written), and, times
// MaxRequestBytes, the bytes of the bodies read or held at once.
const maxBodiesInFlight = 64

// bodyChunk is what a body read reserves of the bodies' bytes before each
// read: a client that sends its body slowly holds this much, not a slot.
const bodyChunk = 16 << 10

func (r *Registry) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, e endpoint) { mux.Handle(pattern, r.wrap(pattern, e)) }
	handle("GET /{$}", func(*request) (any, error) { return struct{}{}, nil })
	handle("GET /schemas/types", func(*request) (any, error) { return []string{"AVRO", "JSON", "PROTOBUF"}, nil })
	handle("GET /subjects", r.listSubjects)
	handle("GET /subjects/{subject}/versions", r.listVersions)
	handle("POST /subjects/{subject}/versions", r.registerSchema)
	handle("GET /subjects/{subject}/versions/{version}", r.getVersion)
	handle("GET /subjects/{subject}/versions/{version}/schema", r.getVersionSchema)
	handle("DELETE /subjects/{subject}/versions/{version}", r.deleteVersion)
	handle("GET /subjects/{subject}/versions/{version}/referencedby", r.getReferencedBy)
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
			r.bodyBytes.release(req.held)
			if req.slot {
				<-r.slots
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
		var err error
		if user, aerr := r.authorize(ctx, pattern, hr); aerr != nil {
			if aerr.code == codeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Basic realm="sluice-schema-registry"`)
			}
			err = aerr
		} else {
			req.user = user
			err = r.prepare(w, req)
		}
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

// prepare checks the content type and the subject, and reads the body.
// A body is read before the request takes a work slot, under the body
// timeout and the size bound, holding bytes of the bodies' budget for what
// has arrived (and bodyChunk for the read in progress): a client that
// sends its body slowly holds a few KiB for at most the body timeout, and
// never a slot. Then the request waits for one of the maxBodiesInFlight
// work slots, at most until its write timeout.
func (r *Registry) prepare(w http.ResponseWriter, req *request) error {
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
	if req.ContentLength > r.opts.MaxRequestBytes {
		w.Header().Set("Connection", "close")
		return r.tooLarge()
	}
	body, aerr := r.readBody(w, req)
	if aerr != nil {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		return aerr
	}
	req.body = body
	select {
	case r.slots <- struct{}{}:
		req.slot = true
	case <-req.ctx.Done():
		return errorf(codeOperationTimeout, "Too many requests in flight; retry")
	}
	return nil
}

// readBody reads the request's body, at most MaxRequestBytes of it, within
// the body timeout.
func (r *Registry) readBody(w http.ResponseWriter, req *request) ([]byte, *apiError) {
	if r.hooks.readingBody != nil {
		r.hooks.readingBody()
	}
	deadline := time.Now().Add(r.opts.BodyTimeout)
	rc := http.NewResponseController(w)
	// Without a connection to set the deadline on (the handler mounted in
	// another server), that server's ReadTimeout bounds the body.
	bounded := rc.SetReadDeadline(deadline) == nil
	ctx, cancel := context.WithDeadline(req.ctx, deadline)
	defer cancel()
	src := http.MaxBytesReader(w, req.Body, r.opts.MaxRequestBytes)
	var body []byte
	for {
		if err := r.bodyBytes.acquire(ctx, bodyChunk); err != nil {
			return nil, errorf(codeOperationTimeout, "Too many request bodies in flight; retry")
		}
		req.held += bodyChunk
		body = slices.Grow(body, bodyChunk)
		n, err := src.Read(body[len(body) : len(body)+bodyChunk])
		body = body[:len(body)+n]
		r.bodyBytes.release(int64(bodyChunk - n)) // keep what arrived
		req.held -= int64(bodyChunk - n)
		if err == io.EOF {
			break
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				return nil, r.tooLarge()
			case errors.Is(err, os.ErrDeadlineExceeded):
				r.metrics.bodyTimeouts.Inc()
				return nil, errorf(codeRequestTimeout, "The request body did not arrive within %s; send it in one go, or raise the registry's body timeout", r.opts.BodyTimeout)
			}
			return nil, errorf(codeBadRequest, "Reading the request body failed: %v", err)
		}
	}
	if bounded {
		// The whole body is in: no deadline on the connection while the
		// request works (an expired one would cancel the request).
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, nil
}

func (r *Registry) tooLarge() *apiError {
	r.metrics.reqTooBig.Inc()
	return errorf(codeRequestEntityTooLarge, "The request body is larger than %d bytes", r.opts.MaxRequestBytes)
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
