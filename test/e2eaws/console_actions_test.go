//go:build e2eaws

package e2eaws

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/chromedp/chromedp"

	"github.com/agentauth/agentauth/shared/aws/sqsqueue"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// What TestDeployedConsole proves on the page after its views: the live
// timeline through the gateway, an instance's lifecycle and a dead
// letter's redrive, each clicked in Chromium and checked through the
// deployed runtime API.

// liveWithin bounds the live timeline: the consent's callback, the turn
// function's resume and the console stream's 5 s windows (each answer
// sent whole when it ends, and EventSource's reconnect delay after it).
const liveWithin = 60 * time.Second

// followLive opens the timeline of the turn parked in inst, lets login
// consent on its link in another browser context and watches the page
// append the resumed … completed entries without a reload, each once;
// when the turn has ended the page reloads itself into the replay, which
// holds every event of the turn once.
func (c *deployedConsole) followLive(t *testing.T, admin *e2ekit.Session, b *e2ekit.Browser, api turnAPI, inst string, parked turnEventOut, login string) {
	t.Helper()
	timeline := "/console/instances/default/" + url.PathEscape(inst) + "/assistant/turns/" + url.PathEscape(parked.TurnID)
	html := c.visit(t, admin, timeline, 200)
	c.contains(t, "parked timeline", html, `id="turn-status">parked<`, `id="live"`, `data-live="`+timeline+`/events"`, "Parked on consent: whoami")
	c.lacks(t, "parked timeline", html, "Turn completed")
	tab, cancel := admin.Tab(c.ctx)
	defer cancel()
	// Entries the page appends from now on are recorded where a reload
	// keeps them (the page reloads itself once the turn ends); a reload
	// renders its entries on the server, which the observer never sees.
	if err := e2ekit.WatchAppended(tab); err != nil {
		t.Fatal(err)
	}

	link, _ := parked.Data["authorizationUrl"].(string)
	if link == "" {
		t.Fatalf("turn.parked names no authorizationUrl: %v", parked.Data)
	}
	// The stream's answers the page got so far (a resource timing entry
	// is added when an answer has ended). One that is not a 200 ends the
	// test at once: EventSource gives up on an answer that is not an
	// event stream (Chromium then reports status 0), and on a 5xx.
	var windows []streamAnswer
	answers := func() {
		got, err := chromedp.Run(tab, chromedp.Evaluate[[]streamAnswer](`performance.getEntriesByType('resource')
			.filter((e) => e.name.includes('/events'))
			.map((e) => ({status: e.responseStatus || 0, ms: Math.round(e.duration)}))`))
		if err == nil && len(got) >= len(windows) {
			windows = got
		}
		for _, w := range windows {
			if w.Status != http.StatusOK {
				c.diagnoseStream(t, admin, timeline+"/events?after="+fmt.Sprint(parked.Seq))
				t.Fatalf("the page's EventSource got a failed answer (status %d as the browser reports it; the gateway's answer is above); its answers so far: %v", w.Status, windows)
			}
		}
	}
	// Before the consent, one window ends with nothing in it and the
	// browser asks again: the page follows the turn across answers.
	for deadline := time.Now().Add(15 * time.Second); len(windows) == 0; e2ekit.WaitTick(c.ctx, 200*time.Millisecond) {
		if answers(); time.Now().After(deadline) || c.ctx.Err() != nil {
			c.diagnoseStream(t, admin, timeline+"/events?after="+fmt.Sprint(parked.Seq))
			t.Fatal("the page's event stream gave no answer within 15s")
		}
	}
	t.Logf("the stream's first answer (nothing new): HTTP %d after %dms; the page asks again from its cursor", windows[0].Status, windows[0].Ms)
	res := c.consent(t, b, link, login)
	if res.Status != 200 || !strings.Contains(res.BodyText, "Connected") {
		t.Fatalf("%s's consent: status %d %.300s", login, res.Status, res.BodyText)
	}
	consented := time.Now()

	var appended []string
	var resumedAt, completedAt time.Duration
	for {
		// Errors while the page reloads are expected: read again.
		if got, err := e2ekit.Appended(tab); err == nil {
			appended = got
		}
		if resumedAt == 0 && slices.ContainsFunc(appended, func(s string) bool { return strings.Contains(s, " Resumed (") }) {
			resumedAt = time.Since(consented)
		}
		if completedAt == 0 && slices.ContainsFunc(appended, func(s string) bool { return strings.HasSuffix(s, " Turn completed") }) {
			completedAt = time.Since(consented)
		}
		if resumedAt != 0 && completedAt != 0 {
			break
		}
		answers()
		if time.Since(consented) > liveWithin || c.ctx.Err() != nil {
			c.diagnoseStream(t, admin, timeline+"/events?after="+fmt.Sprint(parked.Seq))
			t.Fatalf("within %v of the consent the page appended %q, want the resumed and completed entries", liveWithin, appended)
		}
		e2ekit.WaitTick(c.ctx, 200*time.Millisecond)
	}
	t.Logf("appended live through the gateway, without a reload: resumed after %.1fs, completed after %.1fs of the consent: %q",
		resumedAt.Seconds(), completedAt.Seconds(), appended)
	for _, seq := range e2ekit.RepeatedSeqs(appended) {
		t.Errorf("entry %s appended twice: %q", seq, appended)
	}

	// Once the turn ended, the page reloads itself into the replay.
	if st, err := e2ekit.WaitSettled(c.ctx, tab, "completed", 20*time.Second, 200*time.Millisecond); err != nil {
		t.Fatalf("the timeline did not settle as completed (%q, %v)", st, err)
	}
	html = c.inspect(t, admin, timeline+" (after the turn ended)")
	c.contains(t, "resumed timeline", html, "Parked on consent: whoami", "Resumed", "waited ", "Tool completed: whoami", "Turn completed")
	evs, err := api.events(c.ctx, inst, parked.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if n := strings.Count(html, fmt.Sprintf(`data-seq="%d"`, ev.Seq)); n != 1 {
			t.Errorf("the replayed timeline has %d entries for event %d (%s)", n, ev.Seq, ev.Type)
		}
	}
	t.Logf("the replay holds each of the turn's %d events once (%s)", len(evs), types(evs))
	c.resumeAcrossWindows(t, admin, timeline, parked)
}

// streamAnswer is one answer of the console's stream the page got: its
// HTTP status (0 where the browser gave up on it) and how long it took.
type streamAnswer struct {
	Status int `json:"status"`
	Ms     int `json:"ms"`
}

func (a streamAnswer) String() string { return fmt.Sprintf("%d %dms", a.Status, a.Ms) }

// diagnoseStream GETs the console's stream route through the gateway as
// the browser's EventSource does (the session cookie, Accept:
// text/event-stream) and logs what comes back and how long it took: why a
// live timeline did not move.
func (c *deployedConsole) diagnoseStream(t *testing.T, s *e2ekit.Session, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.gw.endpoint+path, nil)
	if err != nil {
		t.Error(err)
		return
	}
	req.Host = c.gw.host
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(c.cookie(t, s))
	start := time.Now()
	resp, err := c.gw.client.Do(req)
	if err != nil {
		t.Errorf("the stream through the gateway: %v after %v", err, time.Since(start))
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	t.Errorf("the stream through the gateway (GET %s): HTTP %d, Content-Type %q, %d bytes in %v:\n%.2000s",
		redactPath(path), resp.StatusCode, resp.Header.Get("Content-Type"), len(b), time.Since(start).Round(time.Millisecond), b)
}

// instanceTurnsOut is what the lifecycle step reads of an instance: its
// status, its turns and how each ended.
type instanceTurnsOut struct {
	Status      string         `json:"status"`
	RecentTurns []turnEndedOut `json:"recentTurns"`
}

type turnEndedOut struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// lifecycle pauses, resumes and terminates (with reason) inst from its
// page, then deletes it, checking the instance through the deployed
// runtime API after each click. inst has a turn parked on consent, which
// the terminate interrupts with the reason.
func (c *deployedConsole) lifecycle(t *testing.T, admin *e2ekit.Session, api turnAPI, inst, turnID, reason string) {
	t.Helper()
	page := "/console/instances/default/" + url.PathEscape(inst) + "/assistant"
	state := func() (instanceTurnsOut, error) {
		var out instanceTurnsOut
		err := api.getJSON(c.ctx, instancePath(inst)+"/assistant", &out)
		return out, err
	}
	c.visit(t, admin, page, 200)
	for _, step := range e2ekit.InstanceLifecycle() {
		if step.Button == "#terminate" {
			tab, cancel := admin.Tab(c.ctx)
			err := chromedp.Do(tab, chromedp.SetValue(chromedp.CSS(`input[name="reason"]`), reason))
			cancel()
			if err != nil {
				t.Fatalf("type the reason: %v", err)
			}
		}
		start := time.Now()
		status, html := c.click(t, admin, step.Button, step.Dialog)
		took := time.Since(start)
		c.record(page+" after "+step.Button, html)
		if status != 200 {
			t.Fatalf("%s: %d", step.Button, status)
		}
		c.contains(t, "instance after "+step.Button, html, "Done: "+step.Flash+".", `id="instance-status">`+step.Status+`<`)
		out, err := state()
		if err != nil || out.Status != step.Status {
			t.Fatalf("the runtime API after %s: %q %v, want %s", step.Button, out.Status, err, step.Status)
		}
		t.Logf("%s clicked (%.1fs): the page and the runtime API say %s", step.Button, took.Seconds(), out.Status)
	}
	out, err := state()
	if err != nil {
		t.Fatalf("the runtime API after #terminate: %v", err)
	}
	i := slices.IndexFunc(out.RecentTurns, func(tr turnEndedOut) bool { return tr.ID == turnID })
	if i < 0 {
		t.Fatalf("the runtime API lists no turn %s: %+v", turnID, out)
	}
	if tr := out.RecentTurns[i]; tr.Status != "interrupted" || tr.Error == nil || tr.Error.Code != "terminated" || tr.Error.Message != reason {
		t.Errorf("the parked turn after the terminate: %s %+v, want interrupted, terminated: %q", tr.Status, tr.Error, reason)
	} else {
		t.Logf("the parked turn %s: %s, %s: %q", turnID, tr.Status, tr.Error.Code, tr.Error.Message)
	}
	html := c.visit(t, admin, page+"/turns/"+url.PathEscape(turnID), 200)
	c.contains(t, "terminated turn's timeline", html, `id="turn-status">interrupted<`, "<code>terminated</code> "+reason)

	c.visit(t, admin, page, 200)
	status, html := c.click(t, admin, "#delete", e2ekit.ConfirmDelete)
	c.record(page+" after #delete", html)
	if status != 200 {
		t.Fatalf("#delete: %d", status)
	}
	c.contains(t, "instances after delete", html, "Done: deleted.")
	c.lacks(t, "instances after delete", html, page)
	if _, err := state(); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("the runtime API after delete: %v, want HTTP 404", err)
	}
	c.visit(t, admin, page, 404)
	t.Logf("#delete clicked: the instance is gone (runtime API 404, console 404)")
}

// sendDeadLetter puts e on the dead-letter queue at dlqURL as the events
// queue would have moved it there: its body as Enqueue encodes it, its
// instance's message group, its id as deduplication id and its eventType
// attribute. It returns the message id: the dead letter's id.
func sendDeadLetter(ctx context.Context, api *sqs.Client, dlqURL string, e domain.Event) (string, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	out, err := api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(dlqURL),
		MessageBody:            aws.String(string(body)),
		MessageGroupId:         aws.String(sqsqueue.GroupID(e)),
		MessageDeduplicationId: aws.String(sqsqueue.DeduplicationID(e.ID)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			sqsqueue.EventTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(sqsqueue.EventType(e))},
		},
	})
	if err != nil {
		return "", fmt.Errorf("send to the dead-letter queue: %w", err)
	}
	return aws.ToString(out.MessageId), nil
}

// redrive puts a message for inst (an "echo:" message the scripted model
// answers at once) on the stack's dead-letter queue, finds it on the
// console's Dead letters page and its own page, redrives it from there
// and waits for the turn function to run it.
func (c *deployedConsole) redrive(t *testing.T, admin *e2ekit.Session, api turnAPI, sqsAPI *sqs.Client, dlqURL, inst, user string) {
	t.Helper()
	const text = "echo: redriven from the console"
	input, _ := json.Marshal(map[string]string{"type": "user.input", "text": text})
	e := domain.Event{
		ID: "dl-" + inst, SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: inst, AgentName: "assistant",
		Input: string(input), Metadata: map[string]string{"eventType": "user.input"}, EnqueuedAt: time.Now().UTC(),
		Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: user}, Subjects: &domain.Subjects{User: "demo:user:" + user},
			Claims: map[string]any{"sub": user, "scope": "profile.read"}},
	}
	id, err := sendDeadLetter(c.ctx, sqsAPI, dlqURL, e)
	if err != nil {
		t.Fatal(err)
	}
	dlPage := "/console/dead-letters/" + url.PathEscape(id)
	instPage := "/console/instances/default/" + url.PathEscape(inst) + "/assistant"
	t.Logf("dead letter %s (event %s, group %s) on %s", id, e.ID, sqsqueue.GroupID(e), dlqURL)

	html := c.visit(t, admin, "/console/dead-letters", 200)
	c.contains(t, "dead letters", html, `href="`+dlPage+`"`, "<code>"+e.ID+"</code>", `href="`+instPage+`"`,
		"<code>default/"+inst+"/assistant</code>", "<td>user.input</td>")
	html = c.visit(t, admin, dlPage, 200)
	c.contains(t, "the dead letter", html, "<code>"+e.ID+"</code>", `href="`+instPage+`"`, "<dd>user.input</dd>",
		`id="dl-input"`, text, `id="dl-auth"`, "demo:user:"+user, `id="redrive"`)

	start := time.Now()
	status, html := c.click(t, admin, "#redrive", "")
	c.record(dlPage+" after #redrive", html)
	if status != 200 {
		t.Fatalf("#redrive: %d", status)
	}
	c.contains(t, "dead letters after the redrive", html, `id="flash"`, "Done: redriven "+id+".")
	c.lacks(t, "dead letters after the redrive", html, `href="`+dlPage+`"`)
	t.Logf("#redrive clicked (%.1fs): the page says redriven, the list no longer has it", time.Since(start).Seconds())

	done, err := api.waitEvent(c.ctx, inst, "turn.completed", time.Minute)
	if err != nil {
		t.Fatalf("the redriven event: %v", err)
	}
	in, err := api.inspect(c.ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	answer := ""
	for _, tr := range in.RecentTurns {
		if tr.ID == done.TurnID {
			answer = tr.FinalAnswer
		}
	}
	if answer != "ok" {
		t.Errorf("the redriven event's turn %s answered %q, want the scripted model's ok", done.TurnID, answer)
	}
	t.Logf("the turn function ran the redriven event: turn %s completed %.1fs after the click (answer %q)",
		done.TurnID, time.Since(start).Seconds(), answer)
}

// resumeAcrossWindows proves on the deployed function what the page's
// EventSource relies on between two of the gateway's 5 s windows: each
// window is its own invocation, and the next one, asked with the
// Last-Event-ID the browser sends, answers exactly the entries after it —
// none repeated, none lost — then says the turn ended. The turn has ended,
// so each answer holds everything after its cursor: the answer from the
// middle of the timeline must be the tail of the answer from the park.
func (c *deployedConsole) resumeAcrossWindows(t *testing.T, s *e2ekit.Session, timeline string, parked turnEventOut) {
	t.Helper()
	// The page's first URL carries ?after=<its last entry>; a reconnect
	// adds Last-Event-ID, which wins.
	first := c.streamWindow(t, s, timeline+"/events?after="+fmt.Sprint(parked.Seq), "")
	if len(first.ids) < 2 {
		t.Fatalf("the window from the park (event %d) holds %v: want at least the resumed and completed entries", parked.Seq, first.ids)
	}
	mid := first.ids[len(first.ids)/2-1]
	second := c.streamWindow(t, s, timeline+"/events?after="+fmt.Sprint(parked.Seq), fmt.Sprint(mid))
	var tail []int64
	for _, id := range first.ids {
		if id > mid {
			tail = append(tail, id)
		}
	}
	if !slices.Equal(second.ids, tail) {
		t.Errorf("resumed with Last-Event-ID %d the stream answered entries %v, want %v (the first window's entries after it)", mid, second.ids, tail)
	}
	for _, w := range []streamOut{first, second} {
		if w.ended != "completed" {
			t.Errorf("a window of the ended turn did not say so: ended %q after entries %v", w.ended, w.ids)
		}
	}
	t.Logf("two invocations through the gateway: after %d → entries %v; Last-Event-ID %d → %v, then ended %q",
		parked.Seq, first.ids, mid, second.ids, second.ended)
}

// streamOut is one answer of the console's stream: its entries' ids in
// order and the status its ended event names ("" when none came).
type streamOut struct {
	ids   []int64
	ended string
}

// streamWindow GETs one answer of the console's stream route through the
// gateway as the page's EventSource does (the session cookie, Accept:
// text/event-stream, Last-Event-ID when lastEventID is set) and reads its
// events.
func (c *deployedConsole) streamWindow(t *testing.T, s *e2ekit.Session, path, lastEventID string) streamOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.gw.endpoint+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = c.gw.host
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	req.AddCookie(c.cookie(t, s))
	resp, err := c.gw.client.Do(req)
	if err != nil {
		t.Fatalf("the stream through the gateway: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("the stream through the gateway (GET %s): HTTP %d %q, %v:\n%.1000s", redactPath(path), resp.StatusCode, resp.Header.Get("Content-Type"), err, b)
	}
	var out streamOut
	seen := map[int64]bool{}
	for block := range strings.SplitSeq(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n\n") {
		var id, event, data string
		for line := range strings.SplitSeq(block, "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				id = v
			case "event":
				event = v
			case "data":
				data += v
			}
		}
		switch event {
		case "entry":
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil {
				t.Fatalf("an entry without an event number (id %q) in:\n%.1000s", id, b)
			}
			if seen[n] || (len(out.ids) > 0 && n < out.ids[len(out.ids)-1]) {
				t.Errorf("entry %d out of order or repeated in one answer: %v then %d", n, out.ids, n)
			}
			seen[n] = true
			out.ids = append(out.ids, n)
		case "ended":
			out.ended = data
		}
	}
	return out
}
