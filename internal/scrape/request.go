package scrape

import (
	"net/http"
	"net/url"
	"unique"

	"github.com/vllmstat/vllmstat/internal/target"
)

// request is what every scrape of one target sends, built once per target (and again when its
// credentials change) and read by whichever transport sends it: the origin and request URI of
// the full page, the request URI of the restricted one (rebuilt when the namespaces asked for
// change), the Accept-Encoding, and the credentials.
type request struct {
	url     string   // as configured: the target's name in errors
	parsed  *url.URL // url, parsed
	fullURI string   // path and query of the full page
	// names says which names a restricted request asks for. query and uri are the query and
	// the path and query of a request for the names of mask, shared by every target that asks
	// for the same (a request for names carries kilobytes of query, and a fleet asks for the
	// same names).
	names      *restriction
	query, uri string
	mask       nsMask
	encoding   string // Accept-Encoding
	accept     string // Accept: a page's, unless another endpoint's
	auth       *target.Auth
	// authorization is the Authorization header when the credentials are not read from files
	// ("" for none); see header.
	authorization string
	// layout is the layout of the target's last values answer (see values.go); nil for none.
	layout *layout
}

func newRequest(rawURL string, auth *target.Auth, c Compression, names *restriction) (*request, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	r := &request{url: rawURL, parsed: u, fullURI: u.RequestURI(), encoding: c.acceptEncoding(), accept: acceptPage, auth: auth, names: names}
	if !auth.FromFile() {
		if r.authorization, err = authHeader(auth); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// requestURI returns the path and query of a scrape: for the names of the namespaces the
// target's pages use (see restriction), or for the full page when restrict is false.
func (r *request) requestURI(restrict bool) string {
	if !restrict {
		return r.fullURI
	}
	r.build()
	return r.uri
}

// restrictedURL returns the URL of a restricted scrape.
func (r *request) restrictedURL() *url.URL {
	r.build()
	u := *r.parsed
	u.RawQuery = r.query
	return &u
}

// build makes the restricted request's query and URI, when the namespaces asked for changed.
func (r *request) build() {
	if r.uri != "" && r.mask == r.names.mask {
		return
	}
	q := r.names.sn.query(r.names.mask)
	if raw := r.parsed.RawQuery; raw != "" { // the target's own parameters stay
		q = raw + "&" + q
	}
	u := *r.parsed
	u.RawQuery = q
	r.query, r.uri, r.mask = q, unique.Make(u.RequestURI()).Value(), r.names.mask
}

// header returns the Authorization header of a scrape, "" for none. Credentials in files are
// read on every scrape, so that a rotated credential is picked up.
func (r *request) header() (string, error) {
	if !r.auth.FromFile() {
		return r.authorization, nil
	}
	return authHeader(r.auth)
}

// authHeader returns the Authorization header that sends a, "" for no credentials. They go in
// that header (never in the URL), which net/http drops when a redirect leads to another host.
func authHeader(a *target.Auth) (string, error) {
	h := http.Request{Header: http.Header{}}
	if err := a.Apply(&h); err != nil {
		return "", err
	}
	return h.Header.Get("Authorization"), nil
}

// headerSetter is a request's headers, of either client: http.Header, *fasthttp.RequestHeader.
type headerSetter interface{ Set(key, value string) }

// setHeaders sets the headers of a scrape on h: what it accepts, and the credentials; and on a
// restricted one, the layout of a values answer it holds.
func (r *request) setHeaders(h headerSetter, restrict bool) error {
	auth, err := r.header()
	if err != nil {
		return err
	}
	h.Set("Accept", r.accept)
	h.Set("Accept-Encoding", r.encoding)
	h.Set("User-Agent", userAgent)
	if auth != "" {
		h.Set("Authorization", auth)
	}
	if restrict {
		h.Set(layoutHeader, r.layoutID())
	}
	return nil
}

// fetchError names the target as configured in a failure to get its page: the request may
// carry kilobytes of names in its query.
func (r *request) fetchError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		err = ue.Err
	}
	return &url.Error{Op: "Get", URL: r.url, Err: err}
}
