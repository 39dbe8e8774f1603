package model

import (
	"context"
	"errors"
	"testing"
	"time"
)

// flaky fails with errs in order, then answers.
type flaky struct {
	errs  []error
	calls int
}

func (f *flaky) Call(context.Context, Request) (Response, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return Response{}, err
	}
	return Response{Finish: FinishStop}, nil
}

func TestRetryRules(t *testing.T) {
	p := RetryPolicy{MaxRetries: 3, InitialDelay: time.Second, MaxDelay: 30 * time.Second}
	throttled := &Error{Status: 429, Message: "slow down", Retryable: true}
	for _, tc := range []struct {
		name   string
		errs   []error
		calls  int
		failed bool
		waits  []time.Duration // upper bounds of each wait
	}{
		{"success", nil, 1, false, nil},
		{"429 then ok", []error{throttled}, 2, false, []time.Duration{time.Second}},
		{"5xx thrice then ok", []error{&Error{Status: 503, Retryable: true}, &Error{Status: 500, Retryable: true}, &Error{Status: 502, Retryable: true}}, 4, false, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"retries spent", []error{throttled, throttled, throttled, throttled}, 4, true, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"400 never retried", []error{&Error{Status: 400}}, 1, true, nil},
		{"401 never retried", []error{&Error{Status: 401}}, 1, true, nil},
		{"a foreign error is not retried", []error{errors.New("boom")}, 1, true, nil},
		{"Retry-After is honoured, capped", []error{&Error{Status: 429, Retryable: true, RetryAfter: time.Hour}}, 2, false, []time.Duration{30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flaky{errs: tc.errs}
			var waits []time.Duration
			m := retrying{m: f, p: p, sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			_, err := m.Call(context.Background(), Request{})
			if f.calls != tc.calls || (err != nil) != tc.failed || len(waits) != len(tc.waits) {
				t.Fatalf("calls %d err %v waits %v", f.calls, err, waits)
			}
			for i, w := range waits {
				if w > tc.waits[i] || w < tc.waits[i]/2 && tc.name != "Retry-After is honoured, capped" {
					t.Errorf("wait %d = %s, want in [%s, %s]", i, w, tc.waits[i]/2, tc.waits[i])
				}
			}
		})
	}
	for status, want := range map[int]bool{400: false, 401: false, 403: false, 404: false, 409: false, 429: true, 500: true, 503: true} {
		if RetryableStatus(status) != want {
			t.Errorf("RetryableStatus(%d) = %v", status, !want)
		}
	}
}

func TestRetryStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &flaky{errs: []error{&Error{Status: 503, Retryable: true}}}
	_, err := WithRetry(f, DefaultRetryPolicy).Call(ctx, Request{})
	var me *Error
	if !errors.As(err, &me) || f.calls != 1 {
		t.Fatalf("%v after %d calls", err, f.calls)
	}
}
