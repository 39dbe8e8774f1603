package scripted

import (
	"net"
	"net/http"
)

// DebugRequestsPath is the scripted model's test hook: GET lists what it
// received, oldest first, as Seen values — for a test that runs it in
// another process (`agentauth scripted-model`) and cannot call Requests.
// It answers loopback callers only.
const DebugRequestsPath = "/debug/requests"

// Seen is what DebugRequestsPath shows of one request: never a header
// (an adapter sends its API key) nor the body.
type Seen struct {
	Wire   string `json:"wire"`
	Model  string `json:"model,omitempty"`
	Status int    `json:"status"`
	// Turn is the index of the script turn that answered (-1: none).
	Turn int `json:"turn"`
	// User is the text of the user's last message.
	User string `json:"user"`
	// Results names the tools whose results the request ends with.
	Results []string `json:"results"`
	// Tools are the names of the tools the request offered, as the wire
	// had them.
	Tools []string `json:"tools"`
	// Calls are the tools the answer called.
	Calls []string `json:"calls"`
}

// Seen lists Requests as DebugRequestsPath shows them.
func (s *Server) Seen() []Seen {
	reqs := s.Requests()
	out := make([]Seen, 0, len(reqs))
	for _, r := range reqs {
		e := endingOf(r.Messages)
		v := Seen{Wire: r.Wire, Model: r.Model, Status: r.Status, Turn: r.Turn, User: e.said,
			Results: []string{}, Tools: []string{}, Calls: append([]string{}, r.Calls...)}
		for _, res := range e.results {
			v.Results = append(v.Results, res.tool)
		}
		for _, t := range r.Tools {
			v.Tools = append(v.Tools, t.Name)
		}
		out = append(out, v)
	}
	return out
}

func (s *Server) serveSeen(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		http.Error(w, "the scripted model's request list answers loopback callers only", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"requests": s.Seen()})
}
