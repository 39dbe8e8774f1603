//go:build e2eaws

package e2eaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/ssetest"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// Where the local stack expects this test's servers (both loopback).
const (
	// bedrockProxyPort: localstack/ministack.sh starts MiniStack with
	// MINISTACK_BEDROCK_PROXY_URL=http://127.0.0.1:4592, so the turn
	// function's Converse calls reach the scripted model served here.
	bedrockProxyPort = 4592
	// notesPort: the note tool of localstack/bundle/e2e-tools.yaml.
	notesPort = 4593
	// faultEnv arms the turn function's crash injection (its test build).
	faultEnv = "AGENTAUTH_FAULT"
)

// turnScript is what the scripted model (NOT a language model: a fixed
// script) answers the deployed agent: "note:" calls the note tool,
// "echo:" answers at once, anything else is the demo's whoami walkthrough.
func turnScript() scripted.Script {
	return scripted.Script{Turns: append([]scripted.Turn{
		{ToolResult: "note", Text: "Noted."},
		{UserContains: "note:", ToolCalls: []scripted.ToolCall{{Name: "note", Args: json.RawMessage(`{"text":"remember the milk"}`)}}},
		{UserContains: "echo:", Text: "ok"},
	}, scripted.DemoScript().Turns...)}
}

// listen fails the test when port is taken: the deployed bundle and the
// emulator expect this test's server there.
func listen(t *testing.T, port int, what string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("127.0.0.1:%d is taken (%v): %s must listen there; stop whatever does", port, err, what)
	}
	return ln
}

// notes is the note tool's upstream: it counts POSTs by Idempotency-Key.
type notes struct {
	mu     sync.Mutex
	byKey  map[string]int
	bodies []string
}

func (n *notes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	n.mu.Lock()
	n.byKey[r.Header.Get("Idempotency-Key")]++
	n.bodies = append(n.bodies, string(b))
	n.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	// A tool output over the turn store's 32 KB threshold: the turn keeps
	// it in the stack's S3 bucket, not in DynamoDB.
	_, _ = fmt.Fprintf(w, `{"saved":true,"receipt":%q}`, strings.Repeat("r", 48<<10))
}

func (n *notes) snapshot() (map[string]int, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for k, v := range n.byKey {
		out[k] = v
	}
	return out, append([]string(nil), n.bodies...)
}

// turnAPI calls the deployed turn routes (IAM-authorized, SigV4-signed)
// through the emulator's API Gateway.
type turnAPI struct {
	gw *gateway
}

type turnEventOut struct {
	TurnID string         `json:"turnId"`
	Seq    int64          `json:"seq"`
	Type   string         `json:"type"`
	At     time.Time      `json:"at"`
	Data   map[string]any `json:"data"`
}

type turnOut struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	StartedAt   time.Time  `json:"startedAt"`
	EndedAt     *time.Time `json:"endedAt"`
	FinalAnswer string     `json:"finalAnswer"`
	ToolCalls   int        `json:"toolCalls"`
	Errors      int        `json:"errors"`
}

type instanceOut struct {
	Status      string    `json:"status"`
	UpdatedAt   time.Time `json:"updatedAt"`
	Backlog     int       `json:"backlog"`
	ActiveTurn  *turnOut  `json:"activeTurn"`
	RecentTurns []turnOut `json:"recentTurns"`
}

func instancePath(inst string) string { return "/v1/instances/default/" + url.PathEscape(inst) }

// post posts a user's message to inst as user (a demo provider login).
func (a turnAPI) post(ctx context.Context, id, inst, text, user string) error {
	body, _ := json.Marshal(map[string]any{"id": id, "text": text, "auth": map[string]any{
		"actor":    map[string]string{"type": "user", "id": user},
		"subjects": map[string]string{"user": "demo:user:" + user},
		"claims":   map[string]any{"sub": user, "scope": "profile.read"},
	}})
	ans, err := a.gw.do(ctx, http.MethodPost, instancePath(inst)+"/events", body, true)
	if err != nil {
		return err
	}
	a.gw.rec.add("POST events", ans.Body)
	if ans.Code != http.StatusAccepted {
		return fmt.Errorf("post %s to %s: HTTP %d %.300s", id, inst, ans.Code, ans.Body)
	}
	return nil
}

func (a turnAPI) getJSON(ctx context.Context, path string, out any) error {
	ans, err := a.gw.do(ctx, http.MethodGet, path, nil, true)
	if err != nil {
		return err
	}
	a.gw.rec.add("GET "+path, ans.Body)
	if ans.Code != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d %.300s", path, ans.Code, ans.Body)
	}
	return json.Unmarshal(ans.Body, out)
}

func (a turnAPI) inspect(ctx context.Context, inst string) (instanceOut, error) {
	var out instanceOut
	err := a.getJSON(ctx, instancePath(inst)+"/assistant", &out)
	return out, err
}

func (a turnAPI) events(ctx context.Context, inst, turnID string) ([]turnEventOut, error) {
	var out struct {
		Data []turnEventOut `json:"data"`
	}
	err := a.getJSON(ctx, instancePath(inst)+"/assistant/turns/"+url.PathEscape(turnID)+"/events", &out)
	return out.Data, err
}

// waitEvent polls inst until one of its turns has emitted an event of
// type typ; it returns that event.
func (a turnAPI) waitEvent(ctx context.Context, inst, typ string, within time.Duration) (turnEventOut, error) {
	deadline := time.Now().Add(within)
	for {
		in, err := a.inspect(ctx, inst)
		if err == nil {
			for _, tr := range in.RecentTurns {
				evs, err := a.events(ctx, inst, tr.ID)
				if err != nil {
					return turnEventOut{}, err
				}
				for _, e := range evs {
					if e.Type == typ {
						return e, nil
					}
				}
			}
		} else if !strings.Contains(err.Error(), "HTTP 404") {
			return turnEventOut{}, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return turnEventOut{}, fmt.Errorf("no %s event in instance %s within %v (last: %+v, %v)", typ, inst, within, in, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// types lists the events' types, comma-separated.
func types(evs []turnEventOut) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return strings.Join(out, ",")
}

// queueIdle waits until the event queue holds nothing, visible or in
// flight: the turn function has taken and finished everything sent.
func queueIdle(ctx context.Context, api *sqs.Client, queueURL string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return err
		}
		if out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the event queue is not idle after %v: %v", within, out.Attributes)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// setEnv sets (or, with value "", removes) one environment variable of
// function fn and waits until the update took: MiniStack restarts the
// function's environments on a configuration change.
func setEnv(ctx context.Context, api *lambda.Client, fn, name, value string) error {
	cur, err := api.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
	if err != nil {
		return err
	}
	vars := map[string]string{}
	if cur.Environment != nil {
		for k, v := range cur.Environment.Variables {
			vars[k] = v
		}
	}
	if value == "" {
		delete(vars, name)
	} else {
		vars[name] = value
	}
	if _, err := api.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{FunctionName: aws.String(fn),
		Environment: &lambdatypes.Environment{Variables: vars}}); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		c, err := api.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
		if err == nil && c.LastUpdateStatus != lambdatypes.LastUpdateStatusInProgress {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the function's configuration update did not finish")
}

// bucketObjects reads every object of bucket (at most 10,000).
func bucketObjects(ctx context.Context, t *testing.T, api *s3.Client, bucket string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	p := s3.NewListObjectsV2Paginator(api, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() && len(out) < 10000 {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			obj, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatalf("get %s: %v", aws.ToString(o.Key), err)
			}
			b, _ := io.ReadAll(io.LimitReader(obj.Body, 32<<20))
			obj.Body.Close()
			out[aws.ToString(o.Key)] = b
		}
	}
	return out
}

// parseSSE is the events of a stream (comments dropped).
func parseSSE(raw []byte) ([]ssetest.Frame, error) {
	frames, err := ssetest.Parse(bytes.NewReader(raw))
	var events []ssetest.Frame
	for _, f := range frames {
		if f.Event != "" {
			events = append(events, f)
		}
	}
	return events, err
}

// streamURL GETs path from a function URL on the emulator (routed by the
// URL's host, <id>.lambda-url.<region>.localhost), asking for an event
// stream: with a bearer token (an auth type NONE URL whose function
// checks it), else SigV4-signed for lambda as an IAM caller of an AWS_IAM
// URL is; lastEventID resumes one. MiniStack hands the answer over when
// the function has finished it.
func (s *stack) streamURL(ctx context.Context, fnURL, path, lastEventID, bearer string) ([]byte, error) {
	u, err := url.Parse(fnURL)
	if err != nil {
		return nil, err
	}
	id, _, _ := strings.Cut(u.Hostname(), ".")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.Endpoint, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	eu, _ := url.Parse(s.Endpoint)
	req.Host = id + ".lambda-url." + region + ".localhost:" + eu.Port()
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	} else {
		sum := sha256.Sum256(nil)
		creds := aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey}
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "lambda", region, time.Now()); err != nil {
			return nil, err
		}
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return nil, fmt.Errorf("GET %s on the function URL: HTTP %d %s %.300s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return b, nil
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// TestDeployedTurns runs agent turns on the deployed stack: events posted
// to the IAM-authorized turn routes go to the instance's FIFO message
// group, the emulator's SQS event source mapping feeds them to the turn
// function, which keeps the turn in DynamoDB and calls the model through
// the real bedrock-runtime client (MiniStack's Converse, forwarded to the
// scripted model); a tool that needs consent parks the turn, the consent
// happens in Chromium at the demo OpenID provider, the callback function
// queues auth.granted, and the turn function resumes exactly that call.
func TestDeployedTurns(t *testing.T) {
	st := loadStack(t)
	if st.TurnFunction == "" {
		skipOrFail(t, "the deployed stack has no turn function (deploy it with -c turns=1; make deploy-local does)")
	}
	requireProviderAndBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	must, timed := steps(t)

	be := st.backends(ctx, t)
	db := dynamodb.NewFromConfig(be.Config)
	sqsAPI := sqs.NewFromConfig(be.Config)
	lambdaAPI := lambda.NewFromConfig(be.Config)
	s3API := s3.NewFromConfig(be.Config, func(o *s3.Options) { o.UsePathStyle = true })
	if st.TurnBucket == "" {
		t.Fatal("the stack has a turn function but no TurnBucketName output")
	}
	rec := &recorder{}
	api := turnAPI{gw: newGateway(st.Endpoint, st.APIHost, rec)}

	// The scripted model, where MiniStack's bedrock-runtime forwards.
	sm, err := scripted.New(turnScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lnModel := listen(t, bedrockProxyPort, "the scripted model (MiniStack's MINISTACK_BEDROCK_PROXY_URL)")
	modelSrv := &http.Server{Handler: sm, ReadHeaderTimeout: 10 * time.Second}
	go modelSrv.Serve(lnModel)
	t.Cleanup(func() { modelSrv.Close() })
	// The note tool's upstream.
	nt := &notes{byKey: map[string]int{}}
	lnNotes := listen(t, notesPort, "the note tool's recorder")
	notesSrv := &http.Server{Handler: nt, ReadHeaderTimeout: 10 * time.Second}
	go notesSrv.Serve(lnNotes)
	t.Cleanup(func() { notesSrv.Close() })

	callbackUser := st.PublicURL + "/oauth/callback/demo-user"
	listen(t, providerPort, "the demo provider").Close()
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Port: providerPort, Stats: true, Clients: []e2ekit.Client{demoClient(t, st, be, callbackUser)}})
	browser := e2ekit.StartBrowserWith(t, e2ekit.BrowserOptions{LocalhostSubdomains: true})

	rid := runID()
	secrets := newSecretSet()
	pages := &recorder{}
	t.Logf("run %s against stack %s (turn function %s)", rid, st.Name, st.TurnFunction)
	var instances []string // this run's, deleted at the end
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		for _, inst := range instances {
			if a, err := api.gw.do(cctx, http.MethodDelete, instancePath(inst)+"/assistant", nil, true); err != nil || (a.Code != 200 && a.Code != 204 && a.Code != 404) {
				t.Logf("cleanup: delete instance %s: %v %d", inst, err, a.Code)
			}
		}
	})

	// 1. The consent walkthrough, timed: consent (the callback completed
	// the session) → the resumed call starts (turn.resumed, committed by
	// the turn function as it takes the call up again).
	var latencies []time.Duration
	var consented []struct{ user, inst string } // whose grants the turns stored
	consentOnce := func(t *testing.T, inst, user string) (turnEventOut, string) {
		t.Helper()
		instances = append(instances, inst)
		consented = append(consented, struct{ user, inst string }{user, inst})
		if err := api.post(ctx, "who-"+inst, inst, "who am I?", user); err != nil {
			t.Fatal(err)
		}
		parked, err := api.waitEvent(ctx, inst, "turn.parked", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		link, _ := parked.Data["authorizationUrl"].(string)
		session, _ := parked.Data["authSessionId"].(string)
		checkAuthorizationURL(t, link, callbackUser)
		res := consent(ctx, t, browser, pages, secrets, link, user)
		if res.Status != 200 || !strings.Contains(res.BodyText, "Connected") {
			t.Fatalf("callback page: status %d %.300s", res.Status, res.BodyText)
		}
		resumed, err := api.waitEvent(ctx, inst, "turn.resumed", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s, err := be.Store.GetSession(ctx, session)
		if err != nil || s.CompletedAt == nil {
			t.Fatalf("the consent's session: %v %+v", err, s.Status)
		}
		latencies = append(latencies, resumed.At.Sub(*s.CompletedAt))
		return parked, session
	}
	inst0 := rid + "-consent"
	user0 := "alice-" + rid
	var parked turnEventOut
	var session string
	must(timed("consent walkthrough: parked → Chromium consent → callback → SQS FIFO → the turn function resumes the call", func(t *testing.T) {
		parked, session = consentOnce(t, inst0, user0)
		done, err := api.waitEvent(ctx, inst0, "turn.completed", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := api.events(ctx, inst0, done.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		got := types(evs)
		if strings.Count(got, "tool.called") != 1 || strings.Count(got, "tool.completed") != 1 || !strings.Contains(got, "turn.parked,") || !strings.Contains(got, "turn.resumed") {
			t.Fatalf("events of the turn: %s", got)
		}
		in, err := api.inspect(ctx, inst0)
		if err != nil || len(in.RecentTurns) != 1 || !strings.Contains(in.RecentTurns[0].FinalAnswer, "You are") {
			t.Fatalf("instance after the turn: %v %+v", err, in)
		}
		t.Logf("answer: %q; consent → resumed call: %v", in.RecentTurns[0].FinalAnswer, latencies[0])
	}))

	must(timed("auth.granted delivered five times, once after the dedup window → the tool ran once", func(t *testing.T) {
		before, err := api.events(ctx, inst0, parked.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		stats0, _ := p.Stats(ctx)
		in0, err := api.inspect(ctx, inst0)
		if err != nil {
			t.Fatal(err)
		}
		again := func(id string) domain.Event {
			return domain.Event{ID: id, SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: inst0, AgentName: "assistant",
				Input: `{"type":"auth.granted"}`, Metadata: map[string]string{"eventType": "auth.granted", "authSessionId": session}, EnqueuedAt: time.Now().UTC()}
		}
		// The callback queued the first; three more with its id (SQS drops
		// them within five minutes); one as if sent after the window: a
		// new deduplication id, the same consent.
		for _, id := range []string{session, session, session, session + ".late"} {
			if err := be.Queue.Enqueue(ctx, again(id)); err != nil {
				t.Fatal(err)
			}
		}
		// The late copy is recorded (the instance moves on, its turn does
		// not); the others never reach the function.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			in, err := api.inspect(ctx, inst0)
			if err != nil {
				t.Fatal(err)
			}
			if in.UpdatedAt.After(in0.UpdatedAt) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the late auth.granted was not recorded within a minute")
			}
		}
		if err := queueIdle(ctx, sqsAPI, st.QueueURL, time.Minute); err != nil {
			t.Fatal(err)
		}
		after, err := api.events(ctx, inst0, parked.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		if types(after) != types(before) {
			t.Fatalf("a duplicate auth.granted changed the turn:\n%s\n%s", types(before), types(after))
		}
		stats1, _ := p.Stats(ctx)
		if stats1.UserInfo != stats0.UserInfo {
			t.Fatalf("whoami ran again: %d userinfo calls at the provider", stats1.UserInfo-stats0.UserInfo)
		}
	}))

	must(timed("consent → resumed call latency: 9 more consents", func(t *testing.T) {
		for i := range 9 {
			consentOnce(t, fmt.Sprintf("%s-lat-%d", rid, i), fmt.Sprintf("u%d-%s", i, rid))
		}
		sorted := slices.Clone(latencies)
		slices.Sort(sorted)
		t.Logf("FIGURE consent → resumed call start (%d consents): p50 %v, p99 %v, max %v", len(sorted),
			percentile(sorted, 0.5).Round(time.Millisecond), percentile(sorted, 0.99).Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
	}))

	const nInst, nMsg = 20, 10
	must(timed("20 instances × 10 messages posted concurrently: order kept per instance, nothing lost, instances in parallel", func(t *testing.T) {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, nInst)
		for i := range nInst {
			inst := fmt.Sprintf("%s-load-%02d", rid, i)
			instances = append(instances, inst)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range nMsg {
					if err := api.post(ctx, fmt.Sprintf("m%02d", j), inst, fmt.Sprintf("echo: %d", j), user0); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		posted := time.Since(start)
		// Every instance's turns ended (the emulator's queue counters do
		// not show what its event source mapping holds, so the test waits
		// for the outcome itself).
		for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
			done := 0
			for i := range nInst {
				in, err := api.inspect(ctx, fmt.Sprintf("%s-load-%02d", rid, i))
				if err == nil && in.ActiveTurn == nil && in.Backlog == 0 && len(in.RecentTurns) == nMsg {
					done++
				}
			}
			if done == nInst {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 4 minutes %d of %d instances have run their %d messages", done, nInst, nMsg)
			}
		}
		type span struct{ from, to time.Time }
		var spans []span
		for i := range nInst {
			inst := fmt.Sprintf("%s-load-%02d", rid, i)
			in, err := api.inspect(ctx, inst)
			if err != nil {
				t.Fatal(err)
			}
			if len(in.RecentTurns) != nMsg || in.Backlog != 0 || in.ActiveTurn != nil {
				t.Fatalf("%s: %d turns, backlog %d, active %v; want %d ended turns", inst, len(in.RecentTurns), in.Backlog, in.ActiveTurn, nMsg)
			}
			turns := slices.Clone(in.RecentTurns)
			sort.Slice(turns, func(a, b int) bool { return turns[a].StartedAt.Before(turns[b].StartedAt) })
			var order []string
			for k, tr := range turns {
				if tr.Status != "completed" || tr.EndedAt == nil {
					t.Fatalf("%s: turn %s %s", inst, tr.ID, tr.Status)
				}
				if k > 0 && tr.StartedAt.Before(*turns[k-1].EndedAt) {
					t.Fatalf("%s: turn %s started before the one before it ended", inst, tr.ID)
				}
				evs, err := api.events(ctx, inst, tr.ID)
				if err != nil || len(evs) == 0 {
					t.Fatalf("%s: events of %s: %v", inst, tr.ID, err)
				}
				id, _ := evs[0].Data["eventId"].(string)
				id, _, _ = strings.Cut(strings.TrimPrefix(id, "in:"), "@") // posted ids are scoped: in:<id>@<instance>
				order = append(order, id)
				spans = append(spans, span{tr.StartedAt, *tr.EndedAt})
			}
			for j, id := range order {
				if id != fmt.Sprintf("m%02d", j) {
					t.Fatalf("%s ran its messages in the order %v", inst, order)
				}
			}
		}
		// Instances in parallel: the most turns of different instances
		// running at one moment.
		most := 0
		for _, a := range spans {
			n := 0
			for _, b := range spans {
				if !b.from.After(a.from) && b.to.After(a.from) {
					n++
				}
			}
			most = max(most, n)
		}
		if most < 2 {
			t.Fatalf("no two instances' turns ever ran at once (%d turns)", len(spans))
		}
		t.Logf("FIGURE %d turns of %d instances: posted in %v, all done %v after the first post; up to %d turns at once",
			len(spans), nInst, posted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), most)
	}))

	must(timed("the turn function killed after a tool ran → the retried message finishes the turn, the tool is not run again", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "fault-fired")
		if err := setEnv(ctx, lambdaAPI, st.TurnFunction, faultEnv, "exit-after-tool:"+marker); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := setEnv(context.Background(), lambdaAPI, st.TurnFunction, faultEnv, ""); err != nil {
				t.Errorf("remove the fault: %v", err)
			}
		})
		inst := rid + "-crash"
		instances = append(instances, inst)
		start := time.Now()
		if err := api.post(ctx, "note-1", inst, "note: the milk", user0); err != nil {
			t.Fatal(err)
		}
		done, err := api.waitEvent(ctx, inst, "turn.completed", 3*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the fault never fired: %v", err)
		}
		evs, err := api.events(ctx, inst, done.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		byKey, _ := nt.snapshot()
		if len(byKey) != 1 {
			t.Fatalf("the note tool's upstream saw %v (by Idempotency-Key), want one POST", byKey)
		}
		for k, n := range byKey {
			if n != 1 || k == "" {
				t.Fatalf("the note tool ran %d times for key %q", n, k)
			}
		}
		got := types(evs)
		if !strings.Contains(got, "tool.failed") || strings.Count(got, "tool.called") != 1 {
			t.Fatalf("events: %s (want the call answered outcome-unknown, not run again)", got)
		}
		t.Logf("crash → retried message → turn completed in %v; events %s", time.Since(start).Round(time.Millisecond), got)
	}))

	must(timed("continuation hops: with a step reserve of the function's whole timeout, each invocation runs one step and hands over", func(t *testing.T) {
		cfg, err := lambdaAPI.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(st.TurnFunction)})
		if err != nil {
			t.Fatal(err)
		}
		was := cfg.Environment.Variables["AGENTAUTH_TURN_RESERVE_SECONDS"]
		reserve := fmt.Sprint(aws.ToInt32(cfg.Timeout))
		if err := setEnv(ctx, lambdaAPI, st.TurnFunction, "AGENTAUTH_TURN_RESERVE_SECONDS", reserve); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := setEnv(context.Background(), lambdaAPI, st.TurnFunction, "AGENTAUTH_TURN_RESERVE_SECONDS", was); err != nil {
				t.Errorf("restore the reserve: %v", err)
			}
		}()
		var hops []time.Duration
		for i := range 5 {
			inst := fmt.Sprintf("%s-hop-%d", rid, i)
			instances = append(instances, inst)
			if err := api.post(ctx, "note-hop", inst, "note: hop", user0); err != nil {
				t.Fatal(err)
			}
			done, err := api.waitEvent(ctx, inst, "turn.completed", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := api.events(ctx, inst, done.TurnID)
			if err != nil {
				t.Fatal(err)
			}
			// step.completed of step 1, then step.started of step 2 in
			// the next invocation (the continuation's).
			var ended time.Time
			for _, e := range evs {
				switch {
				case e.Type == "step.completed" && ended.IsZero():
					ended = e.At
				case e.Type == "step.started" && !ended.IsZero():
					hops = append(hops, e.At.Sub(ended))
				}
			}
		}
		if len(hops) != 5 {
			t.Fatalf("%d hops measured in 5 two-step turns", len(hops))
		}
		// MiniStack writes what functions invoked by an event source
		// mapping log to its own log, not to CloudWatch Logs.
		msLog, err := os.ReadFile(st.MiniStackLog)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(msLog), `"msg":"turn handed over"`); n < 5 {
			t.Fatalf("the turn function logged %d hand-overs, want at least 5", n)
		}
		slices.Sort(hops)
		t.Logf("FIGURE continuation hop (step end → next step start in the next invocation, %d hops): p50 %v, max %v",
			len(hops), percentile(hops, 0.5).Round(time.Millisecond), hops[len(hops)-1].Round(time.Millisecond))
	}))

	var sseBytes []byte
	must(timed("live turn events over the turn function's URL (RESPONSE_STREAM): followed until the turn ends; Last-Event-ID resumes with no event lost or repeated", func(t *testing.T) {
		if st.TurnStreamURL == "" {
			t.Fatal("the stack has no TurnStreamUrl output")
		}
		inst, user := rid+"-sse", "sse-"+rid
		instances = append(instances, inst)
		if err := api.post(ctx, "who-sse", inst, "who am I?", user); err != nil {
			t.Fatal(err)
		}
		parked, err := api.waitEvent(ctx, inst, "turn.parked", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		consented = append(consented, struct{ user, inst string }{user, inst})
		path := instancePath(inst) + "/assistant/turns/" + url.PathEscape(parked.TurnID) + "/events"
		type result struct {
			frames []ssetest.Frame
			raw    []byte
			err    error
		}
		follow := make(chan result, 1)
		go func() {
			raw, err := st.streamURL(ctx, st.TurnStreamURL, path, "", "")
			var frames []ssetest.Frame
			if err == nil {
				frames, err = parseSSE(raw)
			}
			follow <- result{frames, raw, err}
		}()
		time.Sleep(time.Second) // the stream is open and waiting on the parked turn
		link, _ := parked.Data["authorizationUrl"].(string)
		consent(ctx, t, browser, pages, secrets, link, user)
		var got result
		select {
		case got = <-follow:
		case <-time.After(time.Minute):
			t.Fatal("the stream did not end after the turn did")
		}
		if got.err != nil {
			t.Fatal(got.err)
		}
		sseBytes = append(sseBytes, got.raw...)
		stored, err := api.events(ctx, inst, parked.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i, f := range got.frames {
			ids = append(ids, f.ID)
			if i >= len(stored) || f.ID != fmt.Sprint(stored[i].Seq) || f.Event != stored[i].Type {
				t.Fatalf("stream frame %d: id %s event %s; stored %s", i, f.ID, f.Event, types(stored))
			}
		}
		if len(got.frames) != len(stored) || got.frames[len(got.frames)-1].Event != "turn.completed" {
			t.Fatalf("the stream sent %v, the turn stored %s", ids, types(stored))
		}
		// Reconnect after the third event: exactly the rest.
		raw, err := st.streamURL(ctx, st.TurnStreamURL, path, got.frames[2].ID, "")
		if err != nil {
			t.Fatal(err)
		}
		sseBytes = append(sseBytes, raw...)
		rest, err := parseSSE(raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) != len(stored)-3 || rest[0].ID != fmt.Sprint(stored[3].Seq) || rest[len(rest)-1].Event != "turn.completed" {
			t.Fatalf("after Last-Event-ID %s: %d frames from %v, want %d from %d", got.frames[2].ID, len(rest), rest, len(stored)-3, stored[3].Seq)
		}
		t.Logf("followed %d events (%s) through a parked turn's consent; resumed after %s with %d", len(got.frames), strings.Join(ids, ","), got.frames[2].ID, len(rest))
	}))

	must(timed("a 48 KB tool output: kept in the S3 bucket, not the table, and the turn reads it back", func(t *testing.T) {
		inst := rid + "-large"
		instances = append(instances, inst)
		if err := api.post(ctx, "note-big", inst, "note: a long one", user0); err != nil {
			t.Fatal(err)
		}
		done, err := api.waitEvent(ctx, inst, "turn.completed", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := api.events(ctx, inst, done.TurnID)
		if err != nil || !strings.Contains(types(evs), "tool.completed") {
			t.Fatalf("events: %v %s", err, types(evs))
		}
		objs := bucketObjects(ctx, t, s3API, st.TurnBucket)
		n := 0
		for key, body := range objs {
			if strings.HasPrefix(key, "turns/") && strings.Contains(string(body), strings.Repeat("r", 48<<10)) {
				n++
			}
		}
		if n == 0 {
			t.Fatalf("no object under turns/ of %s holds the tool output (%d objects)", st.TurnBucket, len(objs))
		}
		items, err := scanTable(ctx, db, st.TableName)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if s := itemText(it); len(s) > 40<<10 {
				t.Errorf("a %d-byte item in the table (%s)", len(s), attrString(it, "kind"))
			}
		}
		t.Logf("%d object(s) hold the output; no table item over 40 KB (%d items)", n, len(items))
	}))

	timed("leak scan: no token in any log group, table item, turn event, model request or response", func(t *testing.T) {
		for _, c := range consented {
			tok, _, err := api.gw.token(ctx, tokenReq{App: "demo-user", User: "demo:user:" + c.user, Instance: c.inst})
			if err != nil || tok.Status != "ready" {
				t.Fatalf("the grant the turn stored for %s: %v %s", c.user, err, tok.describe())
			}
			secrets.keep("access token (a consent's grant)", tok.AccessToken)
		}
		n, kinds := secrets.count()
		if n == 0 {
			t.Fatal("no secret to look for")
		}
		leaks := 0
		for _, fn := range []string{"gettoken", "callback", "turn"} {
			group := "/aws/lambda/" + strings.TrimSuffix(st.GetToken, "-gettoken") + "-" + fn
			evs, err := st.logEvents(ctx, group)
			if err != nil {
				t.Fatalf("%s: %v", group, err)
			}
			leaks += secrets.scan(t, group, logText(evs))
		}
		items, err := scanTable(ctx, db, st.TableName)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(items)
		leaks += secrets.scan(t, "the table's items", string(raw))
		objs := bucketObjects(ctx, t, s3API, st.TurnBucket)
		for key, body := range objs {
			leaks += secrets.scan(t, "S3 object "+key, string(body))
		}
		reqs, _ := json.Marshal(sm.Requests())
		leaks += secrets.scan(t, "what the scripted model was sent", string(reqs))
		_, bodies := nt.snapshot()
		leaks += secrets.scan(t, "what the note tool was sent", strings.Join(bodies, "\n"))
		for _, r := range rec.all() {
			if r.what != "ready" {
				leaks += secrets.scan(t, "response of "+r.what, string(r.body))
			}
		}
		for _, r := range pages.all() {
			leaks += secrets.scan(t, r.what, string(r.body))
		}
		leaks += secrets.scan(t, "the SSE streams", string(sseBytes))
		// The turn function's output when the event source mapping
		// invokes it: MiniStack keeps it in its own log.
		if msLog, err := os.ReadFile(st.MiniStackLog); err != nil {
			t.Errorf("read %s: %v", st.MiniStackLog, err)
		} else {
			leaks += secrets.scan(t, "MiniStack's log (the turn function's output)", string(msLog))
		}
		t.Logf("leak scan: %d secret values (%v) against 3 log groups, %d table items, %d S3 objects, %d model requests, %d responses: %d leaks",
			n, kinds, len(items), len(objs), len(sm.Requests()), len(rec.all()), leaks)
	})
}
