package httptool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzBuildRequest: whatever the arguments, the request goes to the tool's
// host, under the tool's path prefix, with the method it declares — an
// argument can never change where the call goes.
func FuzzBuildRequest(f *testing.F) {
	for _, s := range []string{"monday", "../../admin", "a/b?c=d#e", "@evil.example", "%2e%2e/", "..", ".", "\x00", "http://evil.example/"} {
		f.Add(s, "x")
	}
	t := tool("https://menu.example.com/api", "GET", "/menu/{day}/items", false)
	f.Fuzz(func(tt *testing.T, day, other string) {
		args, _ := json.Marshal(map[string]any{"day": day, "q": other})
		req, err := buildRequest(context.Background(), t, args)
		if err != nil {
			if day == "" || day == "." || day == ".." {
				return // refused: missing, or a dot segment
			}
			tt.Fatalf("buildRequest(%q): %v", day, err)
		}
		if req.URL.Scheme != "https" || req.URL.Host != "menu.example.com" || req.Method != "GET" {
			tt.Fatalf("day %q: request to %s %s://%s", day, req.Method, req.URL.Scheme, req.URL.Host)
		}
		if !strings.HasPrefix(req.URL.EscapedPath(), "/api/menu/") || !strings.HasSuffix(req.URL.EscapedPath(), "/items") {
			tt.Fatalf("day %q: path %s escapes the tool's path", day, req.URL.EscapedPath())
		}
		segs := strings.Split(req.URL.EscapedPath(), "/")
		if len(segs) != 5 || segs[3] == "." || segs[3] == ".." {
			tt.Fatalf("day %q: path %s has extra or dot segments", day, req.URL.EscapedPath())
		}
	})
}
