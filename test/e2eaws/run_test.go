//go:build e2eaws

package e2eaws

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/agentauth/agentauth/shared/aws/awsbackends"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// What every run against the deployed stack with the demo provider and
// Chromium shares: its setup, its steps, and its leak scan.

// requireProviderAndBrowser skips the test without the demo provider or
// Chromium; when the emulator is required (envRequire), so are they.
func requireProviderAndBrowser(t *testing.T) {
	t.Helper()
	if os.Getenv(envRequire) == "1" {
		for _, err := range []error{e2ekit.ProviderAvailable(), e2ekit.BrowserAvailable()} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
}

// backends opens the stack's table, key, queue and secrets on the
// emulator, configured as the deployed functions are.
func (s *stack) backends(ctx context.Context, t *testing.T) *awsbackends.Backends {
	t.Helper()
	be, err := awsbackends.Open(ctx, awsbackends.Settings{Table: s.TableName, KMSKeyID: s.KeyArn, QueueURL: s.QueueURL,
		SessionKeysSecret: s.SessionKeys, SecretPrefix: s.SecretPrefix}, nil)
	if err != nil {
		t.Fatalf("open the stack's backends on the emulator: %v", err)
	}
	return be
}

// demoClient is the deployed bundle's client at the demo provider: its id,
// the secret the deploy seeded, and the callbacks it may redirect to.
func demoClient(t *testing.T, st *stack, be *awsbackends.Backends, callbacks ...string) e2ekit.Client {
	t.Helper()
	clientSecret, err := be.Secrets.ResolveSecret("demo-oidc", "clientSecret")
	if err != nil {
		t.Fatalf("the deploy's demo secret %sdemo-oidc: %v", st.SecretPrefix, err)
	}
	return e2ekit.Client{
		ClientID: demoClientID, ClientSecret: clientSecret.Reveal(),
		RedirectURIs: callbacks,
		GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken},
	}
}

// steps returns how a test runs its steps: timed runs one as a subtest and
// logs how long it took; must ends the test when a step failed, since each
// builds on the ones before.
func steps(t *testing.T) (must func(ok bool), timed func(name string, f func(t *testing.T)) bool) {
	must = func(ok bool) {
		if !ok {
			t.FailNow()
		}
	}
	timed = func(name string, f func(t *testing.T)) bool {
		t.Helper()
		start := time.Now()
		ok := t.Run(name, f)
		t.Logf("%-60s %6.1fs", name, time.Since(start).Seconds())
		return ok
	}
	return must, timed
}

// deleteKey removes one item a run wrote to the stack's table.
func deleteKey(ctx context.Context, t *testing.T, db *dynamodb.Client, table, k string) {
	t.Helper()
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{dynamostore.PartitionKey: &ddbtypes.AttributeValueMemberS{Value: k}}}); err != nil {
		t.Errorf("cleanup: delete %s: %v", k, err)
	}
}

// secretSet is every secret value a run has seen (tokens, codes, JWTs,
// verifiers), each with what it is, for the leak scan.
type secretSet struct {
	mu     sync.Mutex
	values map[string]string // value → what it is
}

func newSecretSet() *secretSet { return &secretSet{values: map[string]string{}} }

// keep adds v, unless it is empty or already kept.
func (s *secretSet) keep(what, v string) {
	if v == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[v]; !ok {
		s.values[v] = what
	}
}

// count says how many values there are, and how many of each kind.
func (s *secretSet) count() (int, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kinds := map[string]int{}
	for _, what := range s.values {
		kinds[what]++
	}
	return len(s.values), kinds
}

// scan reports each value of 16 bytes or more that appears in data, found
// where, as an error of t, and returns how many did.
func (s *secretSet) scan(t *testing.T, where, data string) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	leaks := 0
	for v, what := range s.values {
		if len(v) >= 16 && strings.Contains(data, v) {
			leaks++
			t.Errorf("a secret (%s, %.6s…) appears in %s", what, v, where)
		}
	}
	return leaks
}

// consent logs in as login at the demo provider and consents in Chromium.
// The page it ends on goes to pages and the authorization code in its URL
// to secrets, for the leak scan, even when it fails.
func consent(ctx context.Context, t *testing.T, b *e2ekit.Browser, pages *recorder, secrets *secretSet, authURL, login string) e2ekit.Result {
	t.Helper()
	res, err := b.Authorize(ctx, authURL, login)
	pages.add("callback page "+e2ekit.RedactURL(res.FinalURL), []byte(res.Title+"\n"+res.BodyText))
	if u, perr := url.Parse(res.FinalURL); perr == nil {
		secrets.keep("authorization code (callback URL)", u.Query().Get("code"))
	}
	if err != nil {
		t.Fatalf("browser: %v (at %s, status %d, load error %q)", err, e2ekit.RedactURL(res.FinalURL), res.Status, res.LoadError)
	}
	return res
}

// checkAuthorizationURL fails t unless authURL sends the user to the demo
// provider for the demo client, back to callback, with PKCE and a state.
func checkAuthorizationURL(t *testing.T, authURL, callback string) {
	t.Helper()
	au, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	q := au.Query()
	if au.Host != fmt.Sprintf("127.0.0.1:%d", providerPort) || q.Get("redirect_uri") != callback || q.Get("client_id") != demoClientID ||
		q.Get("code_challenge_method") != "S256" || q.Get("state") == "" {
		t.Fatalf("authorization URL %s://%s%s: redirect_uri %q (want %q), client_id %q, PKCE %q",
			au.Scheme, au.Host, au.Path, q.Get("redirect_uri"), callback, q.Get("client_id"), q.Get("code_challenge_method"))
	}
}

// keepGrantTokens opens a stored grant's tokens with the stack's KMS key,
// as the functions do, and keeps the plaintexts for the leak scan.
func keepGrantTokens(ctx context.Context, t *testing.T, be *awsbackends.Backends, secrets *secretSet, g domain.Grant) {
	t.Helper()
	v, err := be.GrantSealer.Open(ctx, g.Token.AccessToken, domain.GrantBinding(g, domain.FieldAccessToken))
	if err != nil {
		t.Fatalf("open the access token of %s with KMS: %v", g.ID, err)
	}
	secrets.keep("access token (stored grant)", string(v))
	if g.Token.RefreshToken != nil {
		v, err := be.GrantSealer.Open(ctx, *g.Token.RefreshToken, domain.GrantBinding(g, domain.FieldRefreshToken))
		if err != nil {
			t.Fatalf("open the refresh token of %s with KMS: %v", g.ID, err)
		}
		secrets.keep("refresh token (stored grant)", string(v))
	}
}

// logText is the messages of events, one a line.
func logText(events []logEvent) string {
	var all strings.Builder
	for _, e := range events {
		all.WriteString(e.Message)
		all.WriteString("\n")
	}
	return all.String()
}

// pauseTurnConsumer disables the turn function's event source mapping
// until t ends, so that the test can read auth.granted off the queue
// itself (the queue's wire contract) before any consumer takes it; without
// a turn function it does nothing.
func pauseTurnConsumer(ctx context.Context, t *testing.T, st *stack, cfg aws.Config) {
	t.Helper()
	if st.TurnFunction == "" {
		return
	}
	api := lambda.NewFromConfig(cfg)
	out, err := api.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(st.TurnFunction)})
	if err != nil {
		t.Fatalf("the turn function's event source mappings: %v", err)
	}
	set := func(ctx context.Context, on bool) error {
		for _, m := range out.EventSourceMappings {
			if _, err := api.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: m.UUID, Enabled: aws.Bool(on)}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(ctx, false); err != nil {
		t.Fatalf("pause the turn function's event source mapping: %v", err)
	}
	t.Cleanup(func() {
		if err := set(context.Background(), true); err != nil {
			t.Errorf("enable the turn function's event source mapping again: %v", err)
		}
	})
}
