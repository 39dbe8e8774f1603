package toolhooks

import (
	"encoding/json"
	"testing"
)

// benchArgs is a realistic 1 KB tool call: a reporting query with a nested
// database config holding a password, request headers with a bearer JWT,
// filters, free text and a checksum (long hex, redacted too).
const benchArgs = `{
  "query": "SELECT id, name, email FROM customers WHERE region = 'eu-west-1' AND created_at > '2026-01-01' ORDER BY created_at DESC LIMIT 50",
  "database": {
    "host": "db.internal.example.com", "port": 5432, "name": "crm_prod", "user": "reporting_ro",
    "password": "pw-7Hq2-known-secret-xK9",
    "options": {"sslmode": "verify-full", "connect_timeout": 10, "application_name": "agentauth-tool"}
  },
  "headers": {
    "Authorization": "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTEyMyJ9.c2lnbmF0dXJlLXNpZw",
    "X-Request-Id": "3f2a9c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b",
    "Accept": "application/json"
  },
  "filters": [
    {"field": "status", "op": "in", "values": ["active", "trial", "past_due"]},
    {"field": "mrr", "op": "gte", "value": 1500.50},
    {"field": "tags", "op": "contains", "value": "enterprise"}
  ],
  "format": "csv", "include_headers": true, "max_rows": 50, "webhook": null,
  "notes": "Weekly churn-risk export requested by the success team; do not include PII beyond email.",
  "checksum": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
}`

// BenchmarkArgsHash1KB is the budget: argsHash of a 1 KB argument
// object in at most 20 µs.
func BenchmarkArgsHash1KB(b *testing.B) {
	args := json.RawMessage(benchArgs)
	known := []string{"pw-7Hq2-known-secret-xK9", "another-resolved-secret"}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ArgsHash(args, known); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArgsHash1KBSecretName is the slower path taken when a member
// name itself must be redacted.
func BenchmarkArgsHash1KBSecretName(b *testing.B) {
	args := json.RawMessage(`{"pw-7Hq2-known-secret-xK9": 1,` + benchArgs[1:])
	known := []string{"pw-7Hq2-known-secret-xK9"}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ArgsHash(args, known); err != nil {
			b.Fatal(err)
		}
	}
}
