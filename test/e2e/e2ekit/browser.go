package e2ekit

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// ChromiumEnv names the variable that overrides the Chromium binary.
const ChromiumEnv = "CHROMIUM"

// DefaultChromiumPath is where Debian's chromium package puts the browser.
const DefaultChromiumPath = "/usr/bin/chromium"

// DefaultBrowserTimeout bounds each Browser/Session call whose ctx has no
// earlier deadline.
const DefaultBrowserTimeout = 45 * time.Second

const depsHintBrowser = "install chromium: apt-get install -y chromium or make e2e-deps"

// ChromiumPath returns $CHROMIUM or /usr/bin/chromium.
func ChromiumPath() string {
	if p := os.Getenv(ChromiumEnv); p != "" {
		return p
	}
	return DefaultChromiumPath
}

// BrowserAvailable reports why Chromium cannot be started here, or nil.
func BrowserAvailable() error {
	p := ChromiumPath()
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("e2ekit: chromium not found at %s (%v): %s", p, err, depsHintBrowser)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("e2ekit: %s is not an executable: %s", p, depsHintBrowser)
	}
	return nil
}

// RequireBrowser skips the test when Chromium is missing (or fails it when
// E2E_REQUIRE=1).
func RequireBrowser(t testing.TB) {
	t.Helper()
	if err := BrowserAvailable(); err != nil {
		skipOrFail(t, err)
	}
}

// Browser is a headless Chromium process driven through chromedp. Every
// Authorize/Open call runs in its own browser context (like a fresh
// incognito window), so provider sessions never leak between calls; use
// NewSession to keep cookies across calls.
type Browser struct {
	// Timeout bounds each call whose ctx has no earlier deadline.
	Timeout time.Duration

	allocCancel   context.CancelFunc
	browserCtx    context.Context
	browserCancel context.CancelFunc
	userDataDir   string
	closeOnce     sync.Once
}

// Result describes the page the browser ended on.
type Result struct {
	// FinalURL is the URL of the last top-level document request, also when
	// loading it failed (e.g. connection refused at a callback).
	FinalURL string
	// Status is that document's HTTP status, 0 if unknown (load failed).
	Status int
	// Title and BodyText are read from the loaded page (empty when the load
	// failed).
	Title    string
	BodyText string
	// LoadError is Chromium's error text when the final document failed to
	// load (e.g. "net::ERR_CONNECTION_REFUSED").
	LoadError string
}

// StartBrowser launches headless Chromium and closes it when the test ends.
// It fails the test when Chromium cannot start; call RequireBrowser first to
// skip instead.
func StartBrowser(t testing.TB) *Browser {
	t.Helper()
	return StartBrowserWith(t, BrowserOptions{})
}

// BrowserOptions configures StartBrowserWith and LaunchBrowserWith. The zero
// value is what StartBrowser and LaunchBrowser use.
type BrowserOptions struct {
	// LocalhostSubdomains lets the browser reach names under .localhost
	// (RFC 6761 loopback names, e.g. the API Gateway host
	// <apiId>.execute-api.localhost of a local AWS emulator): they resolve
	// to 127.0.0.1, keeping the port and the Host header. Every other name
	// but localhost still fails to resolve.
	LocalhostSubdomains bool
}

// hostResolverRules is Chromium's --host-resolver-rules for opts.
func (opts BrowserOptions) hostResolverRules() string {
	// No name resolution except localhost: the provider's pages import
	// web fonts from the internet, which must fail fast instead of
	// waiting on the network (and no traffic may leave this machine).
	rules := "MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1"
	if opts.LocalhostSubdomains {
		// The first matching MAP rule wins.
		rules = "MAP *.localhost 127.0.0.1 , " + rules
	}
	return rules
}

// StartBrowserWith is StartBrowser with options.
func StartBrowserWith(t testing.TB, opts BrowserOptions) *Browser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := LaunchBrowserWith(ctx, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// LaunchBrowser is StartBrowser without testing.TB: the caller must Close the
// browser. ctx bounds the start only.
func LaunchBrowser(ctx context.Context) (*Browser, error) {
	return LaunchBrowserWith(ctx, BrowserOptions{})
}

// LaunchBrowserWith is LaunchBrowser with options.
func LaunchBrowserWith(ctx context.Context, bopts BrowserOptions) (*Browser, error) {
	if err := BrowserAvailable(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "e2ekit-chromium-")
	if err != nil {
		return nil, err
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath()),
		chromedp.UserDataDir(dir),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,InterestFeedContentSuggestions"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("host-resolver-rules", bopts.hostResolverRules()),
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, browserCancel := chromedp.NewContext(allocCtx)
	b := &Browser{
		Timeout:       DefaultBrowserTimeout,
		allocCancel:   allocCancel,
		browserCtx:    browserCtx,
		browserCancel: browserCancel,
		userDataDir:   dir,
	}
	// Start the browser and its first, blank tab within ctx's bounds.
	if err := firstRun(ctx, browserCtx, 60*time.Second, b.Close); err != nil {
		return nil, fmt.Errorf("e2ekit: start chromium %s: %w (%s)", ChromiumPath(), err, depsHintBrowser)
	}
	return b, nil
}

// firstRun does the first chromedp.Do on a context made by
// chromedp.NewContext. That Do must get the context itself (chromedp ties
// the browser process or the tab's event loop to it), so it is bounded
// from outside: when caller ends or d passes, abort tears everything down.
func firstRun(caller, cdpCtx context.Context, d time.Duration, abort func()) error {
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(cdpCtx) }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var why error
	select {
	case err := <-done:
		if err != nil {
			abort()
		}
		return err
	case <-caller.Done():
		why = caller.Err()
	case <-timer.C:
		why = fmt.Errorf("timed out after %s", d)
	}
	abort()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return why
}

// Close stops Chromium and removes its profile directory.
func (b *Browser) Close() {
	b.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.browserCancel()
			b.allocCancel() // waits for the process to exit
		}()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
		_ = os.RemoveAll(b.userDataDir)
	})
}

// Session is one browser context (cookie jar) with one tab.
type Session struct {
	b      *Browser
	ctx    context.Context
	cancel context.CancelFunc
	rec    *docRecorder
}

// NewSession opens a tab in a new, isolated browser context. Close it when
// done.
func (b *Browser) NewSession(ctx context.Context) (*Session, error) {
	s := &Session{b: b, rec: &docRecorder{}}
	// A listener given here is on the tab from its first command; one added
	// later (chromedp.Listen) would open the tab outside firstRun's bounds.
	s.ctx, s.cancel = chromedp.NewContext(b.browserCtx, chromedp.WithNewBrowserContext(), chromedp.WithListener(s.rec.handle))
	// Creates the browser context and its tab.
	if err := firstRun(ctx, s.ctx, b.timeout(), s.cancel); err != nil {
		return nil, fmt.Errorf("e2ekit: open browser context: %w", err)
	}
	return s, nil
}

// Close closes the tab and disposes of its browser context.
func (s *Session) Close() { s.cancel() }

// Open loads url in a fresh browser context and reports where it ended.
func (b *Browser) Open(ctx context.Context, url string) (Result, error) {
	s, err := b.NewSession(ctx)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	return s.Open(ctx, url)
}

// Authorize runs a user's side of an authorization request in a fresh
// browser context: it opens authorizationURL, signs in on the provider's
// login page as login (any password), approves the consent page, and
// returns once the browser has left the provider's origin (normally at the
// client's redirect URI). A page the flow cannot handle (e.g. the provider's
// error page) is an error; Result still tells where the browser was.
func (b *Browser) Authorize(ctx context.Context, authorizationURL, login string) (Result, error) {
	s, err := b.NewSession(ctx)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	return s.Authorize(ctx, authorizationURL, login)
}

// Open loads url in this session's tab.
func (s *Session) Open(ctx context.Context, target string) (Result, error) {
	runCtx, stop := boundCtx(ctx, s.ctx, s.b.timeout())
	defer stop()
	s.rec.reset()
	navErr := s.navigate(runCtx, chromedp.Navigate(target))
	res := s.result(runCtx)
	if navErr != nil && res.LoadError == "" {
		return res, fmt.Errorf("e2ekit: open %s: %w", RedactURL(target), navErr)
	}
	return res, nil
}

// Authorize is Browser.Authorize inside this session (the provider's
// session cookie is kept, so a second call may skip login and consent).
func (s *Session) Authorize(ctx context.Context, authorizationURL, login string) (Result, error) {
	au, err := url.Parse(authorizationURL)
	if err != nil || au.Host == "" {
		return Result{}, fmt.Errorf("e2ekit: bad authorization URL: %v", err)
	}
	providerOrigin := au.Scheme + "://" + au.Host
	return s.drive(ctx, "authorize", authorizationURL, login, func(r Result) bool {
		return r.FinalURL != "" && !sameOrigin(r.FinalURL, providerOrigin)
	})
}

// ApproveDevice plays the user's side of a device authorization (RFC 8628)
// in a fresh browser context: it opens verificationURIComplete (the
// device_authorization response's verification_uri_complete), confirms the
// user code, signs in as login, approves consent and returns on the
// provider's success page.
func (b *Browser) ApproveDevice(ctx context.Context, verificationURIComplete, login string) (Result, error) {
	s, err := b.NewSession(ctx)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	return s.ApproveDevice(ctx, verificationURIComplete, login)
}

// ApproveDevice is Browser.ApproveDevice inside this session.
func (s *Session) ApproveDevice(ctx context.Context, verificationURIComplete, login string) (Result, error) {
	return s.drive(ctx, "approve device", verificationURIComplete, login, func(r Result) bool {
		return r.Title == "Sign-in Success"
	})
}

// settleTime is how long drive waits on a page it has nothing to do on for
// the page to navigate by itself (e.g. oidc-provider's auto-submitting
// form_post pages) before it reports being stuck.
const settleTime = 5 * time.Second

// drive opens start and then works through the provider's pages (device
// code confirmation, login, consent), each at most once, until done says
// the flow has arrived.
func (s *Session) drive(ctx context.Context, what, start, login string, done func(Result) bool) (Result, error) {
	runCtx, stop := boundCtx(ctx, s.ctx, s.b.timeout())
	defer stop()
	s.rec.reset()

	navErr := s.navigate(runCtx, chromedp.Navigate(start))
	confirmed, loggedIn, consented := false, false, false
	lastGen, idleSince := -1, time.Now()
	for {
		snap, gen, settled := s.rec.state()
		res := snap
		if settled {
			res = s.result(runCtx)
			if done(res) {
				return res, nil
			}
		}
		if navErr != nil && !strings.Contains(navErr.Error(), "net::ERR_ABORTED") {
			return res, fmt.Errorf("e2ekit: %s: loading %s: %w", what, RedactURL(res.FinalURL), navErr)
		}
		navErr = nil
		if err := runCtx.Err(); err != nil {
			return res, fmt.Errorf("e2ekit: %s: %w (at %s, status %d, title %q)", what, err, RedactURL(res.FinalURL), res.Status, res.Title)
		}

		var action []chromedp.Action[chromedp.Void]
		if settled {
			// An error here means the document went away under us (it is
			// navigating): look again after a pause.
			if pg, err := chromedp.Run(runCtx, chromedp.Evaluate[providerPage](`(() => {
				const p = document.querySelector('form input[name="prompt"]');
				return {
					login: !!document.querySelector('form input[name="login"]'),
					prompt: p ? p.value : '',
					confirm: !!document.querySelector('button[form="op.deviceConfirmForm"]:not([name="abort"])'),
				};
			})()`)); err == nil {
				switch {
				case pg.Login && !loggedIn:
					loggedIn = true
					action = []chromedp.Action[chromedp.Void]{
						chromedp.SetValue(chromedp.CSS(`form input[name="login"]`), login),
						chromedp.SetValue(chromedp.CSS(`form input[name="password"]`), "password"),
						chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
					}
				case pg.Prompt == "consent" && !consented:
					consented = true
					action = []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.CSS(`form button[type="submit"]`))}
				case pg.Confirm && !confirmed:
					confirmed = true
					action = []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.CSS(`button[form="op.deviceConfirmForm"]:not([name="abort"])`))}
				}
			}
		}
		if action != nil {
			navErr = s.navigate(runCtx, action...)
			lastGen = -1
			continue
		}

		// Nothing to do (yet): wait for the page to load or move on.
		if gen != lastGen {
			lastGen, idleSince = gen, time.Now()
		} else if time.Since(idleSince) > settleTime {
			if !settled {
				res = s.result(runCtx)
			}
			return res, fmt.Errorf("e2ekit: %s: stuck at %s (status %d, title %q): %s",
				what, RedactURL(res.FinalURL), res.Status, res.Title, truncate(res.BodyText, 600))
		}
		select {
		case <-runCtx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// providerPage is what drive reads of a provider page to choose its step.
type providerPage struct {
	Login   bool   `json:"login"`
	Prompt  string `json:"prompt"`
	Confirm bool   `json:"confirm"`
}

// navigate runs actions that trigger a top-level navigation and waits for it
// to finish (redirects included).
func (s *Session) navigate(ctx context.Context, actions ...chromedp.Action[chromedp.Void]) error {
	_, err := chromedp.RunResponse(ctx, actions...)
	return err
}

// result reads where the tab is; it never fails, missing parts stay empty.
func (s *Session) result(ctx context.Context) Result {
	r := s.rec.snapshot()
	if r.LoadError != "" {
		return r
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if pg, err := chromedp.Run(pctx, readPage); err == nil {
		if r.FinalURL == "" && pg.location != "" && pg.location != "about:blank" {
			r.FinalURL = pg.location
		}
		r.Title, r.BodyText = pg.title, pg.text
	}
	return r
}

type loadedPage struct{ location, title, text string }

// readPage reads the tab's location, title and text, all or nothing.
func readPage(ctx context.Context, t *chromedp.Target) (loadedPage, error) {
	var pg loadedPage
	var err error
	if pg.location, err = chromedp.Location()(ctx, t); err != nil {
		return pg, err
	}
	if pg.title, err = chromedp.Title()(ctx, t); err != nil {
		return pg, err
	}
	pg.text, err = chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`)(ctx, t)
	return pg, err
}

func (b *Browser) timeout() time.Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return DefaultBrowserTimeout
}

// boundCtx derives from chromedp context cdpCtx a context that ends when
// caller ends, when caller's deadline passes, or after d (if > 0).
func boundCtx(caller, cdpCtx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(cdpCtx)
	if dl, ok := caller.Deadline(); ok {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, dl)
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	if d > 0 {
		var c3 context.CancelFunc
		ctx, c3 = context.WithTimeout(ctx, d)
		prev := cancel
		cancel = func() { c3(); prev() }
	}
	stopAfter := context.AfterFunc(caller, cancel)
	return ctx, func() { stopAfter(); cancel() }
}

// docRecorder tracks the tab's last top-level document request.
type docRecorder struct {
	mu        sync.Mutex
	gen       int // bumped for every new document request
	reqID     network.RequestID
	url       string
	status    int
	loadError string
	loaded    bool // load event seen after the current document's response
}

func (d *docRecorder) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.reqID, d.url, d.status, d.loadError, d.loaded = "", "", 0, "", false
}

func (d *docRecorder) handle(ev any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		// Document requests: the pages driven here have no iframes, so
		// these are the tab's top-level navigations (redirect hops keep
		// their request id).
		if ev.Type != network.ResourceTypeDocument || ev.Request == nil {
			return
		}
		if ev.RequestID != d.reqID {
			d.gen++
		}
		d.reqID, d.url, d.status, d.loadError, d.loaded = ev.RequestID, ev.Request.URL, 0, "", false
		if ev.Request.URLFragment != "" {
			d.url += ev.Request.URLFragment
		}
	case *network.EventResponseReceived:
		if ev.RequestID == d.reqID && ev.Response != nil {
			d.status = int(ev.Response.Status)
			d.url = ev.Response.URL
			d.loaded = false
		}
	case *network.EventLoadingFailed:
		if ev.RequestID == d.reqID && !ev.Canceled {
			d.loadError = ev.ErrorText
		}
	case *page.EventLoadEventFired:
		if d.status != 0 {
			d.loaded = true
		}
	}
}

func (d *docRecorder) snapshot() Result {
	r, _, _ := d.state()
	return r
}

// state returns the current document, its generation, and whether it has
// settled: loaded after its response arrived, or failed to load.
func (d *docRecorder) state() (Result, int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := Result{FinalURL: d.url, Status: d.status, LoadError: d.loadError}
	return r, d.gen, d.loadError != "" || (d.loaded && d.status != 0)
}

func sameOrigin(raw, origin string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Scheme+"://"+u.Host, origin)
}

// RedactURL drops the query (codes, states) from URLs put in errors and
// test output.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparseable url>"
	}
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	return u.String()
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
