package httpx

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Error codes shared by every route. Routes add their own (grantNotFound,
// conflict, …); the tool hooks' forbidden and rate_limited are RFC 0064's.
const (
	CodeInvalidRequest       = "invalidRequest"
	CodeUnauthenticated      = "unauthenticated"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "notFound"
	CodeMethodNotAllowed     = "methodNotAllowed"
	CodePayloadTooLarge      = "payloadTooLarge"
	CodeUnsupportedMediaType = "unsupportedMediaType"
	CodeNotAcceptable        = "notAcceptable"
	CodeInternal             = "internal"
)

// Problem is the error object of every error answer. RequestID is the
// request's X-Request-Id (set by Observe) so a caller can quote it.
type Problem struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details,omitempty"`
	RequestID string         `json:"requestId,omitempty"`
}

// ErrorBody is the error answer: {"error": Problem}.
type ErrorBody struct {
	Error Problem `json:"error"`
}

// NewProblem builds the error object for status. A 5xx message is replaced
// by a fixed text for the status: what failed is in the log line of the
// request id, never in the answer.
func NewProblem(r *http.Request, status int, code, message string, details map[string]any) Problem {
	if status >= 500 {
		message = serverMessage(status)
	}
	return Problem{Code: code, Message: message, Details: details, RequestID: RequestID(r.Context())}
}

func serverMessage(status int) string {
	switch status {
	case http.StatusNotImplemented:
		return "not enabled on this server"
	case http.StatusServiceUnavailable:
		return "temporarily unavailable; retry later"
	}
	return "internal error; quote the request id when reporting it"
}

// WriteError writes the error answer; a 401 also says how to authenticate.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	WriteErrorDetails(w, r, status, code, message, nil)
}

// WriteErrorDetails is WriteError with details (e.g. the 401 reason, an
// upload's problems by field).
func WriteErrorDetails(w http.ResponseWriter, r *http.Request, status int, code, message string, details map[string]any) {
	if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		// A route with its own challenge (the MCP server's, naming its
		// protected resource metadata) has set it already.
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentauth"`)
	}
	WriteJSON(w, status, ErrorBody{Error: NewProblem(r, status, code, message, details)})
}

// WriteJSON writes v as a JSON answer that no cache keeps.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // URLs stay copy-pasteable (&, not \u0026); never rendered as HTML
	_ = enc.Encode(v)
}

// NotFound answers a request no route matched.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteError(w, r, http.StatusNotFound, CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// Unmatched is mux's catch-all "/" route: a path that a route of mux
// serves with other methods is 405 methodNotAllowed with an Allow header
// listing them (HEAD with GET, as ServeMux serves it), anything else
// NotFound. ServeMux answers 405 itself only when no pattern matches the
// path at all, which a catch-all always does — and its answer is
// text/plain, not the one error body.
func Unmatched(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow := allowedMethods(mux, r)
		if len(allow) == 0 {
			NotFound(w, r)
			return
		}
		list := strings.Join(allow, ", ")
		w.Header().Set("Allow", list)
		WriteError(w, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.URL.Path+" takes "+list+", not "+r.Method)
	})
}

// routeMethods are the methods Unmatched tries a path with.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// allowedMethods are the methods with which a route of mux other than
// the catch-all would take r's path.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var allow []string
	probe := r.WithContext(r.Context()) // a shallow copy whose method may change
	for _, m := range routeMethods {
		if m == r.Method {
			continue
		}
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	return allow
}
