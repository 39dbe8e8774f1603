package e2ekit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's live turn timeline, as a test watches it in a tab: the
// entries the page's EventSource appends, and the replay the page reloads
// itself into once the turn has ended. Both the local console test and
// the deployed one (test/e2eaws) read the page through these, so the
// page's markup (#timeline, li.ev[data-seq], #turn-status, #live) is
// named once on the test side.

// WatchAppended records, in the tab's sessionStorage, each entry the page
// appends to its timeline from now on as "<seq> <title>". sessionStorage
// survives the reload the page does once the turn ends; entries a reload
// renders on the server are never recorded, so what Appended returns was
// appended live.
func WatchAppended(tab context.Context) error {
	_, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(() => {
		sessionStorage.setItem('appended', '[]');
		const list = document.getElementById('timeline');
		new MutationObserver((records) => {
			const seen = JSON.parse(sessionStorage.getItem('appended'));
			for (const r of records) for (const n of r.addedNodes) {
				if (n.nodeType === 1 && n.matches('li.ev')) seen.push(n.dataset.seq + ' ' + n.querySelector('strong').textContent);
			}
			sessionStorage.setItem('appended', JSON.stringify(seen));
		}).observe(list, {childList: true});
		return true;
	})()`))
	if err != nil {
		return fmt.Errorf("e2ekit: watch the timeline: %w", err)
	}
	return nil
}

// Appended is what WatchAppended has recorded so far. An error while the
// page reloads is expected: the caller reads again.
func Appended(tab context.Context) ([]string, error) {
	s, err := chromedp.Run(tab, chromedp.Evaluate[string](`sessionStorage.getItem('appended') || '[]'`))
	if err != nil {
		return nil, err
	}
	var appended []string
	if err := json.Unmarshal([]byte(s), &appended); err != nil {
		return nil, fmt.Errorf("e2ekit: read the appended entries: %w", err)
	}
	return appended, nil
}

// RepeatedSeqs names each seq appended more than once, in the order its
// second copy came.
func RepeatedSeqs(appended []string) []string {
	seen := map[string]bool{}
	var repeated []string
	for _, a := range appended {
		seq, _, _ := strings.Cut(a, " ")
		if seen[seq] {
			repeated = append(repeated, seq)
		}
		seen[seq] = true
	}
	return repeated
}

// WaitSettled waits, reading every poll until within, for the tab to show
// a loaded timeline that no longer follows the turn (no #live) and whose
// #turn-status is want. It returns the last status read (empty while the
// page was loading or still live) and the last read's error.
func WaitSettled(ctx, tab context.Context, want string, within, poll time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		st, err := chromedp.Run(tab, chromedp.Evaluate[string](`(() => {
			const s = document.getElementById('turn-status');
			return document.readyState === 'complete' && s && !document.getElementById('live') ? s.textContent : '';
		})()`))
		if err == nil && st == want {
			return st, nil
		}
		if err == nil {
			err = fmt.Errorf("e2ekit: the timeline did not settle as %s within %v", want, within)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return st, err
		}
		WaitTick(ctx, poll)
	}
}

// WaitTick waits d or until ctx ends: a poll's pause between reads.
func WaitTick(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
