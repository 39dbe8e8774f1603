//go:build e2eaws

package e2eaws

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The refresh worker: this test binary re-executed as a separate OS
// process, firing concurrent signed token requests at one moment.
const (
	envWorker      = "E2EAWS_REFRESH_WORKER" // "1" in a worker process
	envWorkerIndex = "E2EAWS_WORKER_INDEX"
	envWorkerBody  = "E2EAWS_WORKER_BODY"    // the POST /v1/oauth/token body
	envWorkerN     = "E2EAWS_WORKER_N"       // concurrent requests
	envWorkerStart = "E2EAWS_WORKER_START"   // Unix nanoseconds to fire at
	envWorkerHost  = "E2EAWS_WORKER_APIHOST" // the API's Host header
	resultPrefix   = "E2EAWS-WORKER-RESULT "
)

// workerAnswer is one request's outcome. Token is set for ready answers
// only and travels over the worker's stdout pipe to the parent, never to a
// log; Body is kept for the others (the leak scan reads it).
type workerAnswer struct {
	Process int    `json:"process"`
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Token   string `json:"token,omitempty"`
	Body    string `json:"body"`
	Err     string `json:"err,omitempty"`
	Sent    int64  `json:"sent"` // Unix nanoseconds
	Done    int64  `json:"done"`
}

func nonReady(a workerAnswer) string {
	if a.Status == "ready" {
		return "[ready answer elided]"
	}
	return a.Body
}

// TestHelperRefreshWorker is not a test on its own: it runs only inside a
// worker process started by runWorkers.
func TestHelperRefreshWorker(t *testing.T) {
	if os.Getenv(envWorker) != "1" {
		t.Skip("helper: runs only as a refresh worker process of TestDeployedStackEndToEnd")
	}
	idx, _ := strconv.Atoi(os.Getenv(envWorkerIndex))
	n, err := strconv.Atoi(os.Getenv(envWorkerN))
	if err != nil || n < 1 || n > 200 {
		t.Fatalf("%s=%q", envWorkerN, os.Getenv(envWorkerN))
	}
	startNs, err := strconv.ParseInt(os.Getenv(envWorkerStart), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", envWorkerStart, err)
	}
	body := []byte(os.Getenv(envWorkerBody))
	gw := newGateway(os.Getenv("AWS_ENDPOINT_URL"), os.Getenv(envWorkerHost), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Connections first, so the requests leave together.
	time.Sleep(time.Until(time.Unix(0, startNs)))
	answers := make([]workerAnswer, n)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := workerAnswer{Process: idx, Sent: time.Now().UnixNano()}
			resp, err := gw.do(ctx, "POST", "/v1/oauth/token", body, true)
			a.Done = time.Now().UnixNano()
			if err != nil {
				a.Err = err.Error()
				answers[i] = a
				return
			}
			a.Code = resp.Code
			var out tokenResult
			if json.Unmarshal(resp.Body, &out) == nil {
				a.Status = out.Status
			}
			if a.Status == "ready" {
				a.Token = out.AccessToken
			}
			a.Body = string(resp.Body)
			answers[i] = a
		}()
	}
	wg.Wait()
	b, _ := json.Marshal(answers)
	fmt.Println(resultPrefix + string(b))
}

// burstReport is what runWorkers saw.
type burstReport struct {
	answers         []workerAnswer
	span            time.Duration // first request sent → last answer
	first, last     time.Duration // from the start moment to the first and last answer
	firstSent       time.Duration // from the start moment to the first and last request sent
	lastSent        time.Duration
	startMs         int64 // the start moment, Unix milliseconds
	spawnedGetToken int   // MiniStack environments started meanwhile
}

// runWorkers starts procs worker processes (this test binary again), each
// firing n concurrent signed requests with body at the same moment, and
// collects every answer.
func runWorkers(ctx context.Context, t *testing.T, st *stack, r tokenReq, procs, n int) burstReport {
	t.Helper()
	// Let both processes start before the moment they fire at (a busy
	// machine takes a while to start a test binary).
	start := time.Now().Add(3 * time.Second)
	type result struct {
		answers []workerAnswer
		err     error
		stderr  string
	}
	results := make([]result, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestHelperRefreshWorker$", "-test.count=1", "-test.timeout=3m")
			cmd.Env = append(os.Environ(),
				envWorker+"=1",
				envWorkerIndex+"="+strconv.Itoa(i),
				envWorkerBody+"="+string(r.body()),
				envWorkerN+"="+strconv.Itoa(n),
				envWorkerStart+"="+strconv.FormatInt(start.UnixNano(), 10),
				envWorkerHost+"="+st.APIHost,
			)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			res := result{err: err, stderr: stderr.String()}
			sc := bufio.NewScanner(&stdout)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			found := false
			for sc.Scan() {
				if line, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
					found = true
					if jerr := json.Unmarshal([]byte(line), &res.answers); jerr != nil {
						res.err = fmt.Errorf("worker %d result: %w", i, jerr)
					}
				}
			}
			if !found && res.err == nil {
				res.err = fmt.Errorf("worker %d printed no result", i)
			}
			if !found {
				// Never the whole stdout: a partial result line could hold a token.
				res.stderr += "\n(stdout lines without the result: " + strconv.Itoa(strings.Count(stdout.String(), "\n")) + ")"
			}
			results[i] = res
		}()
	}
	wg.Wait()
	var rep burstReport
	var firstSent, lastSent, lastDone, firstDone int64
	for i, res := range results {
		if res.err != nil {
			t.Fatalf("refresh worker process %d: %v\nstderr: %s", i, res.err, res.stderr)
		}
		if len(res.answers) != n {
			t.Fatalf("refresh worker process %d: %d answers, want %d", i, len(res.answers), n)
		}
		for _, a := range res.answers {
			if firstSent == 0 || a.Sent < firstSent {
				firstSent = a.Sent
			}
			if a.Sent > lastSent {
				lastSent = a.Sent
			}
			if a.Done > lastDone {
				lastDone = a.Done
			}
			if firstDone == 0 || a.Done < firstDone {
				firstDone = a.Done
			}
		}
		rep.answers = append(rep.answers, res.answers...)
	}
	rep.startMs = start.UnixMilli()
	rep.span = time.Duration(lastDone - firstSent)
	rep.first = time.Duration(firstDone - start.UnixNano())
	rep.firstSent = time.Duration(firstSent - start.UnixNano())
	rep.lastSent = time.Duration(lastSent - start.UnixNano())
	rep.last = time.Duration(lastDone - start.UnixNano())
	return rep
}

// warmPool brings the function behind GET /healthz (gettoken) to at least
// n warm Lambda environments before the burst, ramping the concurrency up
// in steps so that only a few environments start at once.
//
// Why: when one environment's init fails, MiniStack 1.5.33 tears down every
// environment of the function (invalidate_worker on the whole $LATEST
// pool), killing the other invocations in flight; AWS fails only that
// environment's invocation. Forty simultaneous cold starts on a busy
// 2-core machine sometimes push one init past its 5 s Secrets Manager
// timeout, and then all forty answers are 502. Warm environments keep the
// burst about the refresh lease, not about the emulator's cold starts. It
// returns a line for the report.
func warmPool(ctx context.Context, t *testing.T, st *stack, gw *gateway, n int) string {
	t.Helper()
	const step = 10
	start := time.Now()
	failures := 0
	for conc, rounds := step, 0; rounds < 12 && ctx.Err() == nil; rounds++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		bad := 0
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := gw.do(ctx, "GET", "/healthz", nil, false)
				if err != nil || a.Code != 200 {
					mu.Lock()
					bad++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		failures += bad
		envs := lambdaEnvs(st, st.GetToken)
		switch {
		case envs == nil && bad == 0 && conc >= n:
			return fmt.Sprintf("warmed with %d concurrent GET /healthz in %v (environments not observable)", conc, time.Since(start).Round(time.Millisecond))
		case envs != nil && len(envs) >= n:
			return fmt.Sprintf("%d warm gettoken environments after %d round(s) in %v; %d warm-up request(s) failed on the way",
				len(envs), rounds+1, time.Since(start).Round(time.Millisecond), failures)
		case bad > 0:
			// The pool was torn down: start the ramp again.
			conc = step
			time.Sleep(time.Second)
		case envs != nil:
			conc = min(n, len(envs)+step)
		default:
			conc = min(n, conc+step)
		}
	}
	return fmt.Sprintf("could not warm %d environments in %v (%d warm-up requests failed); the burst may start cold", n, time.Since(start).Round(time.Millisecond), failures)
}
