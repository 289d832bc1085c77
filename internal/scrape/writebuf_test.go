package scrape

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/vllmstat/vllmstat/internal/target"
)

// TestRestrictedRequestFitsWriteBuffer: a restricted scrape's request, its query asking for
// every name vllmstat reads in any one namespace spelling (a page has one) and with a long bearer
// token, fits in the fast client's write buffer. fasthttp writes a request that fits straight into
// the pooled writer; one that does not is written through a copy its header keeps, and every
// pooled request then holds that copy of the query (see fastWriteBuffer).
func TestRestrictedRequestFitsWriteBuffer(t *testing.T) {
	token := strings.Repeat("t", 2<<10) // a JWT is a few hundred bytes to a kilobyte or two
	auth := &target.Auth{Authorization: &target.Authorization{Type: "Bearer", Credentials: target.NewSecret(token)}}
	for i, ns := range queryNamespaces {
		names := newRestriction()
		names.mask = nsMask(1 << i)
		r, err := newRequest("http://engine-17.cluster.internal:8000/metrics?job=rollout", auth, CompressionGzip, names)
		if err != nil {
			t.Fatal(err)
		}
		req := fasthttp.AcquireRequest()
		req.Header.SetHost(r.parsed.Host)
		req.SetRequestURI(r.requestURI(true))
		if err := r.setHeaders(&req.Header, true); err != nil {
			t.Fatal(err)
		}
		n := len(req.Header.Header())
		fasthttp.ReleaseRequest(req)
		t.Logf("%s: a restricted request of %d bytes, %d of query", ns, n, len(r.query))
		if n > fastWriteBuffer {
			t.Errorf("%s: a restricted request of %d bytes does not fit in the fast client's %d-byte write buffer", ns, n, fastWriteBuffer)
		}
	}
}
