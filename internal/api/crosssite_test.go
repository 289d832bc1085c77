package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// send calls the API over loopback HTTP with the given headers ("Host" sets the Host header).
func send(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMutationsTakeOnlyJSON: a web page can send a form or text/plain body to any address
// without asking (no CORS preflight); a body of any type but application/json is 415 on every
// call that changes something, and changes nothing. A call without a body has no type.
func TestMutationsTakeOnlyJSON(t *testing.T) {
	fc := &fakeCollector{}
	srv := httptest.NewServer(New(Options{Collector: fc}))
	defer srv.Close()
	calls := []struct{ method, path, body string }{
		{"POST", "/v1/steps/end", `{"step": 12}`},
		{"POST", "/v1/phases/start", `{"phase": "rollout"}`},
		{"POST", "/v1/phases/end", `{"phase": "rollout"}`},
		{"PUT", "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`},
		{"POST", "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`},
		{"DELETE", "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`},
	}
	for _, c := range calls {
		for _, ct := range []string{"text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
			"multipart/form-data; boundary=x", "application/jsonx", "", "not a type"} {
			h := map[string]string{}
			if ct != "" {
				h["Content-Type"] = ct
			}
			code, body := send(t, c.method, srv.URL+c.path, c.body, h)
			if code != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") {
				t.Errorf("%s %s with Content-Type %q: %d %s, want 415", c.method, c.path, ct, code, body)
			}
		}
	}
	if fc.ended || fc.phase != "" || len(fc.targets) != 0 {
		t.Fatalf("a refused call changed the run: ended %v, phase %q, targets %v", fc.ended, fc.phase, fc.targets)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		fc.ended = false
		if code, body := send(t, "POST", srv.URL+"/v1/steps/end", `{"step": -1}`, map[string]string{"Content-Type": ct}); code != http.StatusBadRequest || !strings.Contains(body, "from 0 to") {
			t.Errorf("Content-Type %q: %d %s, want the handler's 400", ct, code, body)
		}
	}
	// No body, no type: the handler answers (here that the body is missing).
	if code, body := send(t, "POST", srv.URL+"/v1/steps/end", "", nil); code != http.StatusBadRequest || !strings.Contains(body, "empty request body") {
		t.Errorf("a POST without a body: %d %s, want the handler's 400", code, body)
	}
	// Reads take no body and need no type.
	if code, body := send(t, "GET", srv.URL+"/v1/live", "", nil); code != http.StatusOK {
		t.Errorf("GET /v1/live: %d %s", code, body)
	}
}

// TestForeignOriginRefused: a request a web page of another origin makes carries its Origin; it
// is 403 whatever it asks, with or without a token. The API's own pages (the report) and
// programs, which send no Origin or the API's own, are answered.
func TestForeignOriginRefused(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "run data") })
	for _, token := range []string{"", "s3cret"} {
		fc := &fakeCollector{}
		srv := httptest.NewServer(New(Options{Collector: fc, Token: token, Metrics: page, Report: page}))
		defer srv.Close()
		h := func(origin string) map[string]string {
			m := map[string]string{"Content-Type": "application/json"}
			if origin != "" {
				m["Origin"] = origin
			}
			if token != "" {
				m["Authorization"] = "Bearer " + token
			}
			return m
		}
		for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1", "https://" + strings.TrimPrefix(srv.URL, "http://") + ".evil.example",
			"http://localhost:1", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
			for _, c := range []struct{ method, path, body string }{
				{"POST", "/v1/steps/end", `{"step": 12}`},
				{"POST", "/v1/targets", `{"targets": ["http://127.0.0.1:1/metrics"]}`},
				{"GET", "/v1/live", ""},
				{"GET", "/", ""},
				{"GET", "/metrics", ""},
			} {
				code, body := send(t, c.method, srv.URL+c.path, c.body, h(origin))
				if code != http.StatusForbidden || strings.Contains(body, "run data") {
					t.Errorf("token %q, Origin %q, %s %s: %d %s, want 403", token, origin, c.method, c.path, code, body)
				}
			}
		}
		if fc.ended || len(fc.targets) != 0 {
			t.Fatalf("a foreign origin changed the run: ended %v, targets %v", fc.ended, fc.targets)
		}
		for _, origin := range []string{"", srv.URL, strings.ToUpper(srv.URL)} {
			if code, body := send(t, "POST", srv.URL+"/v1/steps/end", `{"step": 12}`, h(origin)); code != http.StatusOK {
				t.Errorf("token %q, Origin %q: %d %s, want 200", token, origin, code, body)
			}
			fc.ended, fc.last = false, 0
		}
	}
}

// TestForeignHostRefused: without a token, a request must name the API as a loopback address or
// localhost with its port. A web page whose DNS name was made to point at 127.0.0.1 (DNS
// rebinding) sends its own name, and is 421; with a token the token guards, whatever the name.
func TestForeignHostRefused(t *testing.T) {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "run data") })
	srv := httptest.NewServer(New(Options{Collector: &fakeCollector{}, Metrics: page, Report: page}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port,
		"127.0.0.1:1", "localhost:1", "localhost", "10.0.0.1:" + port, "[fe80::1]:" + port, "0.0.0.0:" + port, "[::]:" + port, ":" + port} {
		for _, path := range []string{"/v1/live", "/v1/targets", "/", "/metrics", "/healthz"} {
			code, body := send(t, "GET", srv.URL+path, "", map[string]string{"Host": host})
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "run data") {
				t.Errorf("Host %q, GET %s: %d %s, want 421", host, path, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "127.1.2.3:" + port, "[::1]:" + port} {
		if code, body := send(t, "GET", srv.URL+"/v1/live", "", map[string]string{"Host": host}); code != http.StatusOK {
			t.Errorf("Host %q: %d %s, want 200", host, code, body)
		}
	}

	// With a token, any name: the API may sit behind a proxy or on a node's address.
	tok := httptest.NewServer(New(Options{Collector: &fakeCollector{}, Token: "s3cret"}))
	defer tok.Close()
	if code, body := send(t, "GET", tok.URL+"/v1/live", "", map[string]string{"Host": "vllmstat.example", "Authorization": "Bearer s3cret"}); code != http.StatusOK {
		t.Errorf("with a token, Host vllmstat.example: %d %s, want 200", code, body)
	}
	if code, _ := send(t, "GET", tok.URL+"/v1/live", "", map[string]string{"Host": "vllmstat.example"}); code != http.StatusUnauthorized {
		t.Errorf("with a token, no token sent: %d, want 401", code)
	}

	// An API opened to the network without a token (allow_insecure_listen) answers any name.
	open := httptest.NewServer(New(Options{Collector: &fakeCollector{}, AnyHost: true}))
	defer open.Close()
	if code, body := send(t, "GET", open.URL+"/v1/live", "", map[string]string{"Host": "gpu-node-1:9400"}); code != http.StatusOK {
		t.Errorf("AnyHost, Host gpu-node-1:9400: %d %s, want 200", code, body)
	}
}
