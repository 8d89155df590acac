package schemaregistry

import (
	"errors"
	"fmt"
	"net/http"
)

// Package sentinels, for callers embedding the registry.
var (
	// ErrClosed is returned by a registry that was closed.
	ErrClosed = errors.New("schemaregistry: closed")
	// ErrStore wraps a failure to read or write the _schemas topic.
	ErrStore = errors.New("schemaregistry: store")
	// ErrTopic is returned when the _schemas topic exists with a layout the
	// registry cannot use (more than one partition).
	ErrTopic = errors.New("schemaregistry: topic")
)

// Confluent Schema Registry error codes (the "error_code" of an error body).
// The HTTP status is the code's first three digits.
const (
	codeSubjectNotFound            = 40401
	codeVersionNotFound            = 40402
	codeSchemaNotFound             = 40403
	codeSubjectSoftDeleted         = 40404
	codeSubjectNotSoftDeleted      = 40405
	codeVersionSoftDeleted         = 40406
	codeVersionNotSoftDeleted      = 40407
	codeSubjectCompatNotConfigured = 40408
	codeIncompatibleSchema         = 409
	codeInvalidSchema              = 42201
	codeInvalidVersion             = 42202
	codeInvalidCompatibilityLevel  = 42203
	codeReferenceExists            = 42206
	codeInvalidSubject             = 42208
	codeSchemaTooLarge             = 42209
	codeStoreError                 = 50001
	codeOperationTimeout           = 50002
	codeUnprocessable              = 422
	codeBadRequest                 = 400
	codeNotFound                   = 404
	codeUnauthorized               = 401
	codeForbidden                  = 40301
	codeMethodNotAllowed           = 405
	codeUnsupportedMediaType       = 415
	codeRequestEntityTooLarge      = 413
	codeRequestTimeout             = 408 // the body did not arrive in time
)

// apiError is an error answered to a client: the Confluent error body
// {"error_code": code, "message": message}.
type apiError struct {
	code    int
	message string
	cause   error // kept for logs, never shown
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.code, e.message) }
func (e *apiError) Unwrap() error { return e.cause }

// status is the HTTP status of the error: the first three digits of a
// five-digit code, the code itself otherwise.
func (e *apiError) status() int {
	if e.code >= 10000 {
		return e.code / 100
	}
	if e.code < 100 || e.code > 599 {
		return http.StatusInternalServerError
	}
	return e.code
}

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{code: code, message: fmt.Sprintf(format, args...)}
}

func subjectNotFound(subject string) *apiError {
	return errorf(codeSubjectNotFound, "Subject '%s' not found.", subject)
}

func versionNotFound(subject string, version int) *apiError {
	return errorf(codeVersionNotFound, "Version %d not found for subject '%s'.", version, subject)
}

func schemaNotFound() *apiError { return errorf(codeSchemaNotFound, "Schema not found") }

func schemaIDNotFound(id int) *apiError {
	return errorf(codeSchemaNotFound, "Schema %d not found", id)
}

func invalidVersion(v string) *apiError {
	return errorf(codeInvalidVersion, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", v)
}

func storeError(err error) *apiError {
	return &apiError{code: codeStoreError, message: "Error in the _schemas topic store: " + err.Error(), cause: err}
}
