package e2ekit

import (
	"context"
	"fmt"
	"iter"
	"net/http"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// HTML is the page the session's tab shows, as the browser holds it now.
func (s *Session) HTML(ctx context.Context) (string, error) {
	tab, cancel := s.Tab(ctx)
	defer cancel()
	return chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
}

// AxeResult is what axe-core found on a page: how many rules passed and
// each violation with the elements it names.
type AxeResult struct {
	Passes     int            `json:"passes"`
	Violations []AxeViolation `json:"violations"`
}

// AxeViolation is one axe-core rule a page broke.
type AxeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"` // minor | moderate | serious | critical
	Help   string `json:"help"`
	Nodes  []struct {
		Target string `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// Axe runs axe-core (script: AxeScript's) on the tab's page. DevTools'
// evaluation is not the page's script, so a CSP without inline script
// does not stop it. A run that passed no rule did not run: an error.
func (s *Session) Axe(ctx context.Context, script string) (AxeResult, error) {
	tab, cancel := s.Tab(ctx)
	defer cancel()
	if _, err := chromedp.Run(tab, chromedp.Evaluate[chromedp.Void](`if (typeof axe === 'undefined') {`+script+"\n}")); err != nil {
		return AxeResult{}, fmt.Errorf("e2ekit: inject axe-core: %w", err)
	}
	res, err := chromedp.Run(tab, chromedp.Evaluate[AxeResult](`axe.run(document).then((r) => ({
		passes: r.passes.length,
		violations: r.violations.map((v) => ({
			id: v.id, impact: v.impact || '', help: v.help,
			nodes: v.nodes.map((n) => ({target: n.target.join(' '), html: n.html})),
		})),
	}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		return res, fmt.Errorf("e2ekit: axe-core: %w", err)
	}
	if res.Passes == 0 {
		return res, fmt.Errorf("e2ekit: axe-core passed no rule: it did not run")
	}
	return res, nil
}

// Click clicks selector on the tab's page like a user and waits for the
// page it leads to. When dialog is set the click must open a confirm
// dialog saying exactly that, which is accepted (a destructive form
// asks first). It returns the new page's status and HTML.
func (s *Session) Click(ctx context.Context, selector, dialog string) (int, string, error) {
	tab, cancel := s.Tab(ctx)
	defer cancel()
	type clicked struct {
		resp *network.Response
		err  error
	}
	var dialogs iter.Seq2[page.EventJavascriptDialogOpening, error]
	if dialog != "" {
		// Subscribed before the click, so the dialog is not missed.
		dialogs = chromedp.Events(tab, page.JavascriptDialogOpening)
	}
	done := make(chan clicked, 1)
	go func() {
		resp, err := chromedp.RunResponse(tab, chromedp.Click(chromedp.CSS(selector)))
		done <- clicked{resp, err}
	}()
	var asked error
	if dialogs != nil {
		for ev, err := range dialogs {
			if err != nil {
				return 0, "", fmt.Errorf("e2ekit: waiting for %s's dialog: %w", selector, err)
			}
			if ev.Type != page.DialogTypeConfirm || ev.Message != dialog {
				asked = fmt.Errorf("e2ekit: %s asked %s %q, want confirm %q", selector, ev.Type, ev.Message, dialog)
			}
			if _, err := chromedp.Call(tab, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return 0, "", fmt.Errorf("e2ekit: accept %s's dialog: %w", selector, err)
			}
			break
		}
	}
	r := <-done
	if r.err != nil || r.resp == nil {
		return 0, "", fmt.Errorf("e2ekit: click %s: %v", selector, r.err)
	}
	html, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		return 0, "", fmt.Errorf("e2ekit: read the page after %s: %w", selector, err)
	}
	return int(r.resp.Status), html, asked
}

// Cookie is the cookie named name the browser would send to url, with
// its attributes as the browser holds them (nil when it holds none).
func (s *Session) Cookie(ctx context.Context, url, name string) (*network.Cookie, error) {
	tab, cancel := s.Tab(ctx)
	defer cancel()
	res, err := chromedp.Call(tab, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		return nil, fmt.Errorf("e2ekit: cookies of %s: %w", RedactURL(url), err)
	}
	for _, ck := range res.Cookies {
		if ck.Name == name {
			return ck, nil
		}
	}
	return nil, nil
}

// HTTPCookie is c as a request sends it.
func HTTPCookie(c *network.Cookie) *http.Cookie { return &http.Cookie{Name: c.Name, Value: c.Value} }

// FormValue is the value of the first input named name on the tab's page
// ("" with an error when there is none).
func (s *Session) FormValue(ctx context.Context, name string) (string, error) {
	tab, cancel := s.Tab(ctx)
	defer cancel()
	v, err := chromedp.Run(tab, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector('input[name=%q]') || {value: ''}).value`, name)))
	if err == nil && v == "" {
		err = fmt.Errorf("e2ekit: no input %q on the page", name)
	}
	return v, err
}
