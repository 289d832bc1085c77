package scrape

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/vllmstat/vllmstat/internal/target"
)

// TestFetchEncodings checks how pages arrive: compressed or not as asked, a compressed page
// whatever was asked, a clear error for an encoding vllmstat does not read or a broken stream,
// and the size limit applied to the page as inflated, so that a small gzip bomb stops there.
func TestFetchEncodings(t *testing.T) {
	const maxBody = 64 << 10
	bomb := gzipped(make([]byte, 32<<20)) // 32 MiB of zeros in about 32 KB
	if len(bomb) >= maxBody {
		t.Fatalf("the bomb is %d bytes compressed: not a bomb", len(bomb))
	}
	// Random bytes do not compress: a page over the limit before inflating.
	big := make([]byte, 2*maxBody)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rnd.Uint32())
	}
	var lastAE atomic.Value // the Accept-Encoding of the last request
	mux := http.NewServeMux()
	serve := func(path, how string, page []byte) {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			ae := r.Header.Get("Accept-Encoding")
			lastAE.Store(ae)
			enc, body := how, page
			if how == "asked" {
				enc = ""
				if ae == "gzip" {
					enc, body = "gzip", gzipped(page)
				}
			}
			if enc != "" {
				w.Header().Set("Content-Encoding", enc)
			}
			w.Write(body)
		})
	}
	serve("/asked", "asked", []byte(runningPage))
	serve("/always-gzip", "gzip", gzipped([]byte(runningPage)))
	serve("/x-gzip", "x-gzip", gzipped([]byte(runningPage)))
	serve("/identity", "identity", []byte(runningPage))
	serve("/br", "br", []byte(runningPage))
	serve("/corrupt", "gzip", gzipped([]byte(runningPage))[:20])
	serve("/bomb", "gzip", bomb)
	serve("/big-compressed", "gzip", gzipped(big))
	serve("/limit-exact", "gzip", gzipped([]byte(runningPage+strings.Repeat("#", maxBody-len(runningPage)-1)+"\n")))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		path   string
		comp   Compression
		wantAE string
		reason string
		msg    string
	}{
		{path: "/asked", comp: CompressionGzip, wantAE: "gzip"},
		{path: "/asked", comp: CompressionNone, wantAE: "identity"},
		{path: "/always-gzip", comp: CompressionNone, wantAE: "identity"},
		{path: "/x-gzip", comp: CompressionGzip, wantAE: "gzip"},
		{path: "/identity", comp: CompressionGzip, wantAE: "gzip"},
		{path: "/limit-exact", comp: CompressionGzip, wantAE: "gzip"},
		{path: "/br", comp: CompressionGzip, reason: "other", msg: `unsupported Content-Encoding "br"`},
		{path: "/corrupt", comp: CompressionGzip, reason: "other", msg: "inflate gzip page"},
		{path: "/bomb", comp: CompressionGzip, reason: "body_too_large"},
		{path: "/big-compressed", comp: CompressionGzip, reason: "body_too_large"},
	}
	client := NewClient()
	viaBoth(t, func(t *testing.T, fetch fetcher) {
		for _, tt := range tests {
			t.Run(strings.TrimPrefix(tt.path, "/")+"-"+string(tt.comp), func(t *testing.T) {
				r := fetch(context.Background(), target.Target{URL: srv.URL + tt.path}, Options{Client: client, Timeout: 5 * time.Second, MaxBody: maxBody, KeepBody: true, Compression: tt.comp})
				if r.Reason() != tt.reason {
					t.Fatalf("reason %q (err %v), want %q", r.Reason(), r.Err(), tt.reason)
				}
				if ae := lastAE.Load(); tt.wantAE != "" && ae != tt.wantAE {
					t.Errorf("Accept-Encoding %q, want %q", ae, tt.wantAE)
				}
				if tt.msg != "" && !strings.Contains(r.Err().Error(), tt.msg) {
					t.Errorf("error %q, want it to say %q", r.Err(), tt.msg)
				}
				if r.BodyBytes > maxBody+1 {
					t.Errorf("%d bytes read, past the limit of %d", r.BodyBytes, maxBody)
				}
				if tt.reason == "" && (r.Page == nil || len(r.Page.Engines) != 1 || r.Page.Engines[0].Gauges[0] != 3 || !strings.HasPrefix(string(r.Body), runningPage)) {
					t.Fatalf("page %+v body %.80q", r.Page, r.Body)
				}
			})
		}
	})
}

// TestInflateReusesReaders checks that pooled gzip readers give every page its own bytes, one
// after another and with other pages in between, compressed at other levels.
func TestInflateReusesReaders(t *testing.T) {
	for i := range 50 {
		want := strings.Repeat(string(rune('a'+i%26)), 1000+i*37)
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, 1+i%9)
		w.Write([]byte(want))
		w.Close()
		var out bytes.Buffer
		if err := inflate(&z, 1<<20, &out); err != nil || out.String() != want {
			t.Fatalf("page %d: %v, %d bytes, want %d", i, err, out.Len(), len(want))
		}
	}
}

func TestParseCompression(t *testing.T) {
	for _, s := range []string{"gzip", "none"} {
		if c, err := ParseCompression(s); err != nil || string(c) != s {
			t.Errorf("%q: %q %v", s, c, err)
		}
	}
	for _, s := range []string{"", "GZIP", "br", "identity"} {
		if _, err := ParseCompression(s); err == nil || !strings.Contains(err.Error(), "want gzip or none") {
			t.Errorf("%q: %v, want an error saying what is allowed", s, err)
		}
	}
}
