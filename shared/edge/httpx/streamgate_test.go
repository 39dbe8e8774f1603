package httpx

import (
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestStreamGate: streams are capped per principal and in all; a stream
// that leaves frees its place (once, however often leave is called), and
// a principal with no open stream takes no memory.
func TestStreamGate(t *testing.T) {
	g := NewStreamGate(2, 3)
	a1, ok1 := g.Enter("a")
	_, ok2 := g.Enter("a")
	if _, ok := g.Enter("a"); !ok1 || !ok2 || ok {
		t.Fatalf("per-principal cap: %v %v %v", ok1, ok2, ok)
	}
	b1, ok := g.Enter("b")
	if !ok {
		t.Fatal("b refused under the total cap")
	}
	if _, ok := g.Enter("c"); ok {
		t.Fatal("the total cap let a fourth stream in")
	}
	a1()
	a1() // twice: counted once
	if total, ofA := g.Open("a"); total != 2 || ofA != 1 {
		t.Fatalf("after a leave: total %d, a %d", total, ofA)
	}
	c1, ok := g.Enter("c")
	if !ok {
		t.Fatal("a freed place was not given")
	}
	b1()
	c1()
	if len(g.per) != 1 {
		t.Fatalf("closed principals kept: %v", g.per)
	}
	rec := httptest.NewRecorder()
	g.RefuseTooManyStreams(rec, httptest.NewRequest("GET", "/", nil))
	var body struct {
		Error struct{ Code, Message string }
	}
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code != CodeTooManyStreams {
		t.Fatalf("refusal %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

// TestStreamGateConcurrent: under concurrent enters and leaves the caps
// hold and every place comes back.
func TestStreamGateConcurrent(t *testing.T) {
	g := NewStreamGate(3, 5)
	var mu sync.Mutex
	maxSeen := 0
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			p := string(rune('a' + i%4))
			leave, ok := g.Enter(p)
			if !ok {
				return
			}
			total, of := g.Open(p)
			mu.Lock()
			if total > maxSeen {
				maxSeen = total
			}
			if of > 3 {
				t.Errorf("%s has %d streams", p, of)
			}
			mu.Unlock()
			leave()
		})
	}
	wg.Wait()
	if total, _ := g.Open("a"); total != 0 || maxSeen > 5 || len(g.per) != 0 {
		t.Fatalf("total %d after all left, most at once %d, map %v", total, maxSeen, g.per)
	}
}
