// Package ssetest reads Server-Sent Events the way a client does, for
// the tests of the streams (shared/edge/httpx, turnsapi, toolsapi, the
// deployed-stack tests): one definition of the wire format's reading.
//
// Only tests import it.
package ssetest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Frame is one block of an event stream: an event (ID, Event, Data) or a
// comment.
type Frame struct{ ID, Event, Data, Comment string }

// maxLines bounds what one Read takes: a test's frames are a few lines.
const maxLines = 10000

// Read reads the next frame: io.EOF at the stream's clean end, an error
// for a line that is not an event stream line or a stream that ends
// inside a frame.
func Read(br *bufio.Reader) (Frame, error) {
	var f Frame
	for range maxLines {
		line, err := br.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && f == (Frame{}) && line == "" {
				return f, io.EOF
			}
			if errors.Is(err, io.EOF) {
				return f, fmt.Errorf("the stream ends inside a frame: %+v %q", f, line)
			}
			return f, err
		}
		switch line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"); {
		case line == "":
			if f != (Frame{}) {
				return f, nil
			}
		case strings.HasPrefix(line, ": "):
			f.Comment = strings.TrimPrefix(line, ": ")
		case strings.HasPrefix(line, "id: "):
			f.ID = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			f.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			f.Data += strings.TrimPrefix(line, "data: ")
		default:
			return f, fmt.Errorf("not an event stream line: %q", line)
		}
	}
	return f, fmt.Errorf("no frame in %d lines", maxLines)
}

// Parse reads every frame of r.
func Parse(r io.Reader) ([]Frame, error) {
	br := bufio.NewReader(r)
	var out []Frame
	for {
		f, err := Read(br)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}
