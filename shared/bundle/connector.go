package bundle

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentauth/agentauth/shared/domain"
)

// minWebhookKey is the shortest HMAC-SHA256 key, in bytes, that is not a
// warning: the hash's own size (RFC 2104 §3).
const minWebhookKey = 32

func decodeConnector(r *res, d *document) {
	spec := r.spec(d, "type", "url", "secret", "events")
	if spec == nil {
		return
	}
	c := &Connector{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	if t := spec.oneOf("type", true, ConnectorTypeWebhook); t.OK {
		c.Type = t.Value
	}
	u := r.urlField(spec, "url", true)
	if !u.Present && !spec.bad {
		r.errorf(u.Line, spec.field("url"), "required")
	}
	c.URL = u.Value
	if v, ok := r.valueSource(spec, "secret", true); ok {
		c.Secret = domain.NewSecret(v)
		if len(v) < minWebhookKey {
			_, line := spec.get("secret")
			r.warnf(line, spec.field("secret"), "shorter than %d bytes: use a random HMAC-SHA256 key of at least %d bytes", minWebhookKey, minWebhookKey)
		}
	}
	c.Events = connectorEvents(r, spec)

	keepFirst(r.l.b.Connectors, c.Name, c)
}

// connectorEvents reads spec.events: DefaultConnectorEvents when absent,
// else a non-empty list of distinct known events.
func connectorEvents(r *res, spec *mapping) []string {
	known := []string{ConnectorEventTurnStarted, ConnectorEventTurnParked, ConnectorEventTurnCompleted, ConnectorEventTurnFailed}
	n, line := spec.get("events")
	if n == nil {
		return DefaultConnectorEvents()
	}
	events, _ := spec.stringList("events", func(s string) string {
		if !slices.Contains(known, s) {
			return fmt.Sprintf("%q is not a turn event a connector delivers; known: %s", s, strings.Join(known, ", "))
		}
		return ""
	})
	if n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		r.errorf(line, spec.field("events"), "must not be empty; leave it out for the default (%s)", strings.Join(DefaultConnectorEvents(), ", "))
	}
	return events
}
