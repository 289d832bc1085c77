package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
)

// TestRunRefusesWebPages runs "vllmstat run" with its API on loopback and no token, and plays
// what a web page open in the user's browser can send it: a text/plain or form POST (which a
// page sends anywhere without asking), a JSON POST from a foreign origin, and a read through a
// DNS name of the attacker's that points at 127.0.0.1. None is answered, none ends a step or
// adds a target; the same calls from a program are answered.
func TestRunRefusesWebPages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 1\n")
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", srv.URL, "--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--out", t.TempDir()}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	u, _ := url.Parse(base)
	call := func(method, path, body string, header map[string]string) (int, string) {
		t.Helper()
		return apiCall(t, method, base+path, body, header)
	}
	for _, tt := range []struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		code         int
	}{
		{"text/plain step end", "POST", "/v1/steps/end", `{"step": 12}`, map[string]string{"Content-Type": "text/plain"}, 415},
		{"form step end (curl -d)", "POST", "/v1/steps/end", `{"step": 12}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"text/plain target", "POST", "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`, map[string]string{"Content-Type": "text/plain"}, 415},
		{"foreign page's step end", "POST", "/v1/steps/end", `{"step": 12}`, map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403},
		{"foreign page's JSON target", "POST", "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`,
			map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403},
		{"rebound name reads live", "GET", "/v1/live", "", map[string]string{"Host": "evil.example:" + u.Port()}, 421},
		{"rebound name reads the report", "GET", "/", "", map[string]string{"Host": "evil.example:" + u.Port()}, 421},
	} {
		if code, body := call(tt.method, tt.path, tt.body, tt.header); code != tt.code {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.code)
		}
	}
	if code, body := call("GET", "/v1/steps", "", nil); code != 200 || !strings.Contains(body, `"steps":[]`) {
		t.Errorf("steps after the refused calls: %d %s, want none", code, body)
	}
	code, body := call("GET", "/v1/targets", "", nil)
	var l struct{ Targets []string }
	if json.Unmarshal([]byte(body), &l); code != 200 || len(l.Targets) != 1 || l.Targets[0] != srv.URL+"/metrics" {
		t.Errorf("targets after the refused calls: %d %s, want the configured one alone", code, body)
	}
	// A program's calls: JSON, no Origin, the API's own address or localhost.
	if code, body := call("POST", "/v1/steps/end", `{"step": 12}`, map[string]string{"Content-Type": "application/json", "Host": "localhost:" + u.Port()}); code != 200 {
		t.Errorf("a program's step end: %d %s", code, body)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}
