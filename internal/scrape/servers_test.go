package scrape

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

// TestServerVersionsThroughRouter: the servers a router's page names are each asked at their
// own address, under the rules: one the check refuses is not asked and says so once, one whose
// rule gives no credentials gets none (the router's own stay on the router), one that redirects
// fails its reading, and a worker_addr that is no base URL is refused.
func TestServerVersionsThroughRouter(t *testing.T) {
	var gotAuth []string
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		if r.URL.Path != "/model_info" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"weight_version": "7"}`)
	}))
	defer ok.Close()
	redirect := httptest.NewServer(http.RedirectHandler(ok.URL+"/model_info", http.StatusFound))
	defer redirect.Close()
	const refused = "http://169.254.169.254:80"
	body := ""
	for _, a := range []string{ok.URL, redirect.URL, refused, "http://u:secret@h:1", "h:1"} {
		body += fmt.Sprintf("sglang_num_running_reqs{engine_type=\"unified\",model_name=\"m\",worker_addr=%q} 1\n", a)
	}
	pg, err := page.ParsePage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	rules := &ServerRules{
		Check: func(u string) error {
			if u == refused {
				return errors.New("a link-local address")
			}
			return nil
		},
		Auth: func(string) target.Auth { return target.Auth{} },
	}
	opt := Options{Timeout: 5 * time.Second, Servers: rules}.withDefaults()
	routerAuth := target.Auth{Authorization: &target.Authorization{Type: "Bearer", Credentials: target.NewSecret("router-token")}}
	s := newScraper(context.Background(), target.Target{URL: "http://router:1/engine_metrics", Auth: routerAuth}, &opt)
	addrs := routerAddrs(pg)
	if len(addrs) != 5 {
		t.Fatalf("addrs %q, want the page's five", addrs)
	}
	read := func() map[string]ServerVersion {
		m := map[string]ServerVersion{}
		for _, r := range s.readServerVersions(pg, addrs) {
			m[r.Addr] = r
		}
		return m
	}
	first := read()
	if r := first[ok.URL]; r.Err != nil || !r.Reports || r.Version != 7 {
		t.Errorf("the server: %+v, want version 7", r)
	}
	if r := first[redirect.URL]; r.Err == nil || !strings.Contains(r.Err.Error(), "302") {
		t.Errorf("the redirecting server: %+v, want a failed reading", r)
	}
	for _, a := range []string{refused, "http://u:secret@h:1", "h:1"} {
		if r := first[a]; r.Err == nil {
			t.Errorf("%s: %+v, want refused", a, r)
		} else if strings.Contains(r.Err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", a, r.Err)
		}
	}
	for _, a := range gotAuth {
		if a != "" {
			t.Errorf("a server got credentials %q: the router's stay on the router", a)
		}
	}
	second := read()
	if _, told := second[refused]; told {
		t.Error("a refused server is reported at every reading, want once")
	}
	if r := second[ok.URL]; r.Version != 7 {
		t.Errorf("second reading of the server: %+v", r)
	}
}
