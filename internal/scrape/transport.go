package scrape

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// transport sends one target's scrapes. A library client does the HTTP: framing, keeping
// connections alive, retrying a request whose kept connection the server had closed. The target's
// goroutine owns it; the target's context, given when it is made, ending fails a scrape in
// flight at once.
type transport interface {
	// get sends r, restricted or for the full page, before deadline and returns the page,
	// inflated: in buf, or in bytes the transport holds until release. A redirect the
	// transport does not follow is errRedirect.
	get(r *request, restrict bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error)
	// release says the page of the last get has been read.
	release()
	// newConnections sends every later request on a new connection, closed after its answer:
	// the target answered out of turn on a kept one, and an answer it sends nobody knows when
	// could be read as the answer to any request on a connection it keeps.
	newConnections()
	// close closes the transport's connections: the target's goroutine is done.
	close()
}

// newTransport returns the transport of r's scrapes: through the pool's fasthttp client
// (opt.fast, when the pool made its own client) when r is plain HTTP that no proxy stands in
// front of, as in nearly every fleet (see fastClient); else through opt.Client, net/http's.
func newTransport(ctx context.Context, r *request, opt *Options) transport {
	if opt.fast != nil && fastEligible(r) {
		return newFastTransport(ctx, opt.fast, strings.ToLower(fasthttp.AddMissingPort(r.parsed.Host, false)))
	}
	return newStdTransport(ctx, opt)
}

// fastEligible reports that r can go through a fast transport: plain HTTP, no user info in
// the URL, and no proxy from the environment.
func fastEligible(r *request) bool {
	if r.parsed.Scheme != "http" || r.parsed.User != nil {
		return false
	}
	p, err := http.ProxyFromEnvironment(&http.Request{URL: r.parsed})
	return err == nil && p == nil
}

// stdTransport sends a target's scrapes with net/http: targets over TLS, behind a proxy, or
// answering with redirects, which it follows by its rules (credentials stay on the target's
// host).
type stdTransport struct {
	client  *http.Client
	maxBody int64
	ctx     context.Context // the target's: a scrape in flight ends with it
	fresh   bool            // each request on a new connection: see newConnections
}

func newStdTransport(ctx context.Context, opt *Options) *stdTransport {
	return &stdTransport{client: opt.Client, maxBody: opt.MaxBody, ctx: ctx}
}

func (t *stdTransport) get(r *request, restrict bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error) {
	ctx, cancel := context.WithDeadline(t.ctx, deadline)
	defer cancel()
	u := r.parsed
	if restrict {
		u = r.restrictedURL()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "", nil)
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = u, u.Host
	req.Close = t.fresh
	if err := r.setHeaders(req.Header, restrict); err != nil {
		return nil, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, r.fetchError(quiet(err))
	}
	defer resp.Body.Close()
	resp.Body = quietBody{resp.Body}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // so that net/http may keep the connection
		return nil, &StatusError{Code: resp.StatusCode}
	}
	if restrict && isValuesAnswer(resp.Header.Get("Content-Type")) {
		var raw bytes.Buffer
		if err := readBody(resp, t.maxBody, &raw); err != nil {
			return nil, err
		}
		return r.values(raw.Bytes(), resp.Header.Get(layoutHeader), "", t.maxBody, buf)
	}
	if err := readBody(resp, t.maxBody, buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (t *stdTransport) release() {}

// newConnections sends every later request on a connection of its own: through a copy of the
// client's transport that keeps none (closing each after its answer is not enough: net/http
// would still send a request on an idle connection another target left).
func (t *stdTransport) newConnections() {
	t.fresh = true
	rt := t.client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if tr, ok := rt.(*http.Transport); ok {
		tr = tr.Clone()
		tr.DisableKeepAlives = true
		c := *t.client
		c.Transport = tr
		t.client = &c
	}
}

// close leaves the connection to net/http's pool of idle ones, which closes it in time.
func (t *stdTransport) close() {}

// quietBody is an answer's body whose read errors hold nothing of the answer (see quiet):
// net/http quotes a malformed chunk trailer.
type quietBody struct{ io.ReadCloser }

func (b quietBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = quiet(err)
	}
	return n, err
}
