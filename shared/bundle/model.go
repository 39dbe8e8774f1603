package bundle

import (
	"net/url"
	"regexp"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// Bounds of a Model's spec.
const (
	maxModelTokens          = 200_000
	maxModelTemperature     = 2
	maxModelRequestSeconds  = 900
	maxModelRetries         = 10
	defaultModelRequestSecs = int(DefaultModelRequestTimeout / time.Second)
)

// awsRegion is the shape of an AWS region name (us-east-1, us-gov-west-1).
var awsRegion = regexp.MustCompile(`^[a-z]{2,}(-[a-z]+)+-[0-9]+$`)

func decodeModel(r *res, d *document) {
	spec := r.spec(d,
		"provider", "model", "endpoint", "region", "credentials", "parameters", "timeouts", "retry")
	if spec == nil {
		return
	}
	m := &Model{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	if p := spec.oneOf("provider", true, ModelProviderBedrock, ModelProviderOpenAI); p.OK {
		m.Provider = p.Value
	}
	if s := spec.requireStr("model", ""); s.OK {
		if msg := noSpaces(s.Value); msg != "" {
			r.errorf(s.Line, spec.field("model"), "%s", msg)
		} else {
			m.ModelID = s.Value
		}
	}
	modelEndpoint(r, spec, m)

	params := spec.child("parameters", "maxTokens", "temperature")
	m.MaxTokens = params.intIn("maxTokens", 0, 1, maxModelTokens)
	m.Temperature = params.numberIn("temperature", 0, maxModelTemperature)
	timeouts := spec.child("timeouts", "requestSeconds")
	m.RequestTimeout = time.Duration(timeouts.intIn("requestSeconds", defaultModelRequestSecs, 1, maxModelRequestSeconds)) * time.Second
	m.MaxRetries = spec.child("retry", "maxRetries").intIn("maxRetries", DefaultModelMaxRetries, 0, maxModelRetries)

	keepFirst(r.l.b.Models, m.Name, m)
}

// modelEndpoint reads where and how m is reached: endpoint, region and
// credentials, whose rules depend on the provider.
func modelEndpoint(r *res, spec *mapping, m *Model) {
	endpoint := r.urlField(spec, "endpoint", false)
	m.Endpoint = endpoint.Value
	region := spec.str("region")
	creds := spec.child("credentials", "apiKey")
	key, keyLine := creds.get("apiKey")

	switch m.Provider {
	case ModelProviderOpenAI:
		if !endpoint.Present {
			m.Endpoint = DefaultOpenAIEndpoint
		}
		if region.Present {
			r.errorf(region.Line, spec.field("region"), "only for provider bedrock: an openai endpoint is named by its URL")
		}
		switch {
		case key != nil:
			if v, ok := r.valueSource(creds, "apiKey", true); ok {
				m.APIKey = domain.NewSecret(v)
			}
		case m.Endpoint != "" && !loopbackURL(m.Endpoint) && !creds.bad:
			r.errorf(keyLine, creds.field("apiKey"), "required for provider openai unless the endpoint is on a loopback host (a local server, or the scripted model)")
		}
	case ModelProviderBedrock:
		if key != nil {
			r.errorf(keyLine, creds.field("apiKey"), "not for provider bedrock: it signs its calls with the AWS credentials of the process (the function's role; locally the SDK's default chain); apiKey is for provider openai")
		}
		if region.OK {
			if !awsRegion.MatchString(region.Value) {
				r.errorf(region.Line, spec.field("region"), "%q is not an AWS region name (like us-east-1)", region.Value)
			} else {
				m.Region = region.Value
			}
		}
	default: // reported; still check the key's ValueSource
		if key != nil {
			r.valueSource(creds, "apiKey", true)
		}
	}
}

// loopbackURL reports whether raw, a URL checkURL accepted, names a
// loopback host.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && loopback(u.Hostname())
}
