package ssetest

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	frames, err := Parse(strings.NewReader("id: 0\nevent: turn.started\ndata: {\"a\":1}\n\n: keep-alive\n\nid: 1\r\nevent: x\r\ndata: y\r\n\r\n"))
	if err != nil || len(frames) != 3 || frames[0] != (Frame{ID: "0", Event: "turn.started", Data: `{"a":1}`}) ||
		frames[1].Comment != "keep-alive" || frames[2] != (Frame{ID: "1", Event: "x", Data: "y"}) {
		t.Fatalf("%v %+v", err, frames)
	}
	for _, bad := range []string{"id: 0\nevent: x", "what is this\n\n"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
