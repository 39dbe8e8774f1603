package origin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/turn"
)

// Defaults of Config.
const (
	DefaultQueueSize   = 1000
	DefaultWorkers     = 4
	DefaultMaxAttempts = 5
	// DefaultBackoff and DefaultMaxBackoff space the retries about 4, 8,
	// 16 and 30 s apart (each jittered down by up to half): five
	// attempts within about a minute.
	DefaultBackoff    = 4 * time.Second
	DefaultMaxBackoff = 30 * time.Second
	DefaultTimeout    = 10 * time.Second
)

// maxDrain bounds what is read of a receiver's answer (read so that the
// connection can be reused; its content is never used).
const maxDrain = 64 << 10

// warnedTurns bounds the memory of turns already warned about a connector
// the bundle does not have.
const warnedTurns = 1024

// Config of a Deliverer.
type Config struct {
	// Connectors are the bundle's, by name.
	Connectors map[string]*bundle.Connector
	// Transport sends the deliveries (required): the app gives it
	// httptool.GuardedTransport.
	Transport http.RoundTripper
	// QueueSize bounds the deliveries waiting to be sent or retried
	// (DefaultQueueSize); when full, the oldest is dropped.
	QueueSize int
	// Workers is how many deliveries are sent at once (DefaultWorkers).
	Workers int
	// MaxAttempts bounds the attempts of one delivery (DefaultMaxAttempts).
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled for each next
	// one up to MaxBackoff, each wait jittered down by up to half
	// (DefaultBackoff, DefaultMaxBackoff).
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt (DefaultTimeout).
	Timeout time.Duration
	// Log gets a line per delivery and per failed attempt. Nil: discarded.
	Log *slog.Logger
	// Now is the clock of HeaderTimestamp (time.Now).
	Now func() time.Time
}

// Deliverer queues turn events for their origin's Connector and sends
// them. New starts its workers; Close stops them.
type Deliverer struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	// ctx is every attempt's; cancelled when Close runs out of time.
	ctx    context.Context
	cancel context.CancelFunc
	// wake tells one idle worker that a delivery may be due.
	wake chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	pending []*job // oldest first
	closed  bool
	warned  map[string]bool
	order   []string // warned's turn ids, oldest first
}

// job is one delivery: a signed body for one connector.
type job struct {
	id        string
	connector *bundle.Connector
	body      []byte
	turnID    string
	traceID   string
	event     string
	attempts  int
	due       time.Time
}

// New checks cfg, fills its defaults and starts the workers.
func New(cfg Config) (*Deliverer, error) {
	if cfg.Transport == nil {
		return nil, errors.New("origin: Config.Transport is required (the upstream guard's)")
	}
	for name, c := range cfg.Connectors {
		if c == nil || c.Type != bundle.ConnectorTypeWebhook {
			return nil, fmt.Errorf("origin: Connector/%s: only type %s is delivered", name, bundle.ConnectorTypeWebhook)
		}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.QueueSize, DefaultQueueSize)
	def(&cfg.Workers, DefaultWorkers)
	def(&cfg.MaxAttempts, DefaultMaxAttempts)
	defDur(&cfg.Backoff, DefaultBackoff)
	defDur(&cfg.MaxBackoff, DefaultMaxBackoff)
	defDur(&cfg.Timeout, DefaultTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Deliverer{cfg: cfg, log: log, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), warned: map[string]bool{},
		// A redirect is not followed: the receiver is the URL the
		// operator configured, and a 3xx is an answer like any other 4xx.
		client: &http.Client{Transport: cfg.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	d.wg.Add(cfg.Workers)
	for range cfg.Workers {
		go d.work()
	}
	return d, nil
}

// Notify queues the events of t that the connector its origin names
// delivers (engine.Engine.Notify). It never blocks on the network.
func (d *Deliverer) Notify(ctx context.Context, t turn.Turn, events []turn.TurnEvent) {
	v, ok := t.Origin[OriginKey]
	if !ok || v == "" {
		return
	}
	name, isString := v.(string)
	c := d.cfg.Connectors[name]
	if c == nil {
		if d.firstWarning(t.ID) {
			why := "is not a Connector of the bundle: the turn's events are not delivered"
			if !isString {
				why = "is not a string: the turn's events are not delivered"
			}
			d.log.WarnContext(ctx, "origin connector "+why, "connector", fmt.Sprint(v), "turnId", t.ID, "traceId", t.TraceID)
		}
		return
	}
	for _, ev := range events {
		if !slices.Contains(c.Events, ev.Type) {
			continue
		}
		body, err := json.Marshal(NewBody(name, t, ev))
		if err != nil {
			d.log.WarnContext(ctx, "origin delivery not queued: the body does not marshal", "connector", name,
				"turnId", t.ID, "traceId", t.TraceID, "event", ev.Type, "err", err)
			continue
		}
		d.enqueue(ctx, &job{id: DeliveryID(t.ID, ev.Seq), connector: c, body: body, turnID: t.ID, traceID: t.TraceID, event: ev.Type}, false)
	}
}

// firstWarning reports whether turnID has not been warned about yet, and
// remembers it (the latest warnedTurns turns).
func (d *Deliverer) firstWarning(turnID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.warned[turnID] {
		return false
	}
	if len(d.order) >= warnedTurns {
		delete(d.warned, d.order[0])
		d.order = d.order[1:]
	}
	d.warned[turnID] = true
	d.order = append(d.order, turnID)
	return true
}

// enqueue adds j at the back (a retry too: it waits for j.due). A full
// queue drops its oldest delivery; a closed one takes no new delivery.
func (d *Deliverer) enqueue(ctx context.Context, j *job, retry bool) {
	d.mu.Lock()
	if d.closed && !retry {
		d.mu.Unlock()
		d.log.WarnContext(ctx, "origin delivery dropped: the deliverer is closed", d.attrs(j)...)
		return
	}
	var dropped *job
	if len(d.pending) >= d.cfg.QueueSize {
		dropped = d.pending[0]
		d.pending = slices.Delete(d.pending, 0, 1)
	}
	d.pending = append(d.pending, j)
	d.mu.Unlock()
	if dropped != nil {
		d.log.WarnContext(ctx, "origin delivery queue full: dropped the oldest delivery",
			append(d.attrs(dropped), "queueSize", d.cfg.QueueSize)...)
	}
	d.signal()
}

func (d *Deliverer) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// work sends deliveries as they fall due until Close.
func (d *Deliverer) work() {
	defer d.wg.Done()
	for {
		j, wait, exit := d.take()
		if exit {
			d.signal() // the next idle worker sees it too
			return
		}
		if j != nil {
			d.attempt(j)
			continue
		}
		var timer *time.Timer
		var due <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			due = timer.C
		}
		select {
		case <-d.wake:
		case <-due:
		case <-d.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// take removes the oldest due delivery from the queue; else it says how
// long until the next falls due (0: none waits), or that the worker may
// exit (closed and nothing left, or out of time).
func (d *Deliverer) take() (j *job, wait time.Duration, exit bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return nil, 0, true
	}
	now := time.Now()
	var next time.Time
	for i, p := range d.pending {
		if !p.due.After(now) {
			d.pending = slices.Delete(d.pending, i, i+1)
			if len(d.pending) > 0 {
				d.signal() // more may be due: wake another worker
			}
			return p, 0, false
		}
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}
	if d.closed && len(d.pending) == 0 {
		return nil, 0, true
	}
	if next.IsZero() {
		return nil, 0, false
	}
	return nil, next.Sub(now), false
}

// attempt sends j once and decides: delivered, retried later, or given up.
func (d *Deliverer) attempt(j *job) {
	j.attempts++
	status, err := d.send(j)
	attrs := append(d.attrs(j), "attempt", j.attempts)
	switch {
	case err == nil && status >= 200 && status < 300:
		d.log.Info("origin delivered", append(attrs, "status", status)...)
		return
	case d.ctx.Err() != nil:
		d.log.Warn("origin delivery abandoned: the process is stopping", attrs...)
		return
	}
	var reason string
	retry := false
	switch {
	case err != nil && httptool.IsRefused(err):
		reason = "the upstream guard refused the address: " + unwrap(err)
	case err != nil:
		reason, retry = unwrap(err), true
	case status == http.StatusTooManyRequests || status >= 500:
		reason, retry = "answered "+strconv.Itoa(status), true
	case status >= 300 && status < 400:
		reason = "answered " + strconv.Itoa(status) + " (redirects are not followed)"
	default:
		reason = "answered " + strconv.Itoa(status)
	}
	attrs = append(attrs, "reason", reason)
	if !retry || j.attempts >= d.cfg.MaxAttempts {
		if retry {
			reason = "gave up after " + strconv.Itoa(j.attempts) + " attempts"
		} else {
			reason = "not retried"
		}
		d.log.Warn("origin delivery failed: "+reason, attrs...)
		return
	}
	wait := d.backoff(j.attempts)
	d.log.Info("origin delivery attempt failed: retrying", append(attrs, "retryInMs", wait.Milliseconds())...)
	j.due = time.Now().Add(wait)
	d.enqueue(d.ctx, j, true)
}

// backoff is the wait after the n-th failed attempt: Backoff doubled n-1
// times, at most MaxBackoff, minus a random part of up to half (so that
// receivers coming back are not hit by every sender at once).
func (d *Deliverer) backoff(n int) time.Duration {
	w := d.cfg.Backoff
	for i := 1; i < n && w < d.cfg.MaxBackoff; i++ {
		w *= 2
	}
	w = min(w, d.cfg.MaxBackoff)
	return w - rand.N(w/2+1)
}

// send makes one attempt: the body signed now, the receiver's status.
func (d *Deliverer) send(j *job) (int, error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.connector.URL, bytes.NewReader(j.body))
	if err != nil {
		// The URL was validated at load; say no more of it than that.
		return 0, errors.New("the connector's URL does not make a request")
	}
	ts := strconv.FormatInt(d.cfg.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(j.connector.Secret.Reveal(), ts, j.body))
	req.Header.Set(HeaderDelivery, j.id)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// attrs are a delivery's log attributes: never its URL beyond the host,
// never its body or secret.
func (d *Deliverer) attrs(j *job) []any {
	host := ""
	if u, err := url.Parse(j.connector.URL); err == nil {
		host = u.Host
	}
	return []any{"connector", j.connector.Name, "host", host, "deliveryId", j.id, "event", j.event, "turnId", j.turnID, "traceId", j.traceID}
}

// unwrap is a failed request's reason without url.Error's method and URL
// (the URL's path may be a credential).
func unwrap(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// Close stops taking deliveries and waits until the queued ones are sent
// or given up, or until ctx is done: then it stops the attempts in
// flight, drops what is left (a warning with the count) and answers
// ctx's error. Closing twice is harmless.
func (d *Deliverer) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.signal()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		d.cancel()
		return nil
	case <-ctx.Done():
	}
	d.cancel()
	<-done
	d.mu.Lock()
	left := len(d.pending)
	d.pending = nil
	d.mu.Unlock()
	if left > 0 {
		d.log.Warn("origin deliveries dropped at shutdown", "count", left)
	}
	return fmt.Errorf("origin: close: %d deliveries not made: %w", left, ctx.Err())
}
