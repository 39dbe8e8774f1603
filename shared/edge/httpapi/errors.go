package httpapi

import (
	"encoding/json"
	"net/http"
)

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"requestId,omitempty"`
	} `json:"error"`
}

// writeError is the one place that turns a failure into an HTTP answer. A
// 5xx never carries a message of its own: only a generic text and the
// request id to find the log line.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	var b errorBody
	b.Error.Code = code
	b.Error.Message = message
	if status >= 500 {
		b.Error.Message = "internal error; quote the request id when reporting it"
		b.Error.RequestID = w.Header().Get("X-Request-Id")
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentauth"`)
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // URLs stay copy-pasteable (&, not \u0026); never rendered as HTML
	_ = enc.Encode(v)
}
