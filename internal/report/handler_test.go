package report

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
)

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	empty := httptest.NewServer(Handler(dir, fc))
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
		{"GET", "/", 200, `"generated":"2026-01-01T00:00:00Z"`},
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
	// Each request stamps the page with the handler's clock.
	fc.Advance(time.Hour)
	res, err = http.Get(empty.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"generated":"2026-01-01T01:00:00Z"`) {
		t.Error("the page an hour later does not say it was generated an hour later")
	}
}

// TestWriteStampsClock checks that Write dates the page by Options.Clock.
func TestWriteStampsClock(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir, 2, 2, 10, false)
	var b strings.Builder
	at := time.Date(2030, 6, 1, 12, 0, 0, 0, time.FixedZone("X", 3600))
	if err := Write(&b, dir, Options{Clock: clock.NewFake(at)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"generated":"2030-06-01T11:00:00Z"`) {
		t.Error("the page does not carry the clock's time, in UTC")
	}
}
