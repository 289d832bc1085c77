package simtest

import (
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// Started calls start and, at the end of t, closes what it started and checks that closing it
// ended every goroutine it began.
func Started[F io.Closer](t testing.TB, start func() (F, error)) F {
	t.Helper()
	before := runtime.NumGoroutine()
	f, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
		testkit.Poll(2*time.Second, func() bool { return runtime.NumGoroutine() <= before })
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
	return f
}

// Get fetches url with client and returns the answer's body.
func Get(t testing.TB, client *http.Client, url string) (string, *http.Response, error) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp, err
}

// MustGet fetches url and returns the body, failing t unless the answer is 200.
func MustGet(t testing.TB, url string) string {
	t.Helper()
	body, resp, err := Get(t, http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return body
}

// Post sends body to url and returns the answer's status and body.
func Post(t testing.TB, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	code, b := answer(t, resp, err)
	return code, string(b)
}

// Fetch gets url and returns the answer's status and body.
func Fetch(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	return answer(t, resp, err)
}

// answer reads the status and the body of a request's answer, failing t if there is none.
func answer(t testing.TB, resp *http.Response, err error) (int, []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Words is n copies of word separated by spaces.
func Words(n int, word string) string { return strings.TrimSpace(strings.Repeat(word+" ", n)) }
