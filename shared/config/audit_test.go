package config

import (
	"testing"
	"time"
)

// TestAuditRetention: 168h by default, 0 turns the stored stream off,
// anything else is a Go duration from a minute to a year.
func TestAuditRetention(t *testing.T) {
	for _, p := range []Profile{Local, Lambda} {
		c, _ := FromEnv(env(map[string]string{PublicURL: "https://auth.example"}), p)
		if c.AuditRetention != 168*time.Hour {
			t.Fatalf("profile %d default: %s", p, c.AuditRetention)
		}
	}
	for v, want := range map[string]time.Duration{"0": 0, " 0 ": 0, "90m": 90 * time.Minute, "720h": 720 * time.Hour} {
		c, err := FromEnv(env(map[string]string{AuditRetention: v}), Local)
		if err != nil || c.AuditRetention != want {
			t.Fatalf("%q: %s, %v", v, c.AuditRetention, err)
		}
	}
	for _, bad := range []string{"0s", "5", "59s", "-5m", "8761h", "7d", "off"} {
		_, err := FromEnv(env(map[string]string{AuditRetention: bad}), Local)
		if want := AuditRetention + ": want a Go duration from 1m to 8760h, like 5m or 24h"; err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", bad, err, want)
		}
	}
}
