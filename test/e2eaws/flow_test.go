//go:build e2eaws

package e2eaws

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/aws/sqsqueue"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

const (
	// providerPort is where examples/bundle (packaged with the deployed
	// functions) expects the demo provider.
	providerPort = 9090
	// demoClientID is the bundle's client id; its secret is the deployed
	// Secrets Manager secret <SecretPrefix>demo-oidc (seeded by the deploy).
	demoClientID = "agentauth-demo"
	// providerTTL is the provider's access token lifetime.
	providerTTL = time.Hour
	// refreshWindow: the burst asks for minTtlSeconds = providerTTL -
	// refreshWindow (3570 of 3600 s), so the grant's token, older than
	// refreshWindow by then, must be refreshed, and the token that refresh
	// brings must not be refreshed again for refreshWindow: the whole
	// burst has to fit in it, or a second refresh would be right. The
	// local suite gets away with 1 s; through the emulator's gateway, where
	// concurrent invocations may cold-start up to 40 Lambda environments on
	// a busy 2-core machine, a burst took up to 7 s, hence 30 s.
	refreshWindow = 30 * time.Second
	// workerProcesses × requestsPerWorker signed requests hit the
	// expiring grant at the same moment.
	workerProcesses   = 2
	requestsPerWorker = 20
)

// TestDeployedStackEndToEnd proves the deployed stack end to end: the real
// functions behind the emulator's API Gateway, the real provider's login
// and consent pages in headless Chromium, the auth.granted event on the
// FIFO queue, user-mode subject verification, one refresh across Lambda
// environments and processes, and no token anywhere but sealed.
func TestDeployedStackEndToEnd(t *testing.T) {
	st := loadStack(t)
	requireProviderAndBrowser(t)
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	be := st.backends(ctx, t)
	db := dynamodb.NewFromConfig(be.Config)
	sqsAPI := sqs.NewFromConfig(be.Config)
	// This test reads auth.granted off the queue itself.
	pauseTurnConsumer(ctx, t, st, be.Config)

	rec := &recorder{}
	gw := newGateway(st.Endpoint, st.APIHost, rec)

	// The stack answers: public health route, IAM on the token route.
	if a, err := gw.do(ctx, http.MethodGet, "/healthz", nil, false); err != nil || a.Code != 200 {
		t.Fatalf("GET /healthz through the emulator's gateway: %v %d %.300s (is outputs.json stale? run make deploy-local)", err, a.Code, a.Body)
	} else {
		rec.add("GET /healthz", a.Body)
	}
	if a, err := gw.do(ctx, http.MethodPost, "/v1/oauth/token", tokenReq{App: "demo-global"}.body(), false); err != nil || a.Code != http.StatusForbidden {
		t.Fatalf("unsigned POST /v1/oauth/token: %v %d %.300s, want 403 from the AWS_IAM route", err, a.Code, a.Body)
	} else {
		rec.add("unsigned POST /v1/oauth/token", a.Body)
	}

	// The provider the deployed bundle points at, with the deployed secret.
	callbackGlobal, callbackUser := st.PublicURL+"/oauth/callback/demo-global", st.PublicURL+"/oauth/callback/demo-user"
	client := demoClient(t, st, be, callbackGlobal, callbackUser)
	if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", providerPort)); err != nil {
		t.Fatalf("127.0.0.1:%d is taken (%v): the deployed bundle expects the demo provider there; stop whatever listens (make run?)", providerPort, err)
	} else {
		ln.Close()
	}
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Port:           providerPort,
		Stats:          true,
		AccessTokenTTL: providerTTL,
		Clients:        []e2ekit.Client{client},
	})
	browser := e2ekit.StartBrowserWith(t, e2ekit.BrowserOptions{LocalhostSubdomains: true})

	// Every run has its own subjects and agent instances, so it never
	// meets another run's grants, sessions or queue messages.
	rid := runID()
	t.Logf("run %s against stack %s (API %s, emulator %s)", rid, st.Name, st.APIHost, st.Endpoint)

	secrets := newSecretSet()
	pages := &recorder{}     // callback pages the browser rendered
	var queueBodies []string // auth.granted messages read back

	// What this run creates, removed at the end (the stack stays).
	var cleanupMu sync.Mutex
	var sessionIDs, grantIDs []string
	ownGroups := map[string]bool{}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		cleanupMu.Lock()
		defer cleanupMu.Unlock()
		var keys []string
		for _, id := range grantIDs {
			sum := sha256.Sum256([]byte("refresh/" + id))
			keys = append(keys, "grant#"+id, "lease#"+hex.EncodeToString(sum[:]))
		}
		for _, id := range sessionIDs {
			keys = append(keys, "session#"+id)
		}
		for _, k := range keys {
			deleteKey(cctx, t, db, st.TableName, k)
		}
		// A failed run may leave messages of its instances on the queue:
		// take them off (a passing run has acknowledged its one message
		// and shown there is no other).
		if t.Failed() {
			if n := drainGroups(cctx, t, be.Queue, sqsAPI, st.QueueURL, ownGroups, 3*time.Second); n > 0 {
				t.Logf("cleanup: removed %d leftover message(s) of this run from the queue", n)
			}
		}
		t.Logf("cleanup: deleted the %d DynamoDB key(s) run %s may have written", len(keys), rid)
	})
	track := func(sessionID, grantID string) {
		cleanupMu.Lock()
		defer cleanupMu.Unlock()
		if sessionID != "" && !slices.Contains(sessionIDs, sessionID) {
			sessionIDs = append(sessionIDs, sessionID)
		}
		if grantID != "" && !slices.Contains(grantIDs, grantID) {
			grantIDs = append(grantIDs, grantID)
		}
	}
	own := func(instance string) string {
		g := sqsqueue.GroupID(domain.Event{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: instance, AgentName: "planner"})
		cleanupMu.Lock()
		ownGroups[g] = true
		cleanupMu.Unlock()
		return g
	}

	token := func(t *testing.T, r tokenReq) tokenResult {
		t.Helper()
		out, _, err := gw.token(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		track(out.AuthSessionID, "")
		if out.Status == "ready" {
			secrets.keep("access token (ready answer)", out.AccessToken)
		}
		return out
	}
	authRequired := func(t *testing.T, r tokenReq, callback string) tokenResult {
		t.Helper()
		out := token(t, r)
		if out.Status != "authorization_required" || !strings.HasPrefix(out.AuthSessionID, "as-") {
			t.Fatalf("want authorization_required, got %s", out.describe())
		}
		checkAuthorizationURL(t, out.AuthorizationURL, callback)
		return out
	}
	ready := func(t *testing.T, r tokenReq) tokenResult {
		t.Helper()
		out := token(t, r)
		if out.Status != "ready" || out.AccessToken == "" {
			t.Fatalf("want ready, got %s", out.describe())
		}
		return out
	}
	worksAtProvider := func(t *testing.T, tok, wantSub string) {
		t.Helper()
		claims, status, err := p.UserInfo(ctx, tok)
		if err != nil || status != 200 || claims["sub"] != wantSub {
			t.Fatalf("the token at the provider's userinfo: %d sub=%v err=%v, want sub %s", status, claims["sub"], err, wantSub)
		}
	}
	sessionStatus := func(t *testing.T, id string) map[string]any {
		t.Helper()
		a, err := gw.do(ctx, http.MethodGet, "/v1/oauth/sessions/"+id, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		rec.add("GET /v1/oauth/sessions/"+id, a.Body)
		var m map[string]any
		if a.Code != 200 || json.Unmarshal(a.Body, &m) != nil {
			t.Fatalf("GET /v1/oauth/sessions/%s: %d %.300s", id, a.Code, a.Body)
		}
		return m
	}

	global := tokenReq{App: "demo-global", Global: "demo:team:" + rid, User: "demo:user:alice-" + rid, Instance: rid + "-global", Channel: "C-" + rid}
	globalRef := domain.ObjectRef{Kind: "OAuthApp", Name: "demo-global"}
	globalGrant := oauth.GrantID(globalRef, global.Global)
	track("", globalGrant)
	globalGroup := own(global.Instance)
	var globalSession, callbackURL, globalToken string

	must, timed := steps(t)

	must(timed("global mode: consent in Chromium through the deployed callback, then ready", func(t *testing.T) {
		out := authRequired(t, global, callbackGlobal)
		globalSession = out.AuthSessionID
		res := consent(ctx, t, browser, pages, secrets, out.AuthorizationURL, "alice-"+rid)
		callbackURL = res.FinalURL
		if !strings.HasPrefix(res.FinalURL, callbackGlobal+"?") || res.Status != 200 || !strings.Contains(res.BodyText, "Connected") ||
			!strings.HasPrefix(res.Title, "Connected") {
			t.Fatalf("callback page: %s status %d title %q: %.400s", e2ekit.RedactURL(res.FinalURL), res.Status, res.Title, res.BodyText)
		}
		if s := sessionStatus(t, globalSession); s["status"] != "completed" {
			t.Fatalf("session after the callback: %v", s)
		}
		tok := ready(t, global)
		worksAtProvider(t, tok.AccessToken, "alice-"+rid)
		globalToken = tok.AccessToken
	}))

	var acked []sqsqueue.Delivery
	must(timed("auth.granted on the FIFO queue: the instance's group, resume target, origin and auth", func(t *testing.T) {
		ds := receiveGroup(ctx, t, be.Queue, sqsAPI, st.QueueURL, globalGroup, 1, 30*time.Second, 3*time.Second)
		for _, d := range ds {
			body, _ := json.Marshal(d.Event)
			queueBodies = append(queueBodies, string(body))
			if err := be.Queue.Ack(ctx, d); err != nil {
				t.Errorf("ack: %v", err)
			}
			acked = append(acked, d)
		}
		if len(ds) != 1 {
			t.Fatalf("%d auth.granted messages for %s, want exactly 1", len(ds), globalGroup)
		}
		d := ds[0]
		e := d.Event
		var in domain.AuthGrantedEvent
		if err := json.Unmarshal([]byte(e.Input), &in); err != nil {
			t.Fatalf("event input: %v", err)
		}
		subj := e.Auth.Subjects
		actor := e.Auth.Actor
		if d.GroupID != globalGroup || d.GroupID != sqsqueue.GroupID(e) || d.EventType != "auth.granted" || e.ID != globalSession ||
			e.SwarmRef != (domain.ObjectRef{Kind: "Swarm", Name: "default"}) || e.InstanceKey != global.Instance || e.AgentName != "planner" ||
			e.Origin["connector"] != "e2eaws" || e.Origin["channel"] != global.Channel ||
			subj == nil || subj.Global != global.Global || subj.User != global.User || actor == nil || actor.ID != global.User ||
			in.Type != "auth.granted" || in.OAuthAppRef != globalRef || in.Provider != "demo" || in.Subject != global.Global ||
			in.GrantID != globalGrant || !slices.Contains(in.ScopesGranted, "openid") {
			t.Fatalf("message group %q type %q event %+v input %+v", d.GroupID, d.EventType, e, in)
		}
		t.Logf("auth.granted: group %s, dedup id %s, message %s, receive count %d", d.GroupID, sqsqueue.DeduplicationID(e.ID), d.MessageID, d.ReceiveCount)
	}))

	must(timed("the callback URL replayed in Chromium: session_already_used, nothing queued, grant unchanged", func(t *testing.T) {
		res, err := browser.Open(ctx, callbackURL)
		pages.add("replayed callback page", []byte(res.Title+"\n"+res.BodyText))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 400 || !strings.Contains(res.BodyText, "session_already_used") {
			t.Fatalf("replay page: status %d title %q: %.400s", res.Status, res.Title, res.BodyText)
		}
		// Once more without a browser, to see what the gateway hands back:
		// the query reaches the function intact (it finds the session) and
		// the HTML page keeps its status, type and security headers.
		cb, err := url.Parse(callbackURL)
		if err != nil {
			t.Fatal(err)
		}
		a, err := gw.do(ctx, http.MethodGet, cb.RequestURI(), nil, false)
		if err != nil {
			t.Fatal(err)
		}
		rec.add("GET callback (replayed without a browser)", a.Body)
		for k, want := range map[string]string{
			"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "X-Frame-Options": "DENY",
			"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
		} {
			if got := a.Header.Get(k); got != want {
				t.Errorf("replayed callback through the gateway: %s %q, want %q", k, got, want)
			}
		}
		if a.Code != 400 || !strings.HasPrefix(string(a.Body), "<!doctype html>") || !strings.Contains(string(a.Body), `data-reason="session_already_used"`) ||
			!strings.Contains(a.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("replayed callback through the gateway: %d CSP %q %.300s", a.Code, a.Header.Get("Content-Security-Policy"), a.Body)
		}
		if ds := receiveGroup(ctx, t, be.Queue, sqsAPI, st.QueueURL, globalGroup, 0, 5*time.Second, 5*time.Second); len(ds) != 0 {
			t.Fatalf("the replay queued %d more auth.granted message(s)", len(ds))
		}
		if tok := ready(t, global); tok.AccessToken != globalToken {
			t.Fatal("the replay changed the grant's token")
		}
	}))

	carol := tokenReq{App: "demo-user", Global: "demo:team:" + rid, User: "demo:user:carol-" + rid, Instance: rid + "-carol", Channel: "C-" + rid}
	carolGrant := oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}, carol.User)
	track("", carolGrant) // removed at the end should a bug store it
	carolGroup := own(carol.Instance)

	must(timed("user mode: another user logs in → subject_mismatch, no grant in DynamoDB", func(t *testing.T) {
		out := authRequired(t, carol, callbackUser)
		res := consent(ctx, t, browser, pages, secrets, out.AuthorizationURL, "bob-"+rid)
		if !strings.HasPrefix(res.FinalURL, callbackUser+"?") || res.Status != 400 || !strings.Contains(res.BodyText, "subject_mismatch") {
			t.Fatalf("mismatch page: %s status %d title %q: %.400s", e2ekit.RedactURL(res.FinalURL), res.Status, res.Title, res.BodyText)
		}
		if s := sessionStatus(t, out.AuthSessionID); s["status"] != "failed" || s["statusReason"] != "subject_mismatch" {
			t.Fatalf("session after the mismatch: %v", s)
		}
		items, err := scanTable(ctx, db, st.TableName)
		if err != nil {
			t.Fatal(err)
		}
		grants := 0
		for _, it := range items {
			if attrString(it, "kind") != "OAuthGrantRecord" {
				continue
			}
			grants++
			var doc struct {
				Subject string `json:"subject"`
			}
			_ = json.Unmarshal([]byte(attrString(it, "doc")), &doc)
			if attrString(it, dynamostore.PartitionKey) == "grant#"+carolGrant || strings.Contains(doc.Subject, "carol-"+rid) || strings.Contains(doc.Subject, "bob-"+rid) {
				t.Fatalf("a grant was stored after the mismatch: %s (subject %q)", attrString(it, dynamostore.PartitionKey), doc.Subject)
			}
		}
		t.Logf("table scan: %d items, %d grants, none for %s or bob-%s", len(items), grants, carol.User, rid)
		if again := token(t, carol); again.Status != "authorization_required" {
			t.Fatalf("carol after the mismatch: %s", again.describe())
		}
		if ds := receiveGroup(ctx, t, be.Queue, sqsAPI, st.QueueURL, carolGroup, 0, 2*time.Second, 2*time.Second); len(ds) != 0 {
			t.Fatalf("the mismatch queued %d auth.granted message(s)", len(ds))
		}
	}))

	// collectSealed opens this run's records with the stack's own keys
	// (KMS for grants, the session keys for sessions) and keeps the
	// plaintexts for the leak scan.
	collectSealed := func(t *testing.T) {
		t.Helper()
		cleanupMu.Lock()
		gids, sids := slices.Clone(grantIDs), slices.Clone(sessionIDs)
		cleanupMu.Unlock()
		for _, id := range gids {
			g, err := be.Store.GetGrant(ctx, id)
			if errors.Is(err, domain.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("grant %s: %v", id, err)
			}
			keepGrantTokens(ctx, t, be, secrets, g)
		}
		for _, id := range sids {
			s, err := be.Store.GetSession(ctx, id)
			if errors.Is(err, domain.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("session %s: %v", id, err)
			}
			if s.Flow.PKCE != nil {
				v, err := be.SessionSealer.Open(ctx, s.Flow.PKCE.CodeVerifier, domain.SessionBinding(s, domain.FieldCodeVerifier))
				if err != nil {
					t.Fatalf("open the PKCE verifier of %s: %v", id, err)
				}
				secrets.keep("PKCE code verifier (stored)", string(v))
			}
		}
	}
	must(t.Run("collect the sealed values of this run", collectSealed))

	var burst burstReport
	must(timed(fmt.Sprintf("expiring grant: %d processes × %d concurrent signed requests → one refresh", workerProcesses, requestsPerWorker), func(t *testing.T) {
		minTTL := int((providerTTL - refreshWindow) / time.Second)
		g, err := be.Store.GetGrant(ctx, globalGrant)
		if err != nil || g.Token.ExpiresAt == nil {
			t.Fatalf("grant %s: %v (expiresAt %v)", globalGrant, err, g.Token.ExpiresAt)
		}
		t.Log(warmPool(ctx, t, st, gw, workerProcesses*requestsPerWorker))
		// Wait until the grant's token has less than minTTL left (and at
		// least 2 s, as the local suite does).
		wait := max(2*time.Second, time.Until(g.Token.ExpiresAt.Add(-time.Duration(minTTL)*time.Second))+500*time.Millisecond)
		if wait > 2*refreshWindow {
			t.Fatalf("the grant expires at %v: waiting %v is more than planned", g.Token.ExpiresAt, wait)
		}
		t.Logf("minTtlSeconds %d (provider TTL %v): waiting %v for the grant's token to need a refresh", minTTL, providerTTL, wait.Round(time.Millisecond))
		time.Sleep(wait)

		before, err := p.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := global
		r.MinTTL = &minTTL
		logOff := st.logSize()
		envsBefore := lambdaEnvs(st, st.GetToken)
		burst = runWorkers(ctx, t, st, r, workerProcesses, requestsPerWorker)
		envsAfter := lambdaEnvs(st, st.GetToken)
		after, err := p.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if mlog, err := st.logSince(logOff); err == nil {
			burst.spawnedGetToken = spawns(mlog, st.GetToken)
		}
		for _, a := range burst.answers {
			if a.Status != "ready" {
				rec.add("burst answer "+a.Status, []byte(a.Body))
			} else {
				rec.add("ready", []byte(a.Body))
			}
		}
		var tok string
		for i, a := range burst.answers {
			if a.Err != "" || a.Code != 200 || a.Status != "ready" {
				t.Errorf("request %d (process %d): HTTP %d status %q err %q body %.300s", i, a.Process, a.Code, a.Status, a.Err, nonReady(a))
				continue
			}
			if tok == "" {
				tok = a.Token
			}
			if a.Token != tok {
				t.Errorf("request %d (process %d) got a different token", i, a.Process)
			}
		}
		secrets.keep("access token (refreshed, burst answers)", tok)
		t.Logf("burst: %d requests from %d processes, sent %v–%v after the agreed moment, answered in %v (first answer after %v, last after %v); MiniStack spawned %d new gettoken environment(s) during it",
			len(burst.answers), workerProcesses, burst.firstSent.Round(time.Millisecond), burst.lastSent.Round(time.Millisecond), burst.span.Round(time.Millisecond),
			burst.first.Round(time.Millisecond), burst.last.Round(time.Millisecond), burst.spawnedGetToken)
		if envsBefore != nil && envsAfter != nil {
			pool, served := envsServed(envsBefore, envsAfter)
			t.Logf("Lambda environments of %s (bootstrap processes under MiniStack): %d before the burst, %d after; %d served burst requests",
				st.GetToken, pool, len(envsAfter), served)
			if served < 2 {
				t.Errorf("only %d Lambda environment(s) served the burst: the lease was not tested across environments", served)
			}
		} else {
			t.Log("cannot tell how many Lambda environments served the burst (no /proc)")
		}
		refreshes := after.Grants["refresh_token"] - before.Grants["refresh_token"]
		t.Logf("provider: refresh_token grants %d → %d, refresh errors %d → %d, refresh reuse %d → %d",
			before.Grants["refresh_token"], after.Grants["refresh_token"], before.GrantErrors["refresh_token"], after.GrantErrors["refresh_token"], before.RefreshReuse, after.RefreshReuse)
		if refreshes > 1 && burst.span > refreshWindow {
			t.Fatalf("inconclusive: %d refreshes, but the burst took %v, longer than the %v refresh window, so a late request had to refresh again (is the emulator overloaded?)",
				refreshes, burst.span, refreshWindow)
		}
		if refreshes != 1 || after.RefreshReuse != before.RefreshReuse || after.GrantErrors["refresh_token"] != before.GrantErrors["refresh_token"] {
			t.Fatalf("%d refreshes at the provider (reuse %d → %d, errors %d → %d), want exactly 1 and no reuse",
				refreshes, before.RefreshReuse, after.RefreshReuse, before.GrantErrors["refresh_token"], after.GrantErrors["refresh_token"])
		}
		if t.Failed() {
			return
		}
		if tok == globalToken {
			t.Fatal("the burst got the old token back: no refresh happened through the functions")
		}
		worksAtProvider(t, tok, "alice-"+rid)
		globalToken = tok

		// The functions' side: one "grant refreshed" line for the grant in
		// all of gettoken's invocations, and the cold starts of the burst.
		events, err := st.logEvents(ctx, "/aws/lambda/"+st.GetToken)
		if err != nil {
			t.Fatal(err)
		}
		refreshed, inits := 0, []int{}
		for _, e := range events {
			if strings.Contains(e.Message, `"msg":"grant refreshed"`) && strings.Contains(e.Message, globalGrant) {
				refreshed++
			}
			if e.Timestamp >= burst.startMs {
				if m := initRE.FindStringSubmatch(e.Message); m != nil {
					n, _ := strconv.Atoi(m[1])
					inits = append(inits, n)
				}
			}
		}
		slices.Sort(inits)
		t.Logf("gettoken logs: %d \"initialized\" line(s) since the burst began (init ms %v)", len(inits), summarize(inits))
		if refreshed != 1 {
			t.Errorf("gettoken logged \"grant refreshed\" for %s %d times, want 1", globalGrant, refreshed)
		}
	}))

	must(t.Run("collect the sealed values after the refresh", collectSealed))

	must(timed("only sealed values: DynamoDB, both log groups, MiniStack's log, every non-ready answer", func(t *testing.T) {
		collected, kinds := secrets.count()
		t.Logf("secret values collected: %d %v", collected, kinds)
		if collected < 6 {
			t.Fatalf("only %d secret values collected; the scan would prove little", collected)
		}
		leaks := 0
		leak := func(where string, data string) { leaks += secrets.scan(t, where, data) }

		// DynamoDB: every item of the table, every attribute.
		items, err := scanTable(ctx, db, st.TableName)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			leak("DynamoDB item "+attrString(it, dynamostore.PartitionKey), itemText(it))
		}
		// And this run's records hold their secrets sealed: AES-256-GCM,
		// grants under the stack's KMS key with a wrapped data key.
		g, err := be.Store.GetGrant(ctx, globalGrant)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]*domain.EncryptedValue{"accessToken": &g.Token.AccessToken, "refreshToken": g.Token.RefreshToken} {
			if v == nil || v.Algorithm != domain.AlgorithmAES256GCM || v.Ciphertext == "" || v.WrappedKey == "" || v.KeyID != st.KeyArn {
				t.Errorf("grant %s %s is not KMS-envelope sealed under %s: %+v", globalGrant, name, st.KeyArn, v)
			}
		}
		t.Logf("DynamoDB: scanned %d items", len(items))

		// CloudWatch Logs: every event of both functions' log groups; they
		// must hold this run's requests, or the scan proves nothing.
		for _, fn := range []string{st.GetToken, st.Callback} {
			group := "/aws/lambda/" + fn
			events, err := st.logEvents(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			text := logText(events)
			leak("log group "+group, text)
			mark := globalGrant // gettoken: "grant refreshed" names the grant
			if fn == st.Callback {
				mark = globalSession // callback: "callback completed" names the session
			}
			if !strings.Contains(text, mark) {
				t.Errorf("log group %s has no line about this run (%s): the functions' logs are not where the scan looks", group, mark)
			}
			t.Logf("CloudWatch Logs %s: %d events", group, len(events))
		}

		// MiniStack's own log (gateway, Lambda runtime, failed cold starts).
		b, err := os.ReadFile(st.MiniStackLog)
		if err != nil {
			t.Errorf("MiniStack's log: %v (set %s)", err, envMiniStackLog)
		} else {
			leak("MiniStack's log "+st.MiniStackLog, string(b))
			t.Logf("MiniStack log: %d bytes", len(b))
		}

		// Every answer but the ready ones, and what the user saw.
		n := 0
		for _, r := range rec.all() {
			if r.what != "ready" {
				leak("answer of "+r.what, string(r.body))
				n++
			}
		}
		callbackPages := pages.all()
		for _, pg := range callbackPages {
			leak(pg.what, string(pg.body))
		}
		for i, body := range queueBodies {
			leak(fmt.Sprintf("queue message %d", i), body)
		}
		leak("provider output", strings.Join(p.Logs(), "\n"))
		t.Logf("scanned %d non-ready answers, %d callback pages, %d queue messages, the provider's output; %d leaks", n, len(callbackPages), len(queueBodies), leaks)
	}))

	t.Logf("run %s: %d grant(s), %d session(s) created; total %v", rid, len(grantIDs), len(sessionIDs), time.Since(started).Round(100*time.Millisecond))
}

var initRE = regexp.MustCompile(`"msg":"initialized".*"initMs":(\d+)`)

// summarize renders sorted numbers as min/median/max.
func summarize(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	return fmt.Sprintf("min %d, median %d, max %d", v[0], v[len(v)/2], v[len(v)-1])
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "e2eaws-" + hex.EncodeToString(b[:])
}

// receiveGroup reads the queue until it has want messages of group (or
// until timeout), then keeps reading for quiet more to catch duplicates;
// want 0 just watches for quiet. Messages of other groups (other runs,
// other engineers) are made visible again at once and left alone.
func receiveGroup(ctx context.Context, t *testing.T, q *sqsqueue.Queue, api *sqs.Client, queueURL, group string, want int, timeout, quiet time.Duration) []sqsqueue.Delivery {
	t.Helper()
	var got []sqsqueue.Delivery
	deadline := time.Now().Add(timeout)
	var quietUntil time.Time
	if want == 0 {
		quietUntil = time.Now().Add(quiet)
	}
	for {
		now := time.Now()
		if !quietUntil.IsZero() && now.After(quietUntil) {
			return got
		}
		if quietUntil.IsZero() && now.After(deadline) {
			return got
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := q.Receive(rctx, sqsqueue.MaxReceiveMessages, time.Second)
		cancel()
		if err != nil && len(ds) == 0 {
			t.Fatalf("receive from the events queue: %v", err)
		}
		foreign := 0
		for _, d := range ds {
			if d.GroupID == group {
				got = append(got, d)
				continue
			}
			foreign++
			release(ctx, api, queueURL, d)
		}
		if len(got) >= want && quietUntil.IsZero() {
			quietUntil = time.Now().Add(quiet)
		}
		if foreign > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// release makes a message this test does not own visible again.
func release(ctx context.Context, api *sqs.Client, queueURL string, d sqsqueue.Delivery) {
	_, _ = api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(d.ReceiptHandle), VisibilityTimeout: 0})
}

// drainGroups acknowledges every message of groups seen within d.
func drainGroups(ctx context.Context, t *testing.T, q *sqsqueue.Queue, api *sqs.Client, queueURL string, groups map[string]bool, d time.Duration) int {
	n := 0
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ds, _ := q.Receive(rctx, sqsqueue.MaxReceiveMessages, time.Second)
		cancel()
		for _, m := range ds {
			if groups[m.GroupID] {
				if err := q.Ack(ctx, m); err == nil {
					n++
				}
				continue
			}
			release(ctx, api, queueURL, m)
		}
	}
	return n
}
