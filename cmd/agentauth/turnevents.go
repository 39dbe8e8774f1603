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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/turn"
)

// turnEnds are the types of a turn's last event: a stream that has sent
// one is over.
var turnEnds = []string{turn.EvTurnCompleted, turn.EvTurnFailed, turn.EvTurnInterrupted}

// turnEvents prints a turn's events, one JSON object a line as the API
// holds them: the turn turnID names, else the instance's latest (its
// active turn, else the last that ended). follow: until the turn ends.
func turnEvents(ctx context.Context, c *apiClient, t *target, turnID string, follow bool, std stdio) error {
	path := instancePath(t.swarm, t.key, t.agent)
	if turnID == "" {
		var in struct {
			ActiveTurn  *struct{ ID, Status string }  `json:"activeTurn"`
			RecentTurns []struct{ ID, Status string } `json:"recentTurns"`
		}
		if err := c.call(ctx, "GET", path, nil, &in); err != nil {
			return err
		}
		latest := in.ActiveTurn
		if latest == nil && len(in.RecentTurns) > 0 {
			latest = &in.RecentTurns[0] // newest first
		}
		if latest == nil {
			return fmt.Errorf("%s/%s/%s has no turn yet: its first event is still queued, or waits in its backlog", t.swarm, t.key, t.agent)
		}
		turnID = latest.ID
		fmt.Fprintf(std.err, "turn %s (%s)\n", turnID, latest.Status)
	}
	path += "/turns/" + segment(turnID) + "/events"
	if follow {
		return c.follow(ctx, path, std)
	}
	var out struct{ Data []json.RawMessage }
	if err := c.call(ctx, "GET", path, nil, &out); err != nil {
		return err
	}
	for _, e := range out.Data {
		if err := printEvent(std.out, e); err != nil {
			return err
		}
	}
	return nil
}

// printEvent writes an event's JSON on one line.
func printEvent(w io.Writer, data []byte) error {
	var line bytes.Buffer
	if err := json.Compact(&line, data); err != nil {
		return fmt.Errorf("an event that is not JSON: %w", err)
	}
	line.WriteByte('\n')
	_, err := w.Write(line.Bytes())
	return err
}

// Following a stream: how long a stream may say nothing (the server
// sends a keep-alive every 15 s) before it is taken for dead and
// reconnected, and how often in a row connecting may fail.
const (
	followIdle     = 45 * time.Second
	followAttempts = 6
)

// follow prints the events of the turn events route at path as they
// come, over its event stream, until the turn's end has been printed.
// A stream that closes before (the server's limit on a stream's length,
// a restart, a dropped connection) is reconnected with Last-Event-ID,
// and no event is printed twice.
func (c *apiClient) follow(ctx context.Context, path string, std stdio) error {
	last := int64(-1) // the seq of the last event printed
	failures, quiet := 0, 0
	for {
		progressed, ended, err := c.followOnce(ctx, path, &last, std)
		switch {
		case ended:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case progressed:
			failures, quiet = 0, 0
		}
		var wait time.Duration
		var retry *retryAfter
		switch {
		case err == nil:
			// The server ended the stream (its limit on a stream's
			// length): carry on where it stopped — at once, unless it
			// keeps closing with nothing new.
			if !progressed {
				quiet++
				wait = backoff(quiet - 1)
			}
		case errors.Is(err, errPermanent):
			return err
		default:
			if failures++; failures >= followAttempts {
				return fmt.Errorf("gave up following the turn after %d failed tries in a row: %w", failures, err)
			}
			wait = backoff(failures)
			if errors.As(err, &retry) && retry.after > 0 {
				wait = retry.after
			}
			fmt.Fprintf(std.err, "stream interrupted: %v; reconnecting in %s\n", err, wait)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
	}
}

// backoff is the wait before the nth retry: none for the 0th, then half
// a second, doubling up to 4 s.
func backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(1<<min(n-1, 3)) * 500 * time.Millisecond
}

// errPermanent marks an answer that asking again would not change (a
// 4xx other than 429: the turn is unknown, the token wrong).
var errPermanent = errors.New("refused")

// retryAfter is a 429 or 503: the server asks to come back later.
type retryAfter struct {
	after time.Duration
	err   error
}

func (r *retryAfter) Error() string { return r.err.Error() }

// followOnce reads one connection of the stream, printing the events
// after *last. progressed: it printed at least one; ended: it printed
// the turn's end.
func (c *apiClient) followOnce(parent context.Context, path string, last *int64, std stdio) (progressed, ended bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return false, false, fmt.Errorf("%w: %w", errPermanent, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
	req.Header.Set("Accept", "text/event-stream")
	if *last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return false, false, fmt.Errorf("%w (is `agentauth serve` running at %s?)", err, c.base)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := answerError("GET", path, resp)
		switch {
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			return false, false, &retryAfter{after: time.Duration(secs) * time.Second, err: err}
		case resp.StatusCode/100 == 4:
			return false, false, fmt.Errorf("%w: %w", errPermanent, err)
		}
		return false, false, err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, false, fmt.Errorf("%w: GET %s: the answer is %q, not an event stream", errPermanent, path, ct)
	}
	// A stream that goes silent past the keep-alives is dead: drop it.
	idle := time.AfterFunc(followIdle, cancel)
	defer idle.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var id, typ string
	var data []string
	for sc.Scan() {
		idle.Reset(followIdle)
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "": // a comment
				if value != httpx.CommentKeepAlive {
					fmt.Fprintf(std.err, "server: %s\n", value)
				}
			case "id":
				id = value
			case "event":
				typ = value
			case "data":
				data = append(data, value)
			}
			continue
		}
		// A blank line ends an event.
		if len(data) == 0 {
			id, typ = "", ""
			continue
		}
		seq, perr := strconv.ParseInt(id, 10, 64)
		if perr != nil {
			return progressed, false, fmt.Errorf("GET %s: an event whose id %q is not its seq", path, id)
		}
		if seq > *last {
			if err := printEvent(std.out, []byte(strings.Join(data, "\n"))); err != nil {
				return progressed, false, err
			}
			*last, progressed = seq, true
			if slices.Contains(turnEnds, typ) {
				return true, true, nil
			}
		}
		id, typ, data = "", "", nil
	}
	switch {
	case parent.Err() != nil:
		return progressed, false, parent.Err()
	case ctx.Err() != nil:
		return progressed, false, fmt.Errorf("the stream said nothing for %s", followIdle)
	}
	return progressed, false, sc.Err()
}
