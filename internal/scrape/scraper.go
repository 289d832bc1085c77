package scrape

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

// scraper is one target's scrape state, owned by the goroutine that scrapes the target: what
// its scrapes send (built when the credentials change, not per scrape), the transport that
// sends them, whether it asks for the sample names only, and the parser of its pages.
type scraper struct {
	url   string
	auth  *target.Auth // the credentials req was built for
	req   *request     // nil when it could not be built: see buildErr
	tr    transport
	names *restriction
	// parse turns a page into what vllmstat reads. A stateful per-target parser (one that keeps
	// what it learnt from the target's previous pages) is set up here, in newScraper, and lives
	// as long as the target's goroutine.
	parse func(body []byte) (*page.Page, error)
	// ver is how the target's engine is asked for its weight version (see version.go).
	ver versionProbe
	// servers are the version reading states of the servers a router's page names, by
	// worker_addr (see servers.go).
	servers map[string]*serverProbe
	// replayed reports that parse read its last page by the lines of the previous one (see
	// page.Parser.Replayed); nil when parse has no memory.
	replayed func() bool
	// checked is set when the last page parsed was a restricted answer that had every name
	// seen before: a next answer with the same lines (replayed) has them too, and is not
	// scanned again.
	checked bool
	// scrapes counts the target's scrapes up to firstScrapes: those have the first pages'
	// budget (see Options.FirstTimeout), and a target that does not answer them is not waited
	// for that long again, at every step end. learning is set while the target counts in its
	// pool's learning.
	scrapes  int
	learning bool
	// fresh is set once the target answered out of turn on a kept-alive connection: every
	// later scrape goes on a new connection (see transport.newConnections), for the target's
	// lifetime.
	fresh bool
	// buildErr is why the request could not be built (a URL that does not parse, credentials
	// that cannot be read).
	buildErr error
	// ctx ends with the target: a scrape in flight then fails at once.
	ctx context.Context
	opt *Options
}

// firstScrapes is how many of a target's scrapes have the first pages' budget: its first page,
// and the first page restricted to the samples vllmstat reads (with request_names), both new
// to its parser, read in full and learnt. A fleet's targets make them together, at its start:
// at 1,000 targets the second ones timed out on a machine still busy with the first.
const firstScrapes = 2

// newScraper returns the scrape state of target t, which ends with ctx.
func newScraper(ctx context.Context, t target.Target, opt *Options) *scraper {
	wopt := page.Options{Limits: opt.Limits, WorkerLabels: opt.WorkerLabels}
	// One parser per target: it reads a page like the target's previous one by comparing
	// bytes instead of parsing them again (see page.Parser).
	p := page.NewParser(wopt)
	s := &scraper{url: t.URL, names: newRestriction(), parse: p.Parse, replayed: p.Replayed, ctx: ctx, opt: opt}
	if opt.learning != nil {
		s.learning = true
		opt.learning.Add(1)
	}
	s.setAuth(&t.Auth)
	if s.buildErr == nil {
		s.setTransport(newTransport(ctx, s.req, opt))
	}
	return s
}

// setAuth builds the request for credentials a.
func (s *scraper) setAuth(a *target.Auth) {
	s.auth = a
	s.req, s.buildErr = newRequest(s.url, a, s.opt.Compression, s.names)
}

// scrape scrapes the target once, within its Options' Timeout, and parses the page.
func (s *scraper) scrape() Result {
	opt := s.opt
	start := opt.Clock.Now()
	res := s.fetch(opt)
	res.Start = start
	res.Duration = opt.Clock.Now().Sub(start)
	res.NewConnections = s.fresh
	if s.scrapes < firstScrapes {
		if s.scrapes++; s.scrapes == firstScrapes {
			s.learnt()
		}
	}
	return res
}

// timeout returns the bound of the target's next scrape: the first pages' budget for its own
// first scrapes, and for every scrape while other targets of its pool still make theirs (a
// fleet's start, when a scrape's lateness tells more about the machine, busy learning thousands
// of pages, than about the target); Timeout otherwise.
func (s *scraper) timeout() time.Duration {
	if s.scrapes < firstScrapes || s.opt.learning != nil && s.opt.learning.Load() > 0 {
		return max(s.opt.Timeout, s.opt.FirstTimeout)
	}
	return s.opt.Timeout
}

// learnt takes the target out of its pool's learning: its first scrapes are made, or it is gone.
func (s *scraper) learnt() {
	if s.learning {
		s.learning = false
		if s.opt.learning.Add(-1) == 0 && s.opt.AfterFirstPages != nil {
			s.opt.AfterFirstPages()
		}
	}
}

func (s *scraper) fetch(opt *Options) Result {
	res := Result{Target: s.url}
	// Network deadlines are the wall clock's, whatever clock times the scrapes.
	deadline := time.Now().Add(s.timeout())
	buf := bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBuf {
			bufs.Put(buf)
		}
	}()
	buf.Reset()
	defer s.release()
	restricted := opt.RequestNames && s.names.active()
	checked := s.checked // of the parser's previous page; this scrape's page is checked below
	s.checked = false
	learn := opt.RequestNames && !restricted && s.names.learning() // a full page, to learn the target's names from
	body, err := s.get(restricted, buf, deadline)
	if err == nil {
		err = s.read(&res, body)
	}
	if restricted {
		body, err = s.checkRestricted(&res, opt, body, err, checked, buf, deadline)
	}
	res.BodyBytes = len(body)
	if err != nil {
		res.FetchErr = err
		s.names.reset() // the target may come back as another server: learn its page again
		s.ver.reset()
		s.servers = nil
		return res
	}
	// A page that failed to parse is not kept: one over the limits would grow the recording,
	// and one that is not Prometheus text may hold anything (its server's secrets too).
	if opt.KeepBody && res.ParseErr == nil {
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

// checkRestricted reads the answer to a restricted request (body, err): a refusal of the long
// query (a 4xx status), or a page that lacks names seen before, asks again for the full page,
// which is then the scrape's result (in res, and the body and error returned). A page that is
// not exposition text is a failed scrape, restricted or not. checked is whether the parser's
// previous page was a restricted one found complete.
func (s *scraper) checkRestricted(res *Result, opt *Options, body []byte, err error, checked bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error) {
	var se *StatusError
	refused := errors.As(err, &se) && se.Code >= 400 && se.Code < 500
	missing := -1
	if err == nil && res.ParseErr == nil && !(checked && s.replayed != nil && s.replayed()) {
		missing = s.names.checkRestricted(body)
	}
	s.checked = err == nil && res.ParseErr == nil && missing < 0
	if !refused && missing < 0 {
		return body, err
	}
	res.Page.Release() // nobody else saw it
	res.Page, res.ParseErr = nil, nil
	buf.Reset()
	if body, err = s.get(false, buf, deadline); err == nil {
		if err = s.read(res, body); err == nil {
			s.fullAfterRestricted(opt, body, se, missing)
		}
	}
	return body, err
}

// read parses the page body into res. A page that parses but whose last line has no final
// newline was cut short (a Content-Length shorter than the page, a connection closed mid-way):
// its last number may have lost digits ("2700" read as "27"), so it is a failed fetch, never a
// page. The page keeps no reference into body, so the buffer is reused.
func (s *scraper) read(res *Result, body []byte) error {
	res.Page, res.ParseErr = s.parse(body)
	if res.ParseErr != nil {
		return nil
	}
	res.Declared = len(res.Page.Engines) == 0 && page.Declares(body)
	if err := cutShort(body); err != nil {
		res.Page.Release() // nobody else saw it
		res.Page = nil
		return s.req.fetchError(err)
	}
	return nil
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

// get fetches the page, restricted or full, before deadline: in buf, or in the transport's
// answer until release. A target whose answer is a redirect the transport does not follow is
// scraped with net/http from then on, starting with this request.
func (s *scraper) get(restrict bool, buf *bytes.Buffer, deadline time.Time) ([]byte, error) {
	if s.buildErr != nil {
		return nil, s.buildErr
	}
	if s.tr == nil { // the first request that could be built
		s.setTransport(newTransport(s.ctx, s.req, s.opt))
	}
	body, err := s.tr.get(s.req, restrict, buf, deadline)
	if err == errRedirect {
		s.tr.close()
		s.setTransport(newStdTransport(s.ctx, s.opt))
		buf.Reset()
		body, err = s.tr.get(s.req, restrict, buf, deadline)
	}
	if !s.fresh && errors.Is(err, errOutOfTurn) {
		// A target that sends answers nobody asked for may send one just after a request
		// goes out, where no check before sending it can see: it would be read as the
		// request's answer. A step end's scrape often comes right after a tick's.
		s.fresh = true
		s.tr.newConnections()
		s.opt.Logger.Warn("target answered out of turn on a kept-alive connection (an answer nobody asked for): "+
			"every scrape of it goes on a new connection from now on", "target", s.url)
	}
	return body, err
}

// setTransport makes tr the target's transport, on new connections once the target answered
// out of turn.
func (s *scraper) setTransport(tr transport) {
	s.tr = tr
	if s.fresh {
		tr.newConnections()
	}
}

// release says the page of the last get has been read.
func (s *scraper) release() {
	if s.tr != nil {
		s.tr.release()
	}
}

// close closes the target's connections: its goroutine is done.
func (s *scraper) close() {
	s.learnt()
	if s.tr != nil {
		s.tr.close()
	}
}
