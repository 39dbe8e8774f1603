package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
)

// deadLetterPage is how many dead letters the list shows.
const deadLetterPage = 100

// maxShownInput bounds the event input the inspect page shows.
const maxShownInput = 16 << 10

type deadLetterRow struct {
	domain.DeadLetter
	URL, InstanceURL, Instance, InputType string
}

func deadLetterRowOf(d domain.DeadLetter) deadLetterRow {
	row := deadLetterRow{DeadLetter: d, URL: Path + "dead-letters/" + url.PathEscape(d.ID)}
	key := turn.InstanceKey{Swarm: d.Event.SwarmRef.Name, Key: d.Event.InstanceKey, Agent: d.Event.AgentName}
	if key.Validate() == nil {
		row.Instance, row.InstanceURL = key.String(), instancePath(key)
	}
	var in struct {
		Type string `json:"type"`
	}
	if json.Unmarshal([]byte(d.Event.Input), &in) == nil {
		row.InputType = in.Type
	}
	return row
}

type deadLettersData struct {
	Rows  []deadLetterRow
	Total int
}

// deadLetters lists the events that failed every delivery attempt:
// platform-wide, platform admins only.
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	if !op.Platform || c.cfg.DeadLetters == nil {
		return "", nil, forbidden
	}
	list, total, err := c.cfg.DeadLetters.ListDeadLetters(r.Context(), deadLetterPage)
	if err != nil {
		return "", nil, err
	}
	d := deadLettersData{Total: total}
	for _, dl := range list {
		d.Rows = append(d.Rows, deadLetterRowOf(dl))
	}
	return "deadletters", view{Title: "Dead letters", Nav: "deadletters", Data: d}, nil
}

type deadLetterData struct {
	deadLetterRow
	Input     string
	Truncated bool
	Auth      string
	Enqueued  time.Time
}

// deadLetter shows one dead letter: its event (target, type, input, the
// auth it carried — claims, never a token) and why it failed.
func (c *Console) deadLetter(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
	dl, err := c.findDeadLetter(r, op)
	if err != nil {
		return "", nil, err
	}
	d := deadLetterData{deadLetterRow: deadLetterRowOf(dl), Input: dl.Event.Input, Enqueued: dl.Event.EnqueuedAt}
	var pretty any
	if json.Unmarshal([]byte(d.Input), &pretty) == nil {
		d.Input = indented(pretty)
	}
	if len(d.Input) > maxShownInput {
		d.Input, d.Truncated = d.Input[:maxShownInput], true
	}
	d.Auth = indented(dl.Event.Auth)
	return "deadletter", view{Title: "Dead letter " + dl.ID, Nav: "deadletters", Data: d}, nil
}

// findDeadLetter is the dead letter the path names, among those listed.
func (c *Console) findDeadLetter(r *http.Request, op operator) (domain.DeadLetter, error) {
	if !op.Platform || c.cfg.DeadLetters == nil {
		return domain.DeadLetter{}, forbidden
	}
	id := r.PathValue("id")
	if domain.ValidateDeadLetterID(id) != nil {
		return domain.DeadLetter{}, errNotFound
	}
	list, _, err := c.cfg.DeadLetters.ListDeadLetters(r.Context(), deadLetterPage)
	if err != nil {
		return domain.DeadLetter{}, err
	}
	for _, dl := range list {
		if dl.ID == id {
			return dl, nil
		}
	}
	return domain.DeadLetter{}, errNotFound
}

// redrive queues a dead letter's event again (same event id: an event
// that did land meanwhile is a duplicate the engine drops).
func (c *Console) redrive(w http.ResponseWriter, r *http.Request, op operator) (string, error) {
	if !op.Platform || c.cfg.DeadLetters == nil {
		return "", forbidden
	}
	id := r.PathValue("id")
	if domain.ValidateDeadLetterID(id) != nil {
		return "", errNotFound
	}
	if err := c.cfg.DeadLetters.RedriveDeadLetter(r.Context(), id); err != nil {
		return "", err
	}
	c.cfg.Log.InfoContext(r.Context(), "console action", "action", "redrive", "operator", op.Subject, "deadLetter", id)
	return Path + "dead-letters?done=" + url.QueryEscape("redriven "+id), nil
}

// indented is v as indented JSON for a page (the template escapes it; no
// \u003c escapes to make it unreadable).
func indented(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}
