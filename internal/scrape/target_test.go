package scrape

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		raw, url string
		user, pw string // basic auth taken from the URL, if any
		err      string
	}{
		{raw: "h:8000", url: "http://h:8000/metrics"},
		{raw: " http://h:8000 ", url: "http://h:8000/metrics"},
		{raw: "HTTP://h:8000/m", url: "http://h:8000/m"},
		{raw: "HttpS://h/x?a=1", url: "https://h/x?a=1"},
		{raw: "http://usr:p%40ss@h:8000/metrics", url: "http://h:8000/metrics", user: "usr", pw: "p@ss"},
		{raw: "http://:tok@h", url: "http://h/metrics", pw: "tok"},
		{raw: "usr@h:1", url: "http://h:1/metrics", user: "usr"},
		{raw: "usr:hunter2@h:1", err: "want a URL"},
		{raw: "ftp://h/metrics", err: `scheme "ftp"`},
		{raw: "http:///metrics", err: "no host"},
		{raw: "not a target", err: "want a URL"},
		{raw: "http://usr:hunter2@h:port/", err: "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := ParseTarget(tt.raw)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.url {
				t.Errorf("URL %q, want %q", got.URL, tt.url)
			}
			if tt.user == "" && tt.pw == "" {
				if !got.Auth.IsZero() {
					t.Errorf("credentials %v from a URL without user info", got.Auth)
				}
				return
			}
			if b := got.Auth.Basic; b == nil || b.Username.Reveal() != tt.user || b.Password.Reveal() != tt.pw {
				t.Errorf("basic auth %+v, want %q/%q", b, tt.user, tt.pw)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"http://u:pw@h:1/metrics":  "http://<secret>@h:1/metrics",
		"u:pw@h:1":                 "<secret>@h:1",
		"http://u:p/w@h:x/metrics": "http://<secret>@h:x/metrics",
		"http://h:1/metrics":       "http://h:1/metrics",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestSecretsNeverPrint prints, encodes and logs targets and secrets every way Go offers: the
// user name and password must never come out.
func TestSecretsNeverPrint(t *testing.T) {
	tg, err := ParseTarget("http://usr-x7:pw-x7@h:8000/metrics")
	if err != nil {
		t.Fatal(err)
	}
	az := Target{URL: "http://h:9/metrics", Auth: Auth{Authorization: &Authorization{Type: "Bearer", Credentials: NewSecret("tok-x7")}}}
	hidden := struct {
		s Secret // unexported: fmt cannot call its methods, and must still not see the value
		a Auth
	}{NewSecret("pw-x7"), tg.Auth}
	var out bytes.Buffer
	raw := Target{URL: "http://usr-x7:pw-x7@h:8000/metrics"} // not parsed yet
	for _, v := range []any{raw, tg, &tg, az, tg.Auth, *tg.Auth.Basic, tg.Auth.Basic, hidden, &hidden, NewSecret("pw-x7")} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
		slog.New(h).Info("x", "target", tg, "auth", tg.Auth, "basic", tg.Auth.Basic, "secret", NewSecret("pw-x7"), "az", az)
	}
	for _, s := range []string{"usr-x7", "pw-x7", "tok-x7", fmt.Sprintf("%x", "pw-x7")} {
		if strings.Contains(out.String(), s) {
			t.Errorf("%q printed:\n%s", s, out.String())
		}
	}
	if !strings.Contains(out.String(), "<secret>") || !strings.Contains(out.String(), "http://h:8000/metrics") {
		t.Errorf("what was printed lacks the URL or <secret>:\n%s", out.String())
	}
}

// authServer answers the page when the request carries the wanted Authorization header, 401
// otherwise, and remembers the headers it got.
func authServer(t *testing.T, want func() string) (*httptest.Server, *[]string) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != want() {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(runningPage))
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestFetchSendsCredentials(t *testing.T) {
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		dir := t.TempDir()
		tokFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokFile, []byte("tok-1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		opt := Options{Timeout: 5 * time.Second}

		basic, _ := authServer(t, func() string { return "Basic " + "dXNyOnB3IHdpdGggc3BhY2U=" }) // usr:pw with space
		tg, err := ParseTarget(strings.Replace(basic.URL, "http://", "http://usr:pw%20with%20space@", 1))
		if err != nil {
			t.Fatal(err)
		}
		if r := fetch(context.Background(), tg, opt); r.Err() != nil {
			t.Fatalf("basic auth from the URL: %v", r.Err())
		}
		if r := fetch(context.Background(), Target{URL: tg.URL}, opt); r.Reason() != "http_status" {
			t.Fatalf("without credentials: reason %q, want http_status (401)", r.Reason())
		}

		token := "tok-1"
		bearer, seen := authServer(t, func() string { return "Bearer " + token })
		tb := Target{URL: bearer.URL, Auth: Auth{Authorization: &Authorization{CredentialsFile: tokFile}}}
		if r := fetch(context.Background(), tb, opt); r.Err() != nil {
			t.Fatalf("bearer token from a file: %v", r.Err())
		}
		// The file is read on every scrape: a rotated token is used from the next one.
		token = "tok-2"
		if err := os.WriteFile(tokFile, []byte("tok-2"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := fetch(context.Background(), tb, opt); r.Err() != nil {
			t.Fatalf("rotated token: %v (server saw %q)", r.Err(), *seen)
		}
		os.Remove(tokFile)
		r := fetch(context.Background(), tb, opt)
		if r.Reason() != "credentials" || !strings.Contains(r.Err().Error(), "authorization.credentials_file") {
			t.Fatalf("missing credentials file: reason %q, err %v", r.Reason(), r.Err())
		}
		if len(*seen) != 2 {
			t.Errorf("the server got %d requests, want 2: a scrape without its credentials file must not go out", len(*seen))
		}
	})
}

// TestRedirectKeepsCredentialsOnHost checks that credentials follow a redirect on the same host
// and never one to another host.
func TestRedirectKeepsCredentialsOnHost(t *testing.T) {
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		var otherGot []string
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			otherGot = append(otherGot, r.Header.Get("Authorization"))
			w.Write([]byte(runningPage))
		}))
		defer other.Close()
		// The same listener under another host name: localhost instead of 127.0.0.1.
		otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/metrics"
		var sameGot []string
		mux := http.NewServeMux()
		mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, otherURL, http.StatusFound) })
		mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/metrics", http.StatusFound) })
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			sameGot = append(sameGot, r.Header.Get("Authorization"))
			w.Write([]byte(runningPage))
		})
		srv := httptest.NewServer(mux)
		defer srv.Close()
		opt := Options{Timeout: 5 * time.Second}
		for _, path := range []string{"/away", "/here"} {
			tg, err := ParseTarget(strings.Replace(srv.URL, "http://", "http://usr:pw-x7@", 1) + path)
			if err != nil {
				t.Fatal(err)
			}
			if r := fetch(context.Background(), tg, opt); r.Err() != nil {
				t.Fatalf("%s: %v", path, r.Err())
			}
		}
		if len(otherGot) != 1 || otherGot[0] != "" {
			t.Errorf("the other host got Authorization %q, want one request without it", otherGot)
		}
		if len(sameGot) != 1 || !strings.HasPrefix(sameGot[0], "Basic ") {
			t.Errorf("the same host got Authorization %q after a redirect, want basic auth", sameGot)
		}
	})
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := ReadSecretFile(write("ok", "\n  tok-x7 \r\n")); err != nil || s != "tok-x7" {
		t.Errorf("%q %v", s, err)
	}
	for name, content := range map[string]string{"empty": " \n", "big": strings.Repeat("tok-x7", 20000)} {
		if _, err := ReadSecretFile(write(name, content)); err == nil || strings.Contains(err.Error(), "tok-x7") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadSecretFile("/dev/zero"); err == nil {
		t.Error("/dev/zero read as a credential")
	}
}
