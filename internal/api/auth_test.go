package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// call calls the API over loopback HTTP with the given Authorization header ("" for none).
func call(t *testing.T, method, url, authz, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTokenGuardsRunData serves the API on loopback with a token: every endpoint that serves
// run data needs it, /healthz never does, and /metrics only unless it is public.
func TestTokenGuardsRunData(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "run data") })
	for _, public := range []bool{false, true} {
		srv := httptest.NewServer(New(Options{Collector: &fakeCollector{}, Token: "s3cret", MetricsPublic: public, Metrics: page, Report: page}))
		defer srv.Close()
		paths := []string{"/", "/v1/live", "/v1/targets", "/v1/steps", "/v1/nothing", "/metrics"}
		for _, p := range paths {
			open := p == "/metrics" && public
			for _, authz := range []string{"", "Bearer wrong", "Bearer s3cre", "Bearer s3crett", "Basic s3cret", "s3cret", "Bearer"} {
				code, body := call(t, "GET", srv.URL+p, authz, "")
				if open {
					if code != 200 {
						t.Errorf("public %s with %q: %d", p, authz, code)
					}
					continue
				}
				if code != 401 || strings.Contains(body, "run data") {
					t.Errorf("%s with %q: %d %q, want 401", p, authz, code, body)
				}
			}
			// The scheme in any case (RFC 9110), and more than one space before the token.
			for _, authz := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer   s3cret"} {
				code, _ := call(t, "GET", srv.URL+p, authz, "")
				if want := 200; p == "/v1/nothing" {
					want = 404
					if code != want {
						t.Errorf("%s with %q: %d, want %d", p, authz, code, want)
					}
				} else if code != want {
					t.Errorf("%s with %q: %d, want %d", p, authz, code, want)
				}
			}
		}
		if code, _ := call(t, "GET", srv.URL+"/healthz", "", ""); code != 200 {
			t.Errorf("healthz without a token: %d", code)
		}
		if code, _ := call(t, "POST", srv.URL+"/v1/steps/end", "", `{"step": 1}`); code != 401 {
			t.Errorf("end step without a token: %d", code)
		}
	}
	// Without a token everything is open (the API then listens on loopback only).
	srv := httptest.NewServer(New(Options{Collector: &fakeCollector{}, Metrics: page, Report: page}))
	defer srv.Close()
	for _, p := range []string{"/", "/metrics", "/v1/live"} {
		if code, _ := call(t, "GET", srv.URL+p, "", ""); code != 200 {
			t.Errorf("%s without a token configured: %d", p, code)
		}
	}
}

// TestStepNumbers checks the bounds of step numbers over HTTP: 0 to 2^53.
func TestStepNumbers(t *testing.T) {
	srv := httptest.NewServer(New(Options{Collector: &fakeCollector{}}))
	defer srv.Close()
	tests := []struct {
		body string
		code int
		msg  string
	}{
		{`{"step": -1}`, 400, "from 0 to 9007199254740992 (2^53), got -1"},
		{`{"step": 0}`, 200, ""},
		{`{"step": 9223372036854775807}`, 400, "got 9223372036854775807"},
		{`{"step": 9007199254740993}`, 400, "got 9007199254740993"},
		{`{"step": 99999999999999999999999}`, 400, "got 99999999999999999999999"},
		{`{"step": 1.5}`, 400, "whole number"},
		{`{"step": 1e3}`, 400, "whole number"},
		{`{"step": "5"}`, 400, "whole number"},
		{`{"step": null}`, 400, `missing "step"`},
		{`{"step": 9007199254740991}`, 200, ""},
		{`{"step": 9007199254740990}`, 409, "the last step ended or being ended is 9007199254740991"},
		{`{"step": 9007199254740992}`, 200, ""},
	}
	for _, tt := range tests {
		code, body := call(t, "POST", srv.URL+"/v1/steps/end", "", tt.body)
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("%s: answer %q is not JSON", tt.body, body)
		}
		msg, _ := out["error"].(string)
		if code != tt.code || !strings.Contains(msg, tt.msg) {
			t.Errorf("%s: %d %q, want %d with %q", tt.body, code, msg, tt.code, tt.msg)
		}
	}
}

// TestSetTargetsCredentials puts targets with user info and upper-case schemes: the URLs come
// back without user info, which becomes the targets' credentials, and no answer shows it.
func TestSetTargetsCredentials(t *testing.T) {
	fc := &fakeCollector{}
	srv := httptest.NewServer(New(Options{Collector: fc}))
	defer srv.Close()
	code, body := call(t, "PUT", srv.URL+"/v1/targets", "",
		`{"targets": ["HTTP://usr-x7:pw-x7@a:1/metrics", "HttpS://b:2", "http://a:1/metrics?x=1", "http://usr-x7:pw-x7@a:1/metrics"]}`)
	if code != 200 || strings.Contains(body, "x7") {
		t.Fatalf("put: %d %s", code, body)
	}
	var out struct{ Targets []string }
	json.Unmarshal([]byte(body), &out)
	want := []string{"http://a:1/metrics", "https://b:2/metrics", "http://a:1/metrics?x=1"}
	if strings.Join(out.Targets, " ") != strings.Join(want, " ") || strings.Join(fc.targets, " ") != strings.Join(want, " ") {
		t.Fatalf("targets %v, collector got %v, want %v", out.Targets, fc.targets, want)
	}
	if b := fc.auth["http://a:1/metrics"].Basic; b == nil || b.Username.Reveal() != "usr-x7" || b.Password.Reveal() != "pw-x7" {
		t.Fatalf("credentials of a: %+v", b)
	}
	if !fc.auth["https://b:2/metrics"].IsZero() {
		t.Fatal("b got credentials it was not given")
	}
	if code, body := call(t, "GET", srv.URL+"/v1/targets", "", ""); code != 200 || strings.Contains(body, "x7") {
		t.Fatalf("get: %d %s", code, body)
	}
	// The same URL with other credentials, and URLs that are wrong, with user info: 400, and
	// the message shows none of it.
	for _, bad := range []string{
		`{"targets": ["http://usr-x7:pw-x7@a:1/metrics", "http://a:1/metrics"]}`,
		`{"targets": ["http://usr-x7:pw-x7@a:1/metrics", "http://usr-x7:other-x7@a:1/metrics"]}`,
		`{"targets": ["ftp://usr-x7:pw-x7@a:1/metrics"]}`,
		`{"targets": ["http://usr-x7:pw-x7@a:port/metrics"]}`,
		`{"targets": ["usr-x7:pw-x7@a:1"]}`,
	} {
		code, body := call(t, "PUT", srv.URL+"/v1/targets", "", bad)
		if code != 400 || strings.Contains(body, "x7") {
			t.Errorf("%s: %d %s, want 400 without the user info", bad, code, body)
		}
	}
	if _, body := call(t, "PUT", srv.URL+"/v1/targets", "", `{"targets": ["http://a:1/metrics", "http://u:p@a:1/metrics"]}`); !strings.Contains(body, "with other credentials") {
		t.Errorf("same URL, other credentials: %s", body)
	}
}
