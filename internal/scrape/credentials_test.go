package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

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
		tg, err := target.Parse(strings.Replace(basic.URL, "http://", "http://usr:pw%20with%20space@", 1))
		if err != nil {
			t.Fatal(err)
		}
		if r := fetch(context.Background(), tg, opt); r.Err() != nil {
			t.Fatalf("basic auth from the URL: %v", r.Err())
		}
		if r := fetch(context.Background(), target.Target{URL: tg.URL}, opt); r.Reason() != "http_status" {
			t.Fatalf("without credentials: reason %q, want http_status (401)", r.Reason())
		}

		token := "tok-1"
		bearer, seen := authServer(t, func() string { return "Bearer " + token })
		tb := target.Target{URL: bearer.URL, Auth: target.Auth{Authorization: &target.Authorization{CredentialsFile: tokFile}}}
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
			tg, err := target.Parse(strings.Replace(srv.URL, "http://", "http://usr:pw-x7@", 1) + path)
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
