package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/collector"
)

// Publish keeps the latest version as the collector does, with its error.
func (f *fakeCollector) Publish(_ context.Context, v int64, name string) (collector.PolicyVersion, error) {
	if f.published && v <= f.version {
		return collector.PolicyVersion{}, fmt.Errorf("policy version %d: %w (the last one published is %d)", v, collector.ErrPolicyOrder, f.version)
	}
	if name != "" && name == f.name {
		return collector.PolicyVersion{}, fmt.Errorf("policy version %d: %w (%d)", v, collector.ErrPolicyNameTaken, f.version)
	}
	f.version, f.published, f.name = v, true, name
	return collector.PolicyVersion{Version: v, Name: name, TS: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, nil
}

// TestPolicyEndpoint: POST /v1/policy takes a whole number from 0 to 2^53 that grows; one
// that does not is 409, naming the last; anything else is 400; other methods are 405; and it
// needs the token as the other calls.
func TestPolicyEndpoint(t *testing.T) {
	h := New(Options{Collector: &fakeCollector{}})
	for _, tt := range []struct {
		method, body string
		code         int
		check        func(t *testing.T, out map[string]any)
	}{
		{"POST", `{"version": 0}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["version"], 0.0); eq(t, o["ts"], "2026-01-01T00:00:00Z") }},
		{"POST", `{"version": 3}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["version"], 3.0) }},
		{"POST", `{"version": 3}`, 409, hasErr("the last one published is 3")},
		{"POST", `{"version": 2}`, 409, hasErr("must be greater")},
		{"POST", `{"version": 9007199254740992}`, 200, nil},
		{"POST", `{"version": 9007199254740993}`, 400, hasErr("from 0 to 9007199254740992")},
		{"POST", `{"version": -1}`, 400, hasErr("whole number")},
		{"POST", `{"version": 1.5}`, 400, hasErr("whole number")},
		{"POST", `{"version": "7"}`, 400, hasErr("whole number")},
		{"POST", `{}`, 400, hasErr(`missing "version"`)},
		{"POST", `{"version": 1, "step": 1}`, 400, hasErr("unknown field")},
		{"GET", ``, 405, hasErr("not allowed")},
	} {
		t.Run(tt.method+" "+tt.body, func(t *testing.T) {
			code, out := do(t, h, tt.method, "/v1/policy", tt.body, "")
			if code != tt.code {
				t.Fatalf("code %d, want %d: %v", code, tt.code, out)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
	h = New(Options{Collector: &fakeCollector{}, Token: "s3cret"})
	if code, _ := do(t, h, "POST", "/v1/policy", `{"version": 1}`, ""); code != 401 {
		t.Errorf("publish without token: %d, want 401", code)
	}
	if code, _ := do(t, h, "POST", "/v1/policy", `{"version": 1}`, "s3cret"); code != 200 {
		t.Errorf("publish with token: %d", code)
	}
}

// TestPolicyName: a publish may name the string the engines report for its version; the
// answer gives it back. A name that is no string, is empty, too long, not printable, or a
// number other than the version is 400 naming "name" and never echoing it; one that names
// another version already is 409.
func TestPolicyName(t *testing.T) {
	h := New(Options{Collector: &fakeCollector{}})
	long := strings.Repeat("n", 257)
	for _, tt := range []struct {
		body  string
		code  int
		check func(t *testing.T, out map[string]any)
	}{
		{`{"version": 0, "name": null}`, 200, func(t *testing.T, o map[string]any) {
			if _, ok := o["name"]; ok {
				t.Errorf("name in %v, want none", o)
			}
		}},
		{`{"version": 1, "name": "step-1"}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["version"], 1.0); eq(t, o["name"], "step-1") }},
		{`{"version": 2, "name": "step-1"}`, 409, hasErr("already names another version")},
		{`{"version": 2, "name": 2}`, 400, hasErr(`"name" must be a string`)},
		{`{"version": 2, "name": ""}`, 400, hasErr(`"name" must be 1 to 256 bytes of printable UTF-8: it is empty`)},
		{`{"version": 2, "name": "` + long + `"}`, 400, hasErr("longer than 256 bytes")},
		{`{"version": 2, "name": "step-2\u001b[31mred"}`, 400, hasErr("control or non-printing character")},
		{`{"version": 2, "name": "3"}`, 400, hasErr(`"name" is the number 3`)},
		{`{"version": 2, "name": "2"}`, 200, nil},
		{`{"version": 3, "name": "\u00e9tape-3"}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["name"], "\u00e9tape-3") }},
	} {
		t.Run(tt.body[:min(len(tt.body), 60)], func(t *testing.T) {
			code, out := do(t, h, "POST", "/v1/policy", tt.body, "")
			if code != tt.code {
				t.Fatalf("code %d, want %d: %v", code, tt.code, out)
			}
			if msg, _ := out["error"].(string); strings.Contains(msg, "nnnn") || strings.Contains(msg, "red") {
				t.Errorf("the error quotes the name: %s", msg)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

// TestPolicyGuarded: a publish goes through the checks of every call that changes the run: a
// body that is not JSON is 415, a web page's foreign Origin 403, and neither publishes.
func TestPolicyGuarded(t *testing.T) {
	fc := &fakeCollector{}
	srv := httptest.NewServer(New(Options{Collector: fc}))
	defer srv.Close()
	if code, body := send(t, "POST", srv.URL+"/v1/policy", `{"version": 1}`, map[string]string{"Content-Type": "text/plain"}); code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d %s, want 415", code, body)
	}
	if code, body := send(t, "POST", srv.URL+"/v1/policy", `{"version": 1}`,
		map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("foreign Origin: %d %s, want 403", code, body)
	}
	if fc.published {
		t.Fatal("a refused call published a version")
	}
	if code, body := send(t, "POST", srv.URL+"/v1/policy", `{"version": 1}`, map[string]string{"Content-Type": "application/json"}); code != http.StatusOK || !strings.Contains(body, `"version":1`) {
		t.Errorf("JSON: %d %s, want 200", code, body)
	}
}
