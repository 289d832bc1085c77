package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestChunkedBodyNeedsJSONType: a body sent chunked has no length (ContentLength -1), but it is
// a body all the same: without a Content-Type it is 415, as one with a length is, and changes
// nothing; sent as JSON it reaches the handler.
func TestChunkedBodyNeedsJSONType(t *testing.T) {
	fc := &fakeCollector{}
	h := New(Options{Collector: fc})
	var length int64
	var te []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		length, te = r.ContentLength, r.TransferEncoding
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	post := func(ct string) (int, string) {
		t.Helper()
		// A reader of no known length: the client sends it chunked.
		req, err := http.NewRequest("POST", srv.URL+"/v1/steps/end", io.MultiReader(strings.NewReader(`{"step": 12}`)))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if length != -1 || len(te) != 1 || te[0] != "chunked" {
			t.Fatalf("the API got a body of length %d, Transfer-Encoding %v; want chunked", length, te)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(""); code != http.StatusUnsupportedMediaType || !strings.Contains(body, "application/json") {
		t.Errorf("chunked body without a type: %d %s, want 415", code, body)
	}
	if fc.ended {
		t.Fatal("a refused call ended a step")
	}
	if code, body := post("application/json"); code != http.StatusOK || !fc.ended {
		t.Errorf("chunked JSON body: %d %s, ended %v; want the step ended", code, body, fc.ended)
	}
}
