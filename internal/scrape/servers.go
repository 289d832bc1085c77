package scrape

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Servers behind a router. SGLang's router answers /engine_metrics with every server's page
// merged, each sample labelled worker_addr with the server's URL as the router knows it
// (sgl-model-gateway's core/worker_manager.rs, get_engine_metrics: the worker's url()). The
// router replaces every ':' of the servers' pages with '_' before it parses them
// (core/metrics_aggregator.rs) and adds worker_addr after, so the label keeps its ':':
// worker_addr="http://10.0.0.5:30000". Such a page has no one engine to ask for a version: each
// server it names is asked at its own address, as a direct target is, and under the rules of a
// target added through the API (ServerRules), for the page is the router's, not the operator's
// list.

// WorkerAddrLabel is the label a router's merged page names each sample's server by.
const WorkerAddrLabel = page.WorkerAddrLabel

// ServerRules bound the servers a router's page names that are asked for their version. Both
// functions are called from the targets' goroutines, at once.
type ServerRules struct {
	// Check says why the server at this base URL may not be asked (nil: it may).
	Check func(baseURL string) error
	// Auth is the credentials a direct target at this URL (the server's /metrics) would get.
	Auth func(url string) target.Auth
}

// ServerVersion is the version reading of one server a router's page names.
type ServerVersion struct {
	// Addr is the server's worker_addr on the page, as its workers carry it.
	Addr string
	VersionReading
}

// serverProbe is a server's version reading state, kept on its router target's goroutine while
// the router's pages name it.
type serverProbe struct {
	refused  error // why it is not asked, decided once
	told     bool  // its refusal was reported: it is reported once
	endpoint versionEndpoint
	reqs     [len(endpointPaths)]*request
	auth     target.Auth
	base     string
}

// maxServerReads bounds the servers of one router page read at once.
const maxServerReads = 16

// routerAddrs returns the distinct worker_addr labels of pg's workers, in page order; nil when
// its workers carry none (the page is no router's).
func routerAddrs(pg *page.Page) []string {
	if pg == nil {
		return nil
	}
	var addrs []string
	var seen map[string]bool
	for i := range pg.Engines {
		a := page.WorkerAddr(pg.Engines[i].Labels)
		if a == "" || seen[a] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[a] = true
		addrs = append(addrs, a)
	}
	return addrs
}

// serverBase returns the base URL of the server named by worker_addr addr: an http or https
// URL with a host and no user info, path, query or fragment.
func serverBase(addr string) (string, error) {
	u, err := url.Parse(addr)
	switch {
	case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("%s %q is not a server's URL (http or https, with a host)", WorkerAddrLabel, redactedAddr(addr))
	case u.User != nil:
		return "", fmt.Errorf("%s %q has user info: its server is not asked", WorkerAddrLabel, redactedAddr(addr))
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%s %q has a path or query: it is no server's base URL", WorkerAddrLabel, redactedAddr(addr))
	}
	return u.Scheme + "://" + u.Host, nil
}

// redactedAddr is addr as logs may show it: without a password.
func redactedAddr(addr string) string {
	if u, err := url.Parse(addr); err == nil {
		return u.Redacted()
	}
	return "(not a URL)"
}

// readServerVersions reads the version of every server whose worker_addr is in addrs, at once
// (up to maxServerReads), within the scrape timeout. A server is left out when it is known to
// report nothing and was told so already, or when it was refused and that was told already.
func (s *scraper) readServerVersions(pg *page.Page, addrs []string) []ServerVersion {
	rules := s.opt.Servers
	if rules == nil {
		return nil
	}
	probes := make(map[string]*serverProbe, len(addrs))
	for _, a := range addrs {
		pr := s.servers[a]
		if pr == nil {
			pr = &serverProbe{}
			pr.base, pr.refused = serverBase(a)
			if pr.refused == nil && rules.Check != nil {
				if err := rules.Check(pr.base); err != nil {
					pr.refused = fmt.Errorf("server %s: %w", redactedAddr(a), err)
				}
			}
			if pr.refused == nil && rules.Auth != nil {
				pr.auth = rules.Auth(pr.base + "/metrics")
			}
		}
		probes[a] = pr
	}
	s.servers = probes // the servers the page no longer names are forgotten
	kind := pg.Engines[0].Kind
	deadline := time.Now().Add(s.opt.Timeout)
	out := make([]ServerVersion, len(addrs))
	keep := make([]bool, len(addrs))
	sem := make(chan struct{}, maxServerReads)
	var wg sync.WaitGroup
	for i, a := range addrs {
		pr := probes[a]
		switch {
		case pr.refused != nil:
			if !pr.told {
				pr.told = true
				out[i], keep[i] = ServerVersion{Addr: a, VersionReading: VersionReading{Err: pr.refused}}, true
			}
			continue
		case pr.endpoint == endpointNone:
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if r := s.readServer(pr, kind, deadline); r != nil {
				out[i], keep[i] = ServerVersion{Addr: a, VersionReading: *r}, true
			}
		})
	}
	wg.Wait()
	n := 0
	for i := range out {
		if keep[i] {
			out[n] = out[i]
			n++
		}
	}
	return out[:n]
}

// readServer reads one server's version as readVersion reads a target's: from the endpoint that
// answered before, or else from each endpoint of kind in turn. It returns nil when the server
// reports nothing, told already.
func (s *scraper) readServer(pr *serverProbe, kind vllm.Engine, deadline time.Time) *VersionReading {
	tr := s.serverTransport()
	if ep := pr.endpoint; ep != endpointUnknown {
		r, missing := s.readServerAt(pr, tr, ep, deadline)
		if !missing {
			return r
		}
		pr.endpoint = endpointUnknown
	}
	for _, ep := range endpointsOf(kind) {
		r, missing := s.readServerAt(pr, tr, ep, deadline)
		if missing {
			continue
		}
		if r.Err == nil {
			pr.endpoint = ep
		}
		return r
	}
	pr.endpoint = endpointNone
	return &VersionReading{}
}

func (s *scraper) readServerAt(pr *serverProbe, tr transport, ep versionEndpoint, deadline time.Time) (*VersionReading, bool) {
	req := pr.reqs[ep]
	if req == nil {
		var err error
		req, err = newRequest(pr.base+endpointPaths[ep], &pr.auth, s.opt.Compression, nil)
		if err != nil {
			return &VersionReading{Err: err}, false
		}
		req.accept = "application/json"
		pr.reqs[ep] = req
	}
	return readVersionAt(tr, req, deadline)
}

// serverTransport is the transport of the servers' version requests: net/http's, through a
// client that follows no redirect, so that a server cannot send a request where the rules would
// not let it go (a redirect is a failed reading).
func (s *scraper) serverTransport() transport {
	c := *s.opt.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &stdTransport{client: &c, maxBody: s.opt.MaxBody, ctx: s.ctx}
}
