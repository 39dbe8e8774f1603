package awsconfig

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

type writerToBody struct{ *bytes.Reader }

func (writerToBody) Close() error { return nil }

func TestPlainBodyHidesWriteTo(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	var seen io.ReadCloser
	c := plainBodyClient{base: doFunc(func(r *http.Request) (*http.Response, error) {
		seen = r.Body
		return http.DefaultClient.Do(r)
	})}
	req, _ := http.NewRequest("POST", srv.URL, writerToBody{bytes.NewReader([]byte("payload"))})
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, ok := seen.(io.WriterTo); ok {
		t.Fatal("the body sent still has WriteTo")
	}
	if string(got) != "payload" {
		t.Fatalf("server got %q", got)
	}
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }
