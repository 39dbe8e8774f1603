package e2ekit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Go side of sdk/TESTING.md: the control server an SDK's integration
// suite drives (AGENTAUTH_TEST_HARNESS), the TCP proxy whose connections
// it cuts (AGENTAUTH_TEST_PROXY_URL) and the webhook receiver a
// Connector delivers to. test/e2e (agentauth serve) and test/e2eaws (the
// deployed stack) both use it; what they start behind it differs.

// pageTitleSuffix ends the title of every page agentauth serves.
const pageTitleSuffix = " · agentauth"

// ConsentRecord is one POST /consent the harness served.
type ConsentRecord struct {
	Login string
	// FinalURL is where the browser ended: the callback URL, which holds
	// the authorization code (a secret: keep it for a leak scan, never
	// log it).
	FinalURL    string
	Status      int
	Title, Text string
	Err         string
}

// Delivery is one webhook request the harness received.
type Delivery struct {
	Connector string
	// Headers holds the first value of each header, canonical names.
	Headers    map[string]string
	Body       string
	ReceivedAt time.Time
}

// HarnessCounts is what the harness has seen so far.
type HarnessCounts struct {
	Consents, ConsentErrors int
	// Drops counts POST /drop; Dropped the connections they closed.
	Drops, Dropped int
	Deliveries     int
}

// SDKHarness is a running control server, proxy and webhook receiver.
type SDKHarness struct {
	// URL is the control server, AGENTAUTH_TEST_HARNESS.
	URL string
	// ProxyBase is http://127.0.0.1:<port> of the TCP proxy: the caller
	// appends the upstream's path to make AGENTAUTH_TEST_PROXY_URL.
	ProxyBase string

	browser *Browser
	proxy   *DropProxy
	srv     *http.Server

	mu         sync.Mutex
	consents   []ConsentRecord
	drops      int
	dropped    int
	deliveries []Delivery
}

// SDKHarnessOptions configures StartSDKHarness.
type SDKHarnessOptions struct {
	// Browser gives the consents (a LocalhostSubdomains one when the
	// callback is on *.localhost); without one POST /consent answers 503.
	Browser *Browser
	// Upstream is host:port the proxy forwards every connection to.
	Upstream string
	// ConsentTimeout bounds one POST /consent (default 90 s).
	ConsentTimeout time.Duration
}

// StartSDKHarness starts the control server and the proxy on 127.0.0.1
// (random ports) and stops both when the test ends.
func StartSDKHarness(t testing.TB, opts SDKHarnessOptions) *SDKHarness {
	t.Helper()
	if opts.Upstream == "" {
		t.Fatal("e2ekit: StartSDKHarness needs an Upstream")
	}
	if opts.ConsentTimeout <= 0 {
		opts.ConsentTimeout = 90 * time.Second
	}
	h := &SDKHarness{browser: opts.Browser, proxy: StartDropProxy(t, opts.Upstream)}
	h.ProxyBase = "http://" + h.proxy.Addr
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.URL = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /consent", func(w http.ResponseWriter, r *http.Request) { h.consent(w, r, opts.ConsentTimeout) })
	mux.HandleFunc("POST /drop", h.drop)
	mux.HandleFunc("GET /deliveries", h.listDeliveries)
	mux.HandleFunc("POST /hooks/{connector}", h.hook)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

// HookURL is where a Connector named connector delivers (its spec.url).
func (h *SDKHarness) HookURL(connector string) string { return h.URL + "/hooks/" + connector }

// Counts says what the harness has served so far.
func (h *SDKHarness) Counts() HarnessCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := HarnessCounts{Drops: h.drops, Dropped: h.dropped, Deliveries: len(h.deliveries)}
	for _, r := range h.consents {
		if r.Err != "" {
			c.ConsentErrors++
		} else {
			c.Consents++
		}
	}
	return c
}

// Consents returns every consent served, oldest first.
func (h *SDKHarness) Consents() []ConsentRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ConsentRecord(nil), h.consents...)
}

// Deliveries returns the deliveries to connector ("" for all), oldest first.
func (h *SDKHarness) Deliveries(connector string) []Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Delivery
	for _, d := range h.deliveries {
		if connector == "" || d.Connector == connector {
			out = append(out, d)
		}
	}
	return out
}

// CheckConsentPages adds the authorization code each consent carried
// (its callback URL's code) to what tokens looks for, and reports any
// token tokens knows that a callback page showed. Run it before scanning
// logs: a code is a secret the logs must not hold either.
func (h *SDKHarness) CheckConsentPages(t testing.TB, tokens *TokenRecorder) {
	t.Helper()
	for _, r := range h.Consents() {
		if u, err := url.Parse(r.FinalURL); err == nil {
			tokens.Keep("authorization code", u.Query().Get("code"))
		}
	}
	for _, r := range h.Consents() {
		for _, l := range tokens.Leaks(r.Title + "\n" + r.Text) {
			t.Errorf("a token the provider issued (%s) is on the callback page", l)
		}
	}
}

// ProxyAccepted is how many connections the proxy has taken.
func (h *SDKHarness) ProxyAccepted() int { return h.proxy.Accepted() }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *SDKHarness) consent(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	var in struct {
		AuthorizationURL string `json:"authorizationUrl"`
		Login            string `json:"login"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&in); err != nil || in.AuthorizationURL == "" || in.Login == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want a JSON body {\"authorizationUrl\": …, \"login\": …}"})
		return
	}
	if h.browser == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "this harness has no browser"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res, err := h.browser.Authorize(ctx, in.AuthorizationURL, in.Login)
	rec := ConsentRecord{Login: in.Login, FinalURL: res.FinalURL, Status: res.Status, Title: res.Title, Text: res.BodyText}
	if err != nil {
		rec.Err = err.Error()
	}
	h.mu.Lock()
	h.consents = append(h.consents, rec)
	h.mu.Unlock()
	if err != nil {
		// e2ekit's errors redact URLs: no code or state in the answer.
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	// The contract's title is the page's own ("Connected"), without the
	// site name agentauth's pages put after it.
	writeJSON(w, http.StatusOK, map[string]string{"title": strings.TrimSuffix(res.Title, pageTitleSuffix), "text": res.BodyText})
}

func (h *SDKHarness) drop(w http.ResponseWriter, _ *http.Request) {
	n := h.proxy.DropAll()
	h.mu.Lock()
	h.drops++
	h.dropped += n
	h.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]int{"dropped": n})
}

func (h *SDKHarness) listDeliveries(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("connector")
	if name == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "connector is required: GET /deliveries?connector=<name>"})
		return
	}
	type wire struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	data := []wire{}
	for _, d := range h.Deliveries(name) {
		data = append(data, wire{d.Headers, d.Body})
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (h *SDKHarness) hook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	d := Delivery{Connector: r.PathValue("connector"), Headers: map[string]string{}, Body: string(body), ReceivedAt: time.Now()}
	for k, v := range r.Header {
		if len(v) > 0 {
			d.Headers[http.CanonicalHeaderKey(k)] = v[0]
		}
	}
	h.mu.Lock()
	h.deliveries = append(h.deliveries, d)
	h.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// DropProxy is a TCP proxy on 127.0.0.1 whose open connections can all be
// closed at once, as a network cut would; new ones keep working.
type DropProxy struct {
	// Addr is 127.0.0.1:<port>.
	Addr string

	upstream string
	ln       net.Listener
	mu       sync.Mutex
	conns    map[*proxyConn]struct{}
	accepted int
	closed   bool
	wg       sync.WaitGroup
}

type proxyConn struct{ client, upstream net.Conn }

func (c *proxyConn) close() {
	c.client.Close()
	c.upstream.Close()
}

// StartDropProxy listens on a random 127.0.0.1 port, forwards each
// connection to upstream (host:port), and closes everything when the test
// ends.
func StartDropProxy(t testing.TB, upstream string) *DropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &DropProxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

func (p *DropProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		up, err := net.DialTimeout("tcp", p.upstream, 10*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxyConn{client: c, upstream: up}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pc.close()
			return
		}
		p.conns[pc] = struct{}{}
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.pipe(pc)
	}
}

// pipe copies both ways until either side ends, then closes both.
func (p *DropProxy) pipe(pc *proxyConn) {
	defer p.wg.Done()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(pc.upstream, pc.client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(pc.client, pc.upstream); done <- struct{}{} }()
	<-done
	pc.close()
	<-done
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// DropAll closes every open connection and says how many there were.
func (p *DropProxy) DropAll() int {
	p.mu.Lock()
	open := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		open = append(open, c)
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range open {
		c.close()
	}
	return len(open)
}

// Accepted is how many connections the proxy has taken.
func (p *DropProxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops the proxy and closes its connections.
func (p *DropProxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.DropAll()
	p.wg.Wait()
}
