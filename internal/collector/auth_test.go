package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/vllmstat/vllmstat/internal/target"
)

// TestWhoGetsTopLevelCredentials scrapes a server that records the Authorization header of each
// request by path: a target that discovery finds without credentials gets DefaultAuth; one that
// the API adds (AddTargets, SetTargets) gets what APIAuth gives, nothing without it, and keeps
// the credentials it has when it is a target already.
func TestWhoGetsTopLevelCredentials(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintln(w, `vllm:generation_tokens_total{engine="0",model_name="m"} 1`)
	}))
	defer srv.Close()
	const fleet = "Bearer fleet-x7"
	dflt := target.Auth{Authorization: &target.Authorization{Type: "Bearer", Credentials: target.NewSecret("fleet-x7")}}
	allowed := func(url string) target.Auth {
		if strings.HasSuffix(url, "/allowed") {
			return dflt
		}
		return target.Auth{}
	}
	for _, tt := range []struct {
		name    string
		apiAuth func(string) target.Auth
		want    map[string]string // path -> the header of each of its requests
	}{
		{name: "no APIAuth", want: map[string]string{"/found": fleet, "/added": "", "/set": "", "/allowed": ""}},
		{name: "APIAuth", apiAuth: allowed, want: map[string]string{"/found": fleet, "/added": "", "/set": "", "/allowed": fleet}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			clear(got)
			mu.Unlock()
			c, _, stop := start(t, Options{DefaultAuth: dflt, APIAuth: tt.apiAuth, NoFinalStep: true})
			defer stop()
			ctx := context.Background()
			if err := c.SetSourceTargets(ctx, "file", targets(srv.URL+"/found")); err != nil {
				t.Fatal(err)
			}
			if err := c.AddTargets(ctx, targets(srv.URL+"/added", srv.URL+"/allowed")); err != nil {
				t.Fatal(err)
			}
			// The API lists the discovered target too: it keeps the credentials it has.
			if err := c.SetTargets(ctx, targets(srv.URL+"/set", srv.URL+"/found", srv.URL+"/allowed")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.EndStep(ctx, 1); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for path, want := range tt.want {
				if len(got[path]) == 0 {
					t.Errorf("%s: not scraped", path)
				}
				for i, h := range got[path] {
					if h != want {
						t.Errorf("%s: request %d had Authorization %q, want %q", path, i, h, want)
					}
				}
			}
		})
	}
}
