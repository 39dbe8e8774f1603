package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/testkit/ssetest"
)

// Bounds of one request, one stream and the wait for a turn to start.
const (
	requestTimeout = 15 * time.Second
	streamTimeout  = 60 * time.Second
	turnPollEvery  = 50 * time.Millisecond
	maxTurnPolls   = 400 // 20 s
	maxSSEFrames   = 1000
	maxBodyBytes   = 1 << 20
)

// driver sends the mix to one server.
type driver struct {
	url, token string
	mix        mix
	lat        *latencies
	api        *http.Client // no redirects
	browser    *http.Client // follows loopback redirects: the consent
	transport  *http.Transport
	jwts       []string // REST audience
	mcpJWTs    []string // the MCP resource's audience
	flow, park []*instance
	cursor     [2]atomic.Int64 // next flow, park instance to try
	consenting sync.Map        // consent-app subjects whose consent is being completed
	seq        atomic.Int64    // event ids
	dropped    map[string]*atomic.Int64
}

// instance is one slot of the agent instances the turns go to. A flow
// instance keeps its key: its turns call list_orders and complete, one
// long conversation. A park instance's one turn calls the tool that needs
// a consent nobody gives; the soak then terminates and deletes it and the
// slot takes a new key, as a new conversation would (a key used again
// would find the deleted instance's pending consent offered to it as
// context, and its turn would not park again).
type instance struct {
	slot     int
	gen      int // park: conversations the slot has had
	key      string
	user     string
	park     bool
	busy     atomic.Bool
	lastTurn string // the newest turn id seen; only the goroutine holding busy reads or writes these
}

// renew gives a park slot the key of its next conversation.
func (in *instance) renew() {
	in.gen++
	in.key = fmt.Sprintf("soak-park-%d-%d", in.slot, in.gen)
	in.lastTurn = ""
}

func newDriver(st *stack, m mix, lat *latencies, jwtTTL time.Duration) (*driver, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4 * m.maxInFlight, IdleConnTimeout: 30 * time.Second}
	d := &driver{
		url: st.url, token: st.token, mix: m, lat: lat, transport: tr,
		api: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		browser: &http.Client{Transport: tr, CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 5 || !isLoopback(r.URL) {
				return fmt.Errorf("redirect to %s refused: loopback only, at most 5", r.URL.Host)
			}
			return nil
		}},
		dropped: map[string]*atomic.Int64{"token": {}, "tools": {}, "turns": {}, "mcp": {}},
	}
	for i := range m.principals {
		rest, err := st.issuer.mint(fmt.Sprintf("soak-agent-%d", i), jwtAudience, jwtTTL)
		if err != nil {
			return nil, err
		}
		viaMCP, err := st.issuer.mint(fmt.Sprintf("soak-mcp-%d", i), st.url+"/mcp", jwtTTL)
		if err != nil {
			return nil, err
		}
		d.jwts, d.mcpJWTs = append(d.jwts, rest), append(d.mcpJWTs, viaMCP)
	}
	for i := range m.instances {
		in := &instance{slot: i / 2, park: i%2 == 1, user: fmt.Sprintf("soak-user-%d", i)}
		if in.park {
			in.renew()
			d.park = append(d.park, in)
		} else {
			in.key = fmt.Sprintf("soak-flow-%d", in.slot)
			d.flow = append(d.flow, in)
		}
	}
	return d, nil
}

// prepare consents the ready app's one subject, so that its token reads
// are ready from the first.
func (d *driver) prepare(ctx context.Context) error {
	res, err := d.tokenRead(ctx, appReady, readySub)
	if err != nil {
		return fmt.Errorf("prepare: token read: %w", err)
	}
	if res.Status == "authorization_required" {
		if err := d.consent(ctx, res.AuthorizationURL); err != nil {
			return fmt.Errorf("prepare: consent: %w", err)
		}
		if res, err = d.tokenRead(ctx, appReady, readySub); err != nil {
			return fmt.Errorf("prepare: token read after the consent: %w", err)
		}
	}
	if res.Status != "ready" {
		return fmt.Errorf("prepare: the consented grant answers %q, want ready", res.Status)
	}
	return nil
}

// run sends the mix until load ends; requests use reqCtx (they finish,
// each bounded by its own timeout, after load ends). It returns once
// every request it started has finished.
func (d *driver) run(load, reqCtx context.Context, duration time.Duration) {
	calls := func(rate float64) int { return int(rate*duration.Seconds()) + 1 }
	var wg sync.WaitGroup
	wg.Go(func() {
		pace(load, d.mix.tokenRate, calls(d.mix.tokenRate), d.mix.maxInFlight, d.dropped["token"], func(i int) { d.tokenOp(reqCtx, i) })
	})
	wg.Go(func() {
		pace(load, d.mix.toolRate, calls(d.mix.toolRate), d.mix.maxInFlight, d.dropped["tools"], func(i int) { d.invokeOp(reqCtx, i) })
	})
	wg.Go(func() {
		pace(load, d.mix.turnRate, calls(d.mix.turnRate), d.mix.maxInFlight, d.dropped["turns"], func(i int) { d.turnOp(reqCtx, i) })
	})
	wg.Go(func() {
		pace(load, d.mix.mcpRate, calls(d.mix.mcpRate), d.mix.maxInFlight, d.dropped["mcp"], func(i int) { d.mcpOp(reqCtx, i) })
	})
	wg.Wait()
}

// pace starts fn about rate times a second until ctx ends or maxCalls
// were started, at most inFlight at once: a tick that finds inFlight
// calls running is dropped and counted, so a slow server sees the same
// offered load, not a pile-up. It returns when every call has finished.
func pace(ctx context.Context, rate float64, maxCalls, inFlight int, dropped *atomic.Int64, fn func(i int)) {
	if rate <= 0 {
		return
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range maxCalls {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case sem <- struct{}{}:
			wg.Go(func() {
				defer func() { <-sem }()
				fn(i)
			})
		default:
			dropped.Add(1)
		}
	}
}

// tokenResult is the part of a token answer the soak reads.
type tokenResult struct {
	Status           string `json:"status"`
	AuthorizationURL string `json:"authorizationUrl"`
}

// tokenOp is one token read: even calls the consented grant, odd calls
// the consent app's subjects in turn. An even-numbered subject that
// needs consent gets it completed; an odd one stays pending.
func (d *driver) tokenOp(ctx context.Context, i int) {
	if i%2 == 0 {
		start := time.Now()
		res, err := d.tokenRead(ctx, appReady, readySub)
		if err == nil && res.Status != "ready" {
			err = fmt.Errorf("the consented grant answered %q", res.Status)
		}
		d.lat.observe(routeTokenReady, time.Since(start), err)
		return
	}
	n := (i / 2) % d.mix.consentSubjects
	sub := fmt.Sprintf("soak:team:c%d", n)
	start := time.Now()
	res, err := d.tokenRead(ctx, appConsent, sub)
	if err == nil && res.Status != "ready" && res.Status != "authorization_required" {
		err = fmt.Errorf("the consent app answered %q", res.Status)
	}
	d.lat.observe(routeTokenConsent, time.Since(start), err)
	if err != nil || res.Status != "authorization_required" || n%2 == 1 {
		return
	}
	if _, busy := d.consenting.LoadOrStore(sub, true); busy {
		return
	}
	defer d.consenting.Delete(sub)
	start = time.Now()
	err = d.consent(ctx, res.AuthorizationURL)
	d.lat.observe(routeConsent, time.Since(start), err)
}

func (d *driver) tokenRead(ctx context.Context, app, subject string) (tokenResult, error) {
	var res tokenResult
	body := map[string]any{
		"oauthAppRef": "OAuthApp/" + app,
		"turn":        map[string]any{"auth": map[string]any{"subjects": map[string]string{"global": subject}}},
	}
	err := d.call(ctx, http.MethodPost, "/v1/oauth/token", d.token, body, http.StatusOK, &res)
	return res, err
}

// consent follows an authorization link as a browser would: the fake
// provider's authorize endpoint, then the server's callback page.
func (d *driver) consent(ctx context.Context, link string) error {
	u, err := url.Parse(link)
	if err != nil || !isLoopback(u) {
		return fmt.Errorf("authorization link on %s: loopback only", u.Host)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	resp, err := d.browser.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if resp.StatusCode != http.StatusOK || !bytes.Contains(page, []byte("Connected")) {
		return fmt.Errorf("callback page: HTTP %d without Connected", resp.StatusCode)
	}
	return nil
}

// invokeOp is one REST tool call.
func (d *driver) invokeOp(ctx context.Context, i int) {
	var out struct {
		Result struct {
			Status string `json:"status"`
		} `json:"result"`
	}
	start := time.Now()
	err := d.call(ctx, http.MethodPost, "/v1/tools/invoke", d.jwts[i%len(d.jwts)], map[string]any{"toolName": toolOrders, "args": map[string]any{}}, http.StatusOK, &out)
	if err == nil && out.Result.Status != "ok" {
		err = fmt.Errorf("result status %q", out.Result.Status)
	}
	d.lat.observe(routeInvoke, time.Since(start), err)
}

// turnOp runs one turn on an idle instance: even calls a flow instance,
// odd calls a park instance; with none idle the tick is dropped.
func (d *driver) turnOp(ctx context.Context, i int) {
	pool := d.flow
	if i%2 == 1 {
		pool = d.park
	}
	in := d.claim(pool, &d.cursor[i%2])
	if in == nil {
		d.dropped["turns"].Add(1)
		return
	}
	defer in.busy.Store(false)
	if err := d.turn(ctx, in); err != nil && in.park {
		// Whatever state it is in, start it over.
		d.retire(ctx, in)
	}
}

// claim marks the next idle instance of pool busy and returns it; nil
// when all are busy.
func (d *driver) claim(pool []*instance, cursor *atomic.Int64) *instance {
	for range len(pool) {
		in := pool[int(cursor.Add(1))%len(pool)]
		if in.busy.CompareAndSwap(false, true) {
			return in
		}
	}
	return nil
}

func (d *driver) instancePath(in *instance) string {
	return "/v1/instances/" + swarm + "/" + url.PathEscape(in.key)
}

// turn posts a message, finds its turn, follows its event stream to its
// end (flow) or to turn.parked (park: the stream is closed there and the
// instance terminated and deleted).
func (d *driver) turn(ctx context.Context, in *instance) error {
	text := "list my orders"
	if in.park {
		text = "show my profile"
	}
	body := map[string]any{
		"id": fmt.Sprintf("soak-%d", d.seq.Add(1)), "text": text,
		"auth": map[string]any{
			"actor":    map[string]string{"type": "user", "id": in.user},
			"subjects": map[string]string{"global": "soak:team:" + in.user},
			"claims":   map[string]any{"sub": in.user, "scope": "soak"},
		},
	}
	start := time.Now()
	err := d.call(ctx, http.MethodPost, d.instancePath(in)+"/events", d.token, body, http.StatusAccepted, nil)
	d.lat.observe(routeTurnPost, time.Since(start), err)
	if err != nil {
		return err
	}
	id, err := d.newTurn(ctx, in)
	if err != nil {
		return err
	}
	want := "turn.completed"
	if in.park {
		want = "turn.parked"
	}
	start = time.Now()
	err = d.follow(ctx, in, id, want)
	d.lat.observe(routeTurnSSE, time.Since(start), err)
	if err != nil || !in.park {
		return err
	}
	d.retire(ctx, in)
	return nil
}

// newTurn polls the instance until its newest turn is not the last one
// seen, and returns that turn's id.
func (d *driver) newTurn(ctx context.Context, in *instance) (string, error) {
	var out struct {
		RecentTurns []struct {
			ID string `json:"id"`
		} `json:"recentTurns"`
	}
	t := time.NewTicker(turnPollEvery)
	defer t.Stop()
	for range maxTurnPolls {
		start := time.Now()
		err := d.call(ctx, http.MethodGet, d.instancePath(in)+"/"+agent, d.token, nil, http.StatusOK, &out)
		var status statusError
		switch {
		case errors.As(err, &status) && status.code == http.StatusNotFound:
			// Not created yet: the worker has not taken the event.
			d.lat.observe(routeTurnInspect, time.Since(start), nil)
		case err != nil:
			d.lat.observe(routeTurnInspect, time.Since(start), err)
			return "", err
		default:
			d.lat.observe(routeTurnInspect, time.Since(start), nil)
			if len(out.RecentTurns) > 0 && out.RecentTurns[0].ID != in.lastTurn {
				in.lastTurn = out.RecentTurns[0].ID
				return in.lastTurn, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
	err := fmt.Errorf("instance %s: no new turn after %d polls", in.key, maxTurnPolls)
	d.lat.observe(routeTurnInspect, 0, err)
	return "", err
}

// follow reads a turn's event stream until the event want, and fails on
// another end of the turn.
func (d *driver) follow(ctx context.Context, in *instance, turnID, want string) error {
	ctx, cancel := context.WithTimeout(ctx, streamTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+d.instancePath(in)+"/"+agent+"/turns/"+url.PathEscape(turnID)+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := d.api.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close() // closing a park stream early is part of the mix
	if resp.StatusCode != http.StatusOK {
		return statusError{code: resp.StatusCode}
	}
	br := bufio.NewReader(resp.Body)
	for range maxSSEFrames {
		f, err := ssetest.Read(br)
		if err != nil {
			return fmt.Errorf("turn %s: stream ended before %s: %w", turnID, want, err)
		}
		switch f.Event {
		case want:
			return nil
		case "turn.completed", "turn.failed", "turn.interrupted", "turn.parked":
			return fmt.Errorf("turn %s: %s, want %s", turnID, f.Event, want)
		}
	}
	return fmt.Errorf("turn %s: no %s in %d frames", turnID, want, maxSSEFrames)
}

// retire terminates a park instance (its parked turn ends interrupted,
// the consent stays pending) and deletes it; its slot takes a new key.
func (d *driver) retire(ctx context.Context, in *instance) {
	p := d.instancePath(in) + "/" + agent
	start := time.Now()
	err := d.call(ctx, http.MethodPost, p+"/terminate", d.token, map[string]any{"reason": "soak: the consent is never given"}, http.StatusOK, nil)
	d.lat.observe(routeTurnTerminate, time.Since(start), err)
	start = time.Now()
	err = d.call(ctx, http.MethodDelete, p, d.token, nil, http.StatusOK, nil)
	d.lat.observe(routeTurnDelete, time.Since(start), err)
	in.renew()
}

// mcpOp is one MCP session: initialize, tools/list, tools/call, close.
func (d *driver) mcpOp(ctx context.Context, i int) {
	ctx, cancel := context.WithTimeout(ctx, 4*requestTimeout)
	defer cancel()
	tr := &mcp.StreamableClientTransport{
		Endpoint:   d.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: d.mcpJWTs[i%len(d.mcpJWTs)], next: d.transport}},
		MaxRetries: -1,
	}
	start := time.Now()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agentauth-soak", Version: "0"}, nil).Connect(ctx, tr, nil)
	d.lat.observe(routeMCPInit, time.Since(start), err)
	if err != nil {
		return
	}
	start = time.Now()
	list, err := cs.ListTools(ctx, nil)
	if err == nil && !hasTool(list, toolOrders) {
		err = fmt.Errorf("tools/list lacks %s", toolOrders)
	}
	d.lat.observe(routeMCPList, time.Since(start), err)
	start = time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolOrders, Arguments: map[string]any{}})
	if err == nil && res.IsError {
		err = errors.New("tools/call answered isError")
	}
	d.lat.observe(routeMCPCall, time.Since(start), err)
	start = time.Now()
	err = cs.Close()
	d.lat.observe(routeMCPClose, time.Since(start), err)
}

func hasTool(list *mcp.ListToolsResult, name string) bool {
	for _, t := range list.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// statusError is an answer with another status than the one expected.
type statusError struct {
	code int
	body string
}

func (e statusError) Error() string { return fmt.Sprintf("HTTP %d %s", e.code, e.body) }

// call sends a JSON request with a bearer token and decodes a JSON answer
// of status want into out (when not nil).
func (d *driver) call(ctx context.Context, method, path, tok string, body any, want int, out any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.api.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		// The error body is the edge's: a code and a message, no secret.
		return statusError{code: resp.StatusCode, body: strings.TrimSpace(string(raw[:min(len(raw), 200)]))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}
