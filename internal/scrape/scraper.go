package scrape

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unique"

	"github.com/valyala/fasthttp"

	"github.com/vllmstat/vllmstat/internal/page"
)

// scraper is one target's scrape state, owned by the goroutine that scrapes the target: what
// its requests are made from (net/http templates and request URIs, built when they change, not
// per scrape), its fast transport when it has one, whether it asks for the sample names only,
// and the parser of its pages.
type scraper struct {
	url  string
	auth *Auth // the credentials the requests were built for
	// full asks for the whole page; restricted, when not nil, for the names of mask only. Both
	// are templates of net/http requests: a scrape sends a copy with its context. Their
	// headers are never changed once built, so the copies may share them.
	full, restricted *http.Request
	mask             nsMask
	// fullURI is the path and query of full; uri those of a request for the names of uriMask,
	// shared by every target that asks for the same (a request for names carries kilobytes of
	// query, and a fleet asks for the same names).
	fullURI, uri string
	uriMask      nsMask
	names        *restriction
	// parse turns a page into what vllmstat reads. A stateful per-target parser (one that keeps
	// what it learnt from the target's previous pages) is set up here, in newScraper, and lives
	// as long as the target's goroutine.
	parse func(body []byte) (*page.Page, error)
	// replayed reports that parse read its last page by the lines of the previous one (see
	// page.Parser.Replayed); nil when parse has no memory.
	replayed func() bool
	// checked is set when the last page parsed was a restricted answer that had every name
	// seen before: a next answer with the same lines (replayed) has them too, and is not
	// scanned again.
	checked bool
	// buildErr is why the requests could not be built (a URL that does not parse).
	buildErr error
	// fast, when not nil, sends the scrapes (see fastTransport) instead of net/http.
	fast *fastTransport
}

func newScraper(t Target, opt *Options) *scraper {
	wopt := page.Options{Limits: opt.Limits, WorkerLabels: opt.WorkerLabels}
	// One parser per target: it reads a page like the target's previous one by comparing
	// bytes instead of parsing them again (see page.Parser).
	p := page.NewParser(wopt)
	s := &scraper{url: t.URL, names: newRestriction(), parse: p.Parse, replayed: p.Replayed}
	s.setAuth(&t.Auth, opt)
	if opt.fast && s.buildErr == nil && fastEligible(s.full) {
		s.fast = newFastTransport(fasthttp.AddMissingPort(s.full.URL.Host, false), opt.MaxBody)
	}
	return s
}

// setAuth builds the requests for credentials a.
func (s *scraper) setAuth(a *Auth, opt *Options) {
	s.auth, s.restricted, s.mask = a, nil, 0
	s.full, s.buildErr = s.newRequest(s.url, opt)
	if s.buildErr == nil {
		s.fullURI = s.full.URL.RequestURI()
	}
}

func (s *scraper) newRequest(u string, opt *Options) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", acceptPage)
	req.Header.Set("Accept-Encoding", opt.Compression.acceptEncoding())
	req.Header.Set("User-Agent", userAgent)
	if !s.auth.fromFile() {
		if err := s.auth.apply(req); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// template returns the net/http request template of a scrape: restricted to the names of
// the namespaces the target's pages use, or for the full page.
func (s *scraper) template(opt *Options, restrict bool) (*http.Request, error) {
	if s.buildErr != nil {
		return nil, s.buildErr
	}
	if !restrict {
		return s.full, nil
	}
	if s.restricted == nil || s.mask != s.names.mask {
		r := s.full.Clone(context.Background())
		u := *s.full.URL
		u.RawQuery = s.restrictedQuery()
		r.URL = &u
		literalRequestURI(r, opt.Client)
		s.restricted, s.mask = r, s.names.mask
	}
	return s.restricted, nil
}

// requestURI returns the path and query of a scrape's request, restricted or full.
func (s *scraper) requestURI(restrict bool) string {
	if !restrict {
		return s.fullURI
	}
	if s.uri == "" || s.uriMask != s.names.mask {
		u := *s.full.URL
		u.RawQuery = s.restrictedQuery()
		s.uri, s.uriMask = unique.Make(u.RequestURI()).Value(), s.names.mask
	}
	return s.uri
}

// restrictedQuery is the query of a request for the names of the namespaces the target's
// pages use.
func (s *scraper) restrictedQuery() string {
	q := s.names.sn.query(s.names.mask)
	if raw := s.full.URL.RawQuery; raw != "" { // the target's own parameters stay
		q = raw + "&" + q
	}
	return q
}

// request returns tmpl as the request of one scrape, with ctx.
func (s *scraper) request(ctx context.Context, tmpl *http.Request) (*http.Request, error) {
	req := tmpl.WithContext(ctx)
	if s.auth.fromFile() { // read on every scrape, so that a rotated credential is picked up
		req.Header = tmpl.Header.Clone()
		if err := s.auth.apply(req); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// scrape scrapes the target once, within opt.Timeout, and parses the page.
func (s *scraper) scrape(ctx context.Context, opt *Options) Result {
	start := opt.Clock.Now()
	res := s.fetch(ctx, opt)
	res.Start = start
	res.Duration = opt.Clock.Now().Sub(start)
	return res
}

func (s *scraper) fetch(ctx context.Context, opt *Options) Result {
	res := Result{Target: s.url}
	// Network deadlines are the wall clock's, whatever clock times the scrapes.
	deadline := time.Now().Add(opt.Timeout)
	buf := bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBuf {
			bufs.Put(buf)
		}
	}()
	buf.Reset()
	defer s.releaseResp()
	restricted := opt.RequestNames && s.names.active()
	checked := s.checked // of the parser's previous page; this scrape's page is checked below
	s.checked = false
	learn := opt.RequestNames && !restricted && s.names.learning() // a full page, to learn the target's names from
	body, err := s.get(ctx, opt, restricted, buf, deadline)
	if err == nil {
		// The page keeps no reference into body, so the buffer is reused.
		res.Page, res.ParseErr = s.parse(body)
	}
	if restricted {
		// A refusal of the long query (a 4xx status), or a page that lacks names seen before:
		// ask again for the full page, which is this scrape's result. A page that is not
		// exposition text is a failed scrape, restricted or not.
		var se *StatusError
		refused := errors.As(err, &se) && se.Code >= 400 && se.Code < 500
		missing := -1
		if err == nil && res.ParseErr == nil && !(checked && s.replayed != nil && s.replayed()) {
			missing = s.names.checkRestricted(body)
		}
		s.checked = err == nil && res.ParseErr == nil && missing < 0
		if refused || missing >= 0 {
			res.Page.Release() // nobody else saw it
			res.Page, res.ParseErr = nil, nil
			buf.Reset()
			if body, err = s.get(ctx, opt, false, buf, deadline); err == nil {
				res.Page, res.ParseErr = s.parse(body)
				s.fullAfterRestricted(opt, body, se, missing)
			}
		}
	}
	res.BodyBytes = len(body)
	if err != nil {
		res.FetchErr = err
		s.names.reset() // the target may come back as another server: learn its page again
		return res
	}
	if opt.KeepBody && !errors.Is(res.ParseErr, page.ErrLimit) { // a page over the limits is not kept
		res.Body = bytes.Clone(body)
	}
	switch {
	case res.ParseErr != nil:
		s.names.reset() // restrict only after a page that parsed
	case learn:
		s.names.sawFull(body)
	}
	return res
}

// fullAfterRestricted learns from a full page fetched after a restricted request was refused
// (se) or answered a page without name missing: when the full page has what the restricted
// one lacked, or the query was refused, the target is never restricted again.
func (s *scraper) fullAfterRestricted(opt *Options, page []byte, se *StatusError, missing int) {
	var answer string
	if missing >= 0 {
		// A page that lacks names may come from a restarted server that lost them too.
		lost := s.names.sawFullAfter(page)
		if lost < 0 {
			return
		}
		answer = "a page without " + s.names.sn.names[lost]
	} else {
		s.names.off = true
		answer = se.Error()
	}
	opt.Logger.Info("target answers requests for named samples with "+answer+
		" while its full page is fine: asking it for full pages from now on", "target", s.url)
}

// get fetches the page, restricted or full, before deadline, and returns it: in buf, or in the
// fast client's answer (see fastGet).
func (s *scraper) get(ctx context.Context, opt *Options, restrict bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error) {
	if s.fast != nil && s.buildErr == nil {
		body, err := s.fastGet(opt, restrict, buf, deadline)
		if err != errRedirect {
			return body, err
		}
		// From now on net/http scrapes the target, following its redirects.
		s.close()
		s.fast = nil
		buf.Reset()
	}
	if err := s.stdGet(ctx, opt, restrict, buf, deadline); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// stdGet fetches the page, restricted or full, into buf before deadline, with net/http.
func (s *scraper) stdGet(ctx context.Context, opt *Options, restrict bool, buf *bytes.Buffer, deadline time.Time) error {
	tmpl, err := s.template(opt, restrict)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := s.request(ctx, tmpl)
	if err != nil {
		return err
	}
	resp, err := opt.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if restrict && errors.As(err, &ue) {
			// Name the target as configured: the names asked for are kilobytes of query.
			err = &url.Error{Op: ue.Op, URL: s.url, Err: ue.Err}
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // let the connection be reused
		return &StatusError{Code: resp.StatusCode}
	}
	return readBody(resp, opt.MaxBody, buf)
}

// literalRequestURI makes req send its path and query as one prebuilt string. net/http writes
// the request line from URL.RequestURI, which joins path and query anew for every request: 3 KB
// of garbage per restricted scrape, a fifth of a fleet's allocations. With the two in
// URL.Opaque, RequestURI returns that string as is. Only for a request sent straight to the
// server: through a proxy, net/http writes the absolute URL only when Opaque is empty.
func literalRequestURI(req *http.Request, client *http.Client) {
	tr, ok := client.Transport.(*http.Transport)
	if client.Transport != nil && !ok {
		return // a transport of the caller's: leave the URL as it is
	}
	if ok && tr.Proxy != nil {
		if p, err := tr.Proxy(req); err != nil || p != nil {
			return
		}
	}
	if client.Transport == nil {
		if p, err := http.ProxyFromEnvironment(req); err != nil || p != nil {
			return
		}
	}
	u := req.URL
	path := u.EscapedPath()
	if u.Opaque != "" || u.RawQuery == "" || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		return
	}
	u.Opaque, u.RawQuery = unique.Make(path+"?"+u.RawQuery).Value(), "" // shared, as scraper.uri
}
