package main

import (
	"fmt"
	"time"

	"github.com/agentauth/agentauth/shared/local/filequeue"
	"github.com/agentauth/agentauth/shared/oauth"
)

// serveSweepEvery is how often agentauth serve sweeps the OAuth sessions
// (cmd/agentauth serve's cleanupEvery).
const serveSweepEvery = time.Minute

// levelOff is when the files the server keeps for a while by design stop
// growing under a steady load, and why: a finished OAuth session goes at
// its expiry (a session lives oauth.DefaultSessionTTL) plus the retention,
// found by the next sweep; a queue tombstone goes past the dedup window,
// found by the next pass of the queue's sweep (every quarter of the
// window, at most hourly). 0 settings are the server's defaults.
func levelOff(sessionRetention, dedupWindow time.Duration) (time.Duration, string) {
	if sessionRetention == 0 {
		sessionRetention = oauth.SessionRetention
	}
	if dedupWindow == 0 {
		dedupWindow = filequeue.DedupWindow
	}
	sessions := oauth.DefaultSessionTTL + sessionRetention + serveSweepEvery
	tombs := dedupWindow + min(time.Hour, dedupWindow/4)
	why := fmt.Sprintf("sessions after %s (%s lifetime + %s retention + a %s sweep), queue tombstones after %s (%s window + its sweep period)",
		short(sessions), short(oauth.DefaultSessionTTL), short(sessionRetention), short(serveSweepEvery), short(tombs), short(dedupWindow))
	return max(sessions, tombs), why
}

// short writes a duration without its zero parts: 16m, 1h15m, 24h11m.
func short(d time.Duration) string {
	s := d.Round(time.Second).String()
	for _, z := range []struct{ from, to string }{{"m0s", "m"}, {"h0m", "h"}} {
		if len(s) > len(z.from) && s[len(s)-len(z.from):] == z.from {
			s = s[:len(s)-len(z.from)] + z.to
		}
	}
	return s
}
