// Package storetest is the conformance suite for agentauth's storage ports:
// every domain.Store, domain.TenantStore and domain.EventQueue
// implementation (files on a laptop, DynamoDB and SQS in AWS) runs the same
// tests, so backends stay swappable.
//
// The suite asserts only through the domain interfaces and the domain
// sentinel errors (errors.Is), never through a backend's files, tables or
// error texts. It uses made-up sealed values and must never need a real
// key, secret or network service of its own.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// NewGrantID returns a fresh grant id: the one domain.GrantID derives for
// a random subject, so tests never share one by accident.
func NewGrantID() string {
	return domain.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "storetest"}, domain.NewSessionID())
}

// NewSessionID returns a fresh session id (domain.NewSessionID).
func NewSessionID() string { return domain.NewSessionID() }

// fakeSealed is a stand-in sealed value: stores treat values as opaque, and
// distinct content per field catches a backend that mixes fields up.
func fakeSealed(field string) domain.EncryptedValue {
	return domain.EncryptedValue{
		Algorithm:  domain.AlgorithmAES256GCM,
		IV:         "aXYt" + field,
		Ciphertext: "Y3Qt" + field + "+/==",
		Tag:        "dGFn" + field,
		KeyID:      "k-0123456789ab",
	}
}

var (
	t0 = time.Date(2026, 1, 31, 9, 10, 1, 123456789, time.UTC)
	t1 = t0.Add(50 * time.Minute)
)

// SampleGrant is a grant with every field set, for round-trip tests.
func SampleGrant(id string) domain.Grant {
	refresh := fakeSealed("refreshToken")
	expires := t1
	return domain.Grant{
		ID:              id,
		Provider:        "slack",
		OAuthAppRef:     domain.ObjectRef{Kind: "OAuthApp", Name: "slack-bot"},
		Subject:         "slack:team:T111",
		Flow:            domain.FlowAuthorizationCode,
		ScopesGranted:   []string{"chat:write", "channels:read"},
		ScopesRequested: []string{"chat:write", "channels:read", "users:read"},
		Token: domain.GrantToken{
			TokenType:    "bearer",
			AccessToken:  fakeSealed("accessToken"),
			RefreshToken: &refresh,
			ExpiresAt:    &expires,
			IssuedAt:     t0,
		},
		CreatedAt: t0,
		UpdatedAt: t0.Add(time.Second),
		ProviderData: map[string]any{
			"team":   map[string]any{"id": "T111", "name": "Acme"},
			"bot":    true,
			"scopes": []any{"a", "b"},
			"n":      float64(3),
		},
	}
}

// SampleSession is a pending session with every field set.
func SampleSession(id string) domain.Session {
	return domain.Session{
		ID:              id,
		Provider:        "slack",
		OAuthAppRef:     domain.ObjectRef{Kind: "OAuthApp", Name: "slack-bot"},
		SubjectMode:     domain.SubjectModeUser,
		Subject:         "slack:user:T111:U234567",
		RequestedScopes: []string{"chat:write"},
		Flow: domain.SessionFlow{
			Type: domain.FlowAuthorizationCode,
			PKCE: &domain.PKCE{
				Method:        "S256",
				CodeVerifier:  fakeSealed("codeVerifier"),
				CodeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
			},
			State: fakeSealed("state"),
			DeviceCode: &domain.DeviceCodeInfo{
				DeviceCode:              fakeSealed("deviceCode"),
				VerificationURI:         "https://example.com/device",
				VerificationURIComplete: "https://example.com/device?code=WDJB-MJHT",
				UserCode:                "WDJB-MJHT",
				Interval:                5,
				ExpiresAt:               t1,
			},
		},
		AuthorizationURL: "https://slack.com/oauth/v2/authorize?state=abc",
		Status:           domain.SessionPending,
		CreatedAt:        t0,
		ExpiresAt:        t0.Add(10 * time.Minute),
		Resume: domain.ResumeInfo{
			SwarmRef:    domain.ObjectRef{Kind: "Swarm", Name: "default"},
			InstanceKey: "1700000000.000100",
			AgentName:   "planner",
			Origin: map[string]any{
				"connector": "slack-main",
				"channel":   "C123",
				"thread":    map[string]any{"ts": "1700000000.000100", "replies": []any{"r1"}},
			},
			Auth: domain.TurnAuth{
				Actor:    &domain.Actor{Type: "user", ID: "slack:U234567", Display: "Ann"},
				Subjects: &domain.Subjects{Global: "slack:team:T111", User: "slack:user:T111:U234567"},
				Claims:   map[string]any{"sub": "ann", "tenant_id": "acme", "realm_access": map[string]any{"roles": []any{"staff"}}},
			},
		},
		EventPending: true,
	}
}

// RunStore runs the domain.Store conformance suite. newStore must return a
// fresh, empty store for each call.
func RunStore(t *testing.T, newStore func(t *testing.T) domain.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s domain.Store)
	}{
		{"NotFound", testNotFound},
		{"InvalidIDs", testInvalidIDs},
		{"GrantRoundTrip", testGrantRoundTrip},
		{"GrantCopies", testGrantCopies},
		{"PutGrantCAS", testPutGrantCAS},
		{"PutGrantRace", testPutGrantRace},
		{"SessionRoundTrip", testSessionRoundTrip},
		{"CreateSessionConflict", testCreateSessionConflict},
		{"UpdateSessionCAS", testUpdateSessionCAS},
		{"CompleteSession", testCompleteSession},
		{"CompleteSessionUpsertsGrant", testCompleteSessionUpsert},
		{"CompleteSessionNotPending", testCompleteSessionNotPending},
		{"CompleteSessionRace", testCompleteSessionRace},
		{"ClaimThenComplete", testClaimThenComplete},
		{"Leases", testLeases},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseRace", testLeaseRace},
		{"List", testList},
		{"DeleteSession", testDeleteSession},
		{"ReuseKey", testReuseKey},
		{"ReuseKeyLeavesPending", testReuseKeyLeavesPending},
		{"ReuseKeyRace", testReuseKeyRace},
		{"PendingForInstance", testPendingForInstance},
		{"PendingPerTarget", testPendingPerTarget},
		{"SweepSets", testSweepSets},
		{"SweepSetsFollowWrites", testSweepSetsFollowWrites},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

func wantErr(t *testing.T, err error, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: want an error wrapping %q, got %v", what, target, err)
	}
}

func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func testNotFound(t *testing.T, s domain.Store) {
	ctx := context.Background()
	_, err := s.GetGrant(ctx, NewGrantID())
	wantErr(t, err, domain.ErrNotFound, "GetGrant of an absent grant")
	_, err = s.GetSession(ctx, NewSessionID())
	wantErr(t, err, domain.ErrNotFound, "GetSession of an absent session")
	wantErr(t, s.DeleteSession(ctx, NewSessionID()), domain.ErrNotFound, "DeleteSession of an absent session")
	_, _, err = s.CompleteSession(ctx, NewSessionID(), t1, SampleGrant(NewGrantID()))
	wantErr(t, err, domain.ErrNotFound, "CompleteSession of an absent session")
	sess := SampleSession(NewSessionID())
	_, err = s.UpdateSession(ctx, sess)
	if !errors.Is(err, domain.ErrNotFound) && !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("UpdateSession of an absent session: want ErrNotFound or ErrConflict, got %v", err)
	}
	_, err = s.PutGrant(ctx, SampleGrant(NewGrantID()), 3)
	wantErr(t, err, domain.ErrConflict, "PutGrant expecting version 3 of an absent grant")
}

func testInvalidIDs(t *testing.T, s domain.Store) {
	ctx := context.Background()
	bad := []string{
		"", "../x", "grant-../../etc", "as-../../../etc/passwd", "/etc/passwd", "/tmp/grant-0123456789abcdef",
		"grant-0123456789ABCDEF", "grant-0123456789abcde", "grant-0123456789abcdef0", "grant-0123456789abcdeg",
		"as-0123456789abcdef0123456789abcdeF", "as-0123456789abcdef", "grant-0123456789abcdef\x00",
		"grant-0123456789abcdef/../x", "as-0123456789abcdef0123456789abcdef/",
	}
	for _, id := range bad {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			_, err := s.GetGrant(ctx, id)
			wantErr(t, err, domain.ErrInvalidID, "GetGrant")
			g := SampleGrant(id)
			_, err = s.PutGrant(ctx, g, 0)
			wantErr(t, err, domain.ErrInvalidID, "PutGrant")
			_, err = s.GetSession(ctx, id)
			wantErr(t, err, domain.ErrInvalidID, "GetSession")
			wantErr(t, s.CreateSession(ctx, SampleSession(id)), domain.ErrInvalidID, "CreateSession")
			_, err = s.UpdateSession(ctx, SampleSession(id))
			wantErr(t, err, domain.ErrInvalidID, "UpdateSession")
			wantErr(t, s.DeleteSession(ctx, id), domain.ErrInvalidID, "DeleteSession")
			_, _, err = s.CompleteSession(ctx, id, t1, SampleGrant(NewGrantID()))
			wantErr(t, err, domain.ErrInvalidID, "CompleteSession with a bad session id")
		})
	}
	// A good session with a bad grant id must not complete.
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	_, _, err := s.CompleteSession(ctx, sess.ID, t1, SampleGrant("grant-../../x"))
	wantErr(t, err, domain.ErrInvalidID, "CompleteSession with a bad grant id")
	got, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	if got.Status != domain.SessionPending {
		t.Fatalf("session status %s after a refused completion", got.Status)
	}
}

// normGrant makes grants comparable with reflect.DeepEqual: times in UTC,
// no monotonic reading.
func normGrant(g domain.Grant) domain.Grant {
	utc := func(p *time.Time) *time.Time {
		if p == nil {
			return nil
		}
		v := p.UTC()
		return &v
	}
	g.CreatedAt, g.UpdatedAt, g.Token.IssuedAt = g.CreatedAt.UTC(), g.UpdatedAt.UTC(), g.Token.IssuedAt.UTC()
	g.Token.ExpiresAt, g.RevokedAt = utc(g.Token.ExpiresAt), utc(g.RevokedAt)
	if g.Token.RefreshToken != nil {
		v := *g.Token.RefreshToken
		g.Token.RefreshToken = &v
	}
	return g
}

func normSession(s domain.Session) domain.Session {
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	if s.CompletedAt != nil {
		v := s.CompletedAt.UTC()
		s.CompletedAt = &v
	}
	if s.Flow.DeviceCode != nil {
		d := *s.Flow.DeviceCode
		d.ExpiresAt = d.ExpiresAt.UTC()
		s.Flow.DeviceCode = &d
	}
	return s
}

func sameGrant(t *testing.T, got, want domain.Grant, what string) {
	t.Helper()
	if g, w := normGrant(got), normGrant(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: grant differs\n got: %+v\nwant: %+v", what, g, w)
	}
}

func sameSession(t *testing.T, got, want domain.Session, what string) {
	t.Helper()
	if g, w := normSession(got), normSession(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: session differs\n got: %+v\nwant: %+v", what, g, w)
	}
}

func testGrantRoundTrip(t *testing.T, s domain.Store) {
	ctx := context.Background()
	g := SampleGrant(NewGrantID())
	revoked := t1.Add(time.Hour)
	g.RevokedAt, g.Revoked, g.RevokedReason = &revoked, true, domain.RevokedRefreshRejected
	g.Version = 42 // ignored: the store sets the version
	put, err := s.PutGrant(ctx, g, 0)
	noErr(t, err, "PutGrant")
	if put.Version != 1 {
		t.Fatalf("PutGrant returned version %d, want 1", put.Version)
	}
	want := g
	want.Version = 1
	sameGrant(t, put, want, "PutGrant result")
	got, err := s.GetGrant(ctx, g.ID)
	noErr(t, err, "GetGrant")
	sameGrant(t, got, want, "GetGrant")

	// A minimal grant: optional fields absent stay absent.
	min := domain.Grant{ID: NewGrantID(), Provider: "p", OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "x"},
		Subject: "s", Flow: domain.FlowDeviceCode, ScopesGranted: []string{"a"},
		Token:     domain.GrantToken{TokenType: "bearer", AccessToken: fakeSealed("accessToken"), IssuedAt: t0},
		CreatedAt: t0, UpdatedAt: t0}
	_, err = s.PutGrant(ctx, min, 0)
	noErr(t, err, "PutGrant minimal")
	got, err = s.GetGrant(ctx, min.ID)
	noErr(t, err, "GetGrant minimal")
	min.Version = 1
	sameGrant(t, got, min, "minimal grant")
}

func testGrantCopies(t *testing.T, s domain.Store) {
	ctx := context.Background()
	g := SampleGrant(NewGrantID())
	put, err := s.PutGrant(ctx, g, 0)
	noErr(t, err, "PutGrant")
	// Changing what the caller passed or got back must not change the store.
	g.ScopesGranted[0] = "mutated"
	g.ProviderData["team"].(map[string]any)["id"] = "mutated"
	put.ScopesGranted[0] = "mutated"
	put.Token.RefreshToken.Ciphertext = "mutated"
	for range 2 {
		got, err := s.GetGrant(ctx, g.ID)
		noErr(t, err, "GetGrant")
		want := SampleGrant(g.ID)
		want.Version = 1
		sameGrant(t, got, want, "GetGrant after the caller mutated its copies")
		got.ScopesGranted[1] = "mutated"
		got.ProviderData["team"].(map[string]any)["name"] = "mutated"
		got.ProviderData["scopes"].([]any)[0] = "mutated"
		*got.Token.ExpiresAt = t0
		got.Token.RefreshToken.KeyID = "mutated"
	}
}

func testPutGrantCAS(t *testing.T, s domain.Store) {
	ctx := context.Background()
	g := SampleGrant(NewGrantID())
	v1, err := s.PutGrant(ctx, g, 0)
	noErr(t, err, "create")
	_, err = s.PutGrant(ctx, g, 0)
	wantErr(t, err, domain.ErrConflict, "second create")

	g.Subject = "second"
	v2, err := s.PutGrant(ctx, g, v1.Version)
	noErr(t, err, "update at version 1")
	if v2.Version != 2 || v2.Subject != "second" {
		t.Fatalf("update returned version %d subject %q", v2.Version, v2.Subject)
	}
	g.Subject = "stale"
	_, err = s.PutGrant(ctx, g, v1.Version)
	wantErr(t, err, domain.ErrConflict, "stale update")
	_, err = s.PutGrant(ctx, g, 7)
	wantErr(t, err, domain.ErrConflict, "update from the future")
	got, err := s.GetGrant(ctx, g.ID)
	noErr(t, err, "GetGrant")
	if got.Version != 2 || got.Subject != "second" {
		t.Fatalf("after the failed writes: version %d subject %q", got.Version, got.Subject)
	}
	g.Subject = "third"
	v3, err := s.PutGrant(ctx, g, 2)
	noErr(t, err, "update at version 2")
	if v3.Version != 3 {
		t.Fatalf("version %d, want 3", v3.Version)
	}
}

// race runs f n times concurrently, all released at once, and returns the
// errors.
func race(n int, f func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one racer succeeded and every other lost
// with ErrConflict.
func oneWinner(t *testing.T, errs []error, what string) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("%s: racers %d and %d both won", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, domain.ErrConflict):
			t.Fatalf("%s: racer %d: want ErrConflict, got %v", what, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: nobody won", what)
	}
	return winner
}

func testPutGrantRace(t *testing.T, s domain.Store) {
	ctx := context.Background()
	id := NewGrantID()
	errs := race(20, func(i int) error {
		g := SampleGrant(id)
		g.Subject = fmt.Sprint("racer-", i)
		_, err := s.PutGrant(ctx, g, 0)
		return err
	})
	w := oneWinner(t, errs, "PutGrant create race")
	got, err := s.GetGrant(ctx, id)
	noErr(t, err, "GetGrant")
	if got.Subject != fmt.Sprint("racer-", w) || got.Version != 1 {
		t.Fatalf("stored subject %q version %d, winner was %d", got.Subject, got.Version, w)
	}
	errs = race(20, func(i int) error {
		g := SampleGrant(id)
		g.Subject = fmt.Sprint("updater-", i)
		_, err := s.PutGrant(ctx, g, 1)
		return err
	})
	w = oneWinner(t, errs, "PutGrant update race")
	got, err = s.GetGrant(ctx, id)
	noErr(t, err, "GetGrant")
	if got.Subject != fmt.Sprint("updater-", w) || got.Version != 2 {
		t.Fatalf("stored subject %q version %d, winner was %d", got.Subject, got.Version, w)
	}
}

func testSessionRoundTrip(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	got, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	sameSession(t, got, sess, "GetSession")

	// Mutating the result must not change the store.
	got.Resume.Origin["thread"].(map[string]any)["ts"] = "mutated"
	got.Flow.PKCE.CodeChallenge = "mutated"
	got.Resume.Auth.Actor.ID = "mutated"
	got.Resume.Auth.Claims["realm_access"].(map[string]any)["roles"].([]any)[0] = "mutated"
	again, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	sameSession(t, again, sess, "GetSession after mutating a result")

	// A session without optional parts.
	min := domain.Session{ID: NewSessionID(), Provider: "p", OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "x"},
		SubjectMode: domain.SubjectModeGlobal, Subject: "s", RequestedScopes: []string{"a"},
		Flow:   domain.SessionFlow{Type: domain.FlowAuthorizationCode, State: fakeSealed("state")},
		Status: domain.SessionPending, CreatedAt: t0, ExpiresAt: t1,
		Resume: domain.ResumeInfo{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "i", AgentName: "a"}}
	noErr(t, s.CreateSession(ctx, min), "CreateSession minimal")
	got, err = s.GetSession(ctx, min.ID)
	noErr(t, err, "GetSession minimal")
	sameSession(t, got, min, "minimal session")
}

func testCreateSessionConflict(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	other := sess
	other.Subject = "someone else"
	wantErr(t, s.CreateSession(ctx, other), domain.ErrConflict, "second CreateSession")
	got, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	if got.Subject != sess.Subject {
		t.Fatal("a refused CreateSession overwrote the session")
	}
	id := NewSessionID()
	errs := race(20, func(int) error { return s.CreateSession(ctx, SampleSession(id)) })
	oneWinner(t, errs, "CreateSession race")
}

func testUpdateSessionCAS(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	got, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	base := got.Version

	got.Status, got.StatusReason = domain.SessionFailed, "access_denied"
	upd, err := s.UpdateSession(ctx, got)
	noErr(t, err, "UpdateSession")
	if upd.Version != base+1 || upd.Status != domain.SessionFailed {
		t.Fatalf("UpdateSession returned version %d status %s", upd.Version, upd.Status)
	}
	stale := got
	stale.StatusReason = "stale"
	_, err = s.UpdateSession(ctx, stale)
	wantErr(t, err, domain.ErrConflict, "stale UpdateSession")
	reread, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	sameSession(t, reread, upd, "session after a stale update")

	errs := race(20, func(i int) error {
		u := reread
		u.StatusReason = fmt.Sprint("racer-", i)
		_, err := s.UpdateSession(ctx, u)
		return err
	})
	w := oneWinner(t, errs, "UpdateSession race")
	final, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	if final.StatusReason != fmt.Sprint("racer-", w) || final.Version != base+2 {
		t.Fatalf("after the race: reason %q version %d", final.StatusReason, final.Version)
	}
}

func testCompleteSession(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	before, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	g := SampleGrant(NewGrantID())
	at := t0.Add(3 * time.Minute)

	done, grant, err := s.CompleteSession(ctx, sess.ID, at, g)
	noErr(t, err, "CompleteSession")
	want := before
	want.Status, want.CompletedAt, want.Version = domain.SessionCompleted, &at, before.Version+1
	sameSession(t, done, want, "CompleteSession session result")
	wantGrant := g
	wantGrant.Version = 1
	sameGrant(t, grant, wantGrant, "CompleteSession grant result")

	got, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	sameSession(t, got, want, "completed session")
	gg, err := s.GetGrant(ctx, g.ID)
	noErr(t, err, "GetGrant")
	sameGrant(t, gg, wantGrant, "grant written by CompleteSession")

	// Completes at most once; the grant is not written again.
	g2 := g
	g2.Subject = "second"
	_, _, err = s.CompleteSession(ctx, sess.ID, at, g2)
	wantErr(t, err, domain.ErrConflict, "second CompleteSession")
	gg, err = s.GetGrant(ctx, g.ID)
	noErr(t, err, "GetGrant")
	if gg.Version != 1 || gg.Subject != g.Subject {
		t.Fatalf("refused completion changed the grant: version %d subject %q", gg.Version, gg.Subject)
	}
}

func testCompleteSessionUpsert(t *testing.T, s domain.Store) {
	ctx := context.Background()
	g := SampleGrant(NewGrantID())
	old, err := s.PutGrant(ctx, g, 0)
	noErr(t, err, "PutGrant")
	old, err = s.PutGrant(ctx, g, old.Version)
	noErr(t, err, "PutGrant")
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	g.Subject = "re-authorized"
	g.Version = 0 // ignored: the store bumps past what it holds
	g.CreatedAt = t1.Add(time.Hour)
	_, grant, err := s.CompleteSession(ctx, sess.ID, t1, g)
	noErr(t, err, "CompleteSession over an existing grant")
	if grant.Version != old.Version+1 || grant.Subject != "re-authorized" {
		t.Fatalf("grant version %d subject %q, want version %d", grant.Version, grant.Subject, old.Version+1)
	}
	if !grant.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("CreatedAt %v, want the stored grant's %v", grant.CreatedAt, old.CreatedAt)
	}
	gg, err := s.GetGrant(ctx, g.ID)
	noErr(t, err, "GetGrant")
	sameGrant(t, gg, grant, "grant after upsert")
}

func testCompleteSessionNotPending(t *testing.T, s domain.Store) {
	ctx := context.Background()
	for _, st := range []domain.SessionStatus{domain.SessionFailed, domain.SessionExpired, domain.SessionCompleted} {
		t.Run(string(st), func(t *testing.T) {
			sess := SampleSession(NewSessionID())
			sess.Status = st
			noErr(t, s.CreateSession(ctx, sess), "CreateSession")
			g := SampleGrant(NewGrantID())
			_, _, err := s.CompleteSession(ctx, sess.ID, t1, g)
			wantErr(t, err, domain.ErrConflict, "CompleteSession of a "+string(st)+" session")
			_, err = s.GetGrant(ctx, g.ID)
			wantErr(t, err, domain.ErrNotFound, "grant after a refused completion")
		})
	}
}

func testCompleteSessionRace(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	gid := NewGrantID()
	errs := race(20, func(i int) error {
		g := SampleGrant(gid)
		g.Subject = fmt.Sprint("racer-", i)
		_, _, err := s.CompleteSession(ctx, sess.ID, t1, g)
		return err
	})
	w := oneWinner(t, errs, "CompleteSession race")
	g, err := s.GetGrant(ctx, gid)
	noErr(t, err, "GetGrant")
	if g.Version != 1 || g.Subject != fmt.Sprint("racer-", w) {
		t.Fatalf("grant version %d subject %q, winner %d: a loser wrote the grant", g.Version, g.Subject, w)
	}
	got, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	if got.Status != domain.SessionCompleted {
		t.Fatalf("status %s", got.Status)
	}
}

// testClaimThenComplete is the callback's path: copies of one callback
// race to claim the session (pending → exchanging, one versioned write);
// exactly one wins, and only it completes the session.
func testClaimThenComplete(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	read, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	errs := race(20, func(i int) error {
		c := read
		c.Status = domain.SessionExchanging
		_, err := s.UpdateSession(ctx, c)
		return err
	})
	oneWinner(t, errs, "claim race")
	claimed, err := s.GetSession(ctx, sess.ID)
	noErr(t, err, "GetSession")
	if claimed.Status != domain.SessionExchanging || claimed.Version != read.Version+1 {
		t.Fatalf("after the claim: status %s version %d", claimed.Status, claimed.Version)
	}
	// A copy that read before the claim cannot claim again.
	late := read
	late.Status = domain.SessionExchanging
	_, err = s.UpdateSession(ctx, late)
	wantErr(t, err, domain.ErrConflict, "claim with the pre-claim version")

	g := SampleGrant(NewGrantID())
	done, _, err := s.CompleteSession(ctx, sess.ID, t1, g)
	noErr(t, err, "CompleteSession of an exchanging session")
	if done.Status != domain.SessionCompleted {
		t.Fatalf("status %s", done.Status)
	}
	_, _, err = s.CompleteSession(ctx, sess.ID, t1, g)
	wantErr(t, err, domain.ErrConflict, "second CompleteSession")
}

func testLeases(t *testing.T, s domain.Store) {
	ctx := context.Background()
	key := "refresh/" + NewGrantID()
	noErr(t, s.AcquireLease(ctx, key, "a", time.Minute), "a acquires")
	wantErr(t, s.AcquireLease(ctx, key, "b", time.Minute), domain.ErrConflict, "b acquires a held lease")
	noErr(t, s.AcquireLease(ctx, key, "a", time.Minute), "a re-acquires (extends)")
	noErr(t, s.AcquireLease(ctx, "refresh/"+NewGrantID(), "b", time.Minute), "b acquires another key")

	noErr(t, s.ReleaseLease(ctx, key, "b"), "b releases a lease it does not hold")
	wantErr(t, s.AcquireLease(ctx, key, "b", time.Minute), domain.ErrConflict, "lease after a non-owner release")
	noErr(t, s.ReleaseLease(ctx, key, "a"), "a releases")
	noErr(t, s.AcquireLease(ctx, key, "b", time.Minute), "b acquires after release")
	wantErr(t, s.AcquireLease(ctx, key, "a", time.Minute), domain.ErrConflict, "a acquires b's lease")
	noErr(t, s.ReleaseLease(ctx, key, "b"), "b releases")
	noErr(t, s.ReleaseLease(ctx, key, "b"), "b releases twice")
	noErr(t, s.ReleaseLease(ctx, "never/"+NewGrantID(), "x"), "release of an unknown key")
	// Odd keys are fine: backends must not build paths or expressions from them raw.
	odd := "../../etc/passwd\x00 ☃ " + key
	noErr(t, s.AcquireLease(ctx, odd, "a", time.Minute), "odd key")
	wantErr(t, s.AcquireLease(ctx, odd, "b", time.Minute), domain.ErrConflict, "odd key held")
}

func testLeaseExpiry(t *testing.T, s domain.Store) {
	ctx := context.Background()
	key := "refresh/" + NewGrantID()
	noErr(t, s.AcquireLease(ctx, key, "a", 200*time.Millisecond), "a acquires briefly")
	wantErr(t, s.AcquireLease(ctx, key, "b", time.Minute), domain.ErrConflict, "b before expiry")
	time.Sleep(400 * time.Millisecond)
	noErr(t, s.AcquireLease(ctx, key, "b", time.Minute), "b after expiry")
	wantErr(t, s.AcquireLease(ctx, key, "a", time.Minute), domain.ErrConflict, "a after b took over")
	noErr(t, s.ReleaseLease(ctx, key, "a"), "a releases after losing the lease")
	wantErr(t, s.AcquireLease(ctx, key, "c", time.Minute), domain.ErrConflict, "the old owner's release must not drop b's lease")
}

func testLeaseRace(t *testing.T, s domain.Store) {
	ctx := context.Background()
	key := "refresh/" + NewGrantID()
	errs := race(20, func(i int) error { return s.AcquireLease(ctx, key, fmt.Sprint("owner-", i), time.Minute) })
	oneWinner(t, errs, "AcquireLease race")
}

func testList(t *testing.T, s domain.Store) {
	ctx := context.Background()
	grants, errs, err := s.ListGrants(ctx)
	noErr(t, err, "ListGrants of an empty store")
	if len(grants) != 0 || len(errs) != 0 {
		t.Fatalf("empty store lists %d grants, %d errors", len(grants), len(errs))
	}
	sessions, errs, err := s.ListSessions(ctx)
	noErr(t, err, "ListSessions of an empty store")
	if len(sessions) != 0 || len(errs) != 0 {
		t.Fatalf("empty store lists %d sessions, %d errors", len(sessions), len(errs))
	}

	wantG := map[string]domain.Grant{}
	for range 3 {
		g, err := s.PutGrant(ctx, SampleGrant(NewGrantID()), 0)
		noErr(t, err, "PutGrant")
		wantG[g.ID] = g
	}
	wantS := map[string]domain.Session{}
	for range 2 {
		sess := SampleSession(NewSessionID())
		noErr(t, s.CreateSession(ctx, sess), "CreateSession")
		wantS[sess.ID] = sess
	}
	grants, errs, err = s.ListGrants(ctx)
	sameListed(t, "ListGrants", grants, errs, err, wantG, func(g domain.Grant) string { return g.ID }, sameGrant)
	sessions, errs, err = s.ListSessions(ctx)
	sameListed(t, "ListSessions", sessions, errs, err, wantS, func(s domain.Session) string { return s.ID }, sameSession)
}

// sameListed checks that a List call returned exactly want, by id.
func sameListed[T any](t *testing.T, what string, got []T, errs []error, err error, want map[string]T, id func(T) string, same func(*testing.T, T, T, string)) {
	t.Helper()
	noErr(t, err, what)
	if len(errs) != 0 || len(got) != len(want) {
		t.Fatalf("%s: %d records, errors %v", what, len(got), errs)
	}
	for _, v := range got {
		w, ok := want[id(v)]
		if !ok {
			t.Fatalf("%s returned unknown id %s", what, id(v))
		}
		same(t, v, w, what+" record")
	}
}

func testDeleteSession(t *testing.T, s domain.Store) {
	ctx := context.Background()
	sess := SampleSession(NewSessionID())
	keep := SampleSession(NewSessionID())
	noErr(t, s.CreateSession(ctx, sess), "CreateSession")
	noErr(t, s.CreateSession(ctx, keep), "CreateSession")
	noErr(t, s.DeleteSession(ctx, sess.ID), "DeleteSession")
	_, err := s.GetSession(ctx, sess.ID)
	wantErr(t, err, domain.ErrNotFound, "GetSession after delete")
	wantErr(t, s.DeleteSession(ctx, sess.ID), domain.ErrNotFound, "second DeleteSession")
	_, _, err = s.CompleteSession(ctx, sess.ID, t1, SampleGrant(NewGrantID()))
	wantErr(t, err, domain.ErrNotFound, "CompleteSession after delete")
	if _, err := s.GetSession(ctx, keep.ID); err != nil {
		t.Fatalf("DeleteSession removed another session: %v", err)
	}
	list, _, err := s.ListSessions(ctx)
	noErr(t, err, "ListSessions")
	if len(list) != 1 || list[0].ID != keep.ID {
		t.Fatalf("ListSessions after delete: %d sessions", len(list))
	}
	// The id can be used again.
	noErr(t, s.CreateSession(ctx, sess), "CreateSession after delete")
	errs := race(10, func(int) error { return s.DeleteSession(ctx, sess.ID) })
	deleted := 0
	for _, err := range errs {
		if err == nil {
			deleted++
		} else if !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("concurrent DeleteSession: %v", err)
		}
	}
	if deleted != 1 {
		t.Fatalf("%d concurrent deletes succeeded, want 1", deleted)
	}
}
