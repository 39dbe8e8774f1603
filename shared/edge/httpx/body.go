package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// DefaultMaxBody bounds a JSON request body; a route that legitimately
// needs more (a tool's arguments, a tenant upload) passes its own limit.
const DefaultMaxBody = 64 << 10

// ReadBody reads the request body for a route that hands the bytes on (a
// tenant upload): a Content-Type other than application/json is 415, a
// body over limit bytes 413. It writes the error answer itself and
// reports whether body is usable.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	if !jsonContentType(r.Header.Get("Content-Type")) {
		WriteError(w, r, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type must be application/json")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		WriteError(w, r, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, fmt.Sprintf("request body larger than %d bytes", limit))
		return nil, false
	case err != nil:
		WriteError(w, r, http.StatusBadRequest, CodeInvalidRequest, "request body could not be read")
		return nil, false
	}
	return body, true
}

// DecodeJSON reads the request body by ReadBody's rules and decodes it
// strictly into v (Unmarshal): one JSON value, no unknown field and no
// field name in another case (at any depth), no duplicate key (at any
// depth), no data after it. A problem is a 400 that names the field, key
// or byte offset, never the input. It writes the error answer itself and
// reports whether v was filled.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	body, ok := ReadBody(w, r, limit)
	if !ok {
		return false
	}
	if err := Unmarshal(body, v); err != nil {
		WriteError(w, r, http.StatusBadRequest, CodeInvalidRequest, "request body: "+JSONProblem(err))
		return false
	}
	return true
}

// ReadJSON is ReadBody for a route that hands a JSON body on (a tenant
// upload) to a reader of its own: the body must also be one JSON value
// without a duplicate key at any depth and nothing after it, else 400
// as DecodeJSON answers.
func ReadJSON(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, ok := ReadBody(w, r, limit)
	if !ok {
		return nil, false
	}
	if err := Unmarshal(body, new(json.RawMessage)); err != nil {
		WriteError(w, r, http.StatusBadRequest, CodeInvalidRequest, "request body: "+JSONProblem(err))
		return nil, false
	}
	return body, true
}

// jsonContentType accepts a request without Content-Type (many clients
// send none with a JSON body) and application/json with any parameters;
// anything else, a form post included, is not JSON.
func jsonContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// JSONProblem describes a decode error (Unmarshal's) by position, field,
// key and type, never by echoing a value: the request's own cases here,
// the rest as a stored record's (domain.JSONErrorWithoutContent).
func JSONProblem(err error) string {
	var te *json.UnmarshalTypeError
	var ke *KeyError
	switch {
	case errors.As(err, &ke):
		return ke.Error()
	case errors.Is(err, errTrailing):
		return errTrailing.Error()
	case errors.Is(err, io.EOF):
		return "empty body; want a JSON object"
	case errors.As(err, &te) && te.Field == "":
		return "want a JSON object, not " + te.Value
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for it; the name is quoted.
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return domain.JSONErrorWithoutContent(err)
}
