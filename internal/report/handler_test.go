package report

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	empty := httptest.NewServer(Handler(dir))
	defer empty.Close()
	res, err := http.Get(empty.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "No step has closed yet") || res.Header.Get("Refresh") == "" {
		t.Errorf("before any step: %d %s", res.StatusCode, body)
	}

	writeRun(t, dir, 3, 2, 10, true)
	for _, tt := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"GET", "/", 200, `"refresh":15`},
		{"GET", "/", 200, `"timelineFiles":3`}, // again, from the cached timelines
		{"GET", "/index.html", 200, `id="data"`},
		{"GET", "/other", 404, ""},
		{"POST", "/", 405, ""},
	} {
		req, _ := http.NewRequest(tt.method, empty.URL+tt.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s %s: %d, body without %q", tt.method, tt.path, res.StatusCode, tt.want)
		}
		if tt.code == 200 && res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("content type %q", res.Header.Get("Content-Type"))
		}
	}
}
