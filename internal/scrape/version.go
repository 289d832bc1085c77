package scrape

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// VersionReading is what a target's engine said of its weight version, read right after a
// successful scrape of its page.
type VersionReading struct {
	// Version is the engine's version when Reports is set.
	Version int64
	// Reports is false when the engine reports no decimal version: it has no version endpoint
	// (404), its version is null, or it is not a decimal integer from 0 to MaxVersion.
	Reports bool
	// Tag is the engine's version when it is a string but no decimal version, such as
	// "default" or "step-42" (both engines keep an opaque string the trainer sets): at most
	// MaxVersionTag bytes of printable UTF-8, for the collector to match against the trainer's
	// versions. "" otherwise.
	Tag string
	// Refused says why a string version was not taken as a Tag (too long, not printable); the
	// string itself is the engine's and is never kept.
	Refused string
	// Err is why the reading failed (a timeout, a status other than 200 and 404, an answer
	// that is not JSON): nothing is known of the version then.
	Err error
}

// MaxVersion is the largest version read: 2^53, as the trainer's (see collector.MaxStep).
const MaxVersion int64 = 1 << 53

// maxVersionBody bounds a version endpoint's answer; SGLang's /model_info, the largest, is a
// few hundred bytes.
const maxVersionBody = 64 << 10

// A version endpoint: where an engine answers its weight version, as {"weight_version": ...}.
type versionEndpoint uint8

const (
	endpointUnknown       versionEndpoint = iota
	endpointWeightInfo                    // vLLM's GET /weight_info (dev mode: VLLM_SERVER_DEV_MODE=1)
	endpointModelInfo                     // SGLang's GET /model_info
	endpointWeightVersion                 // older SGLang servers' GET /weight_version
	endpointNone                          // every endpoint of the engine kind answered 404
)

var endpointPaths = [...]string{
	endpointWeightInfo:    "/weight_info",
	endpointModelInfo:     "/model_info",
	endpointWeightVersion: "/weight_version",
}

// endpointsOf are the version endpoints of an engine kind, in the order they are tried.
func endpointsOf(k vllm.Engine) []versionEndpoint {
	if k == vllm.SGLang {
		return []versionEndpoint{endpointModelInfo, endpointWeightVersion}
	}
	return []versionEndpoint{endpointWeightInfo}
}

// versionProbe is a target's version reading state, on the goroutine that scrapes it: which
// endpoint answered, learnt once and kept until a scrape of the page fails (the target may
// come back as another server), and the requests, built for the target's credentials.
type versionProbe struct {
	endpoint versionEndpoint
	reqs     [len(endpointPaths)]*request
}

// reset forgets which endpoint answered.
func (v *versionProbe) reset() { v.endpoint = endpointUnknown }

// readVersion reads the version of the engine whose page pg is, within the scrape timeout:
// from the endpoint that answered before, or else from each endpoint of its kind in turn until
// one answers. It returns nil when the target is known to report nothing and was told so
// already, or pg shows no engine.
func (s *scraper) readVersion(pg *page.Page) *VersionReading {
	if s.ver.endpoint == endpointNone || pg == nil || len(pg.Engines) == 0 || s.tr == nil {
		return nil
	}
	deadline := time.Now().Add(s.opt.Timeout)
	if ep := s.ver.endpoint; ep != endpointUnknown {
		r, missing := s.readAt(ep, deadline)
		if !missing {
			return r
		}
		s.ver.endpoint = endpointUnknown // gone: learn again
	}
	for _, ep := range endpointsOf(pg.Engines[0].Kind) {
		r, missing := s.readAt(ep, deadline)
		if missing {
			continue
		}
		if r.Err == nil {
			s.ver.endpoint = ep
		}
		return r
	}
	s.ver.endpoint = endpointNone
	return &VersionReading{} // reports none; said once
}

// readAt asks endpoint ep; missing is set when it is not there (404, or an answer without a
// weight_version).
func (s *scraper) readAt(ep versionEndpoint, deadline time.Time) (r *VersionReading, missing bool) {
	req, err := s.versionRequest(ep)
	if err != nil {
		return &VersionReading{Err: err}, false
	}
	return readVersionAt(s.tr, req, deadline)
}

// readVersionAt sends the version request req through tr; missing is set when the endpoint is
// not there (404, or an answer without a weight_version).
func readVersionAt(tr transport, req *request, deadline time.Time) (r *VersionReading, missing bool) {
	buf := bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBuf {
			bufs.Put(buf)
		}
	}()
	buf.Reset()
	body, err := tr.get(req, false, buf, deadline)
	defer tr.release()
	var se *StatusError
	switch {
	case errors.As(err, &se) && se.Code == http.StatusNotFound:
		return nil, true
	case err != nil:
		return &VersionReading{Err: versionError(req.url, err)}, false
	case len(body) > maxVersionBody:
		return &VersionReading{Err: fmt.Errorf("read weight version at %q: answer larger than %d bytes", req.url, maxVersionBody)}, false
	}
	var answer struct {
		WeightVersion json.RawMessage `json:"weight_version"`
	}
	// The answer's bytes are the engine's: they go into no error.
	if json.Unmarshal(body, &answer) != nil {
		return &VersionReading{Err: fmt.Errorf("read weight version at %q: answer is not a JSON object", req.url)}, false
	}
	if answer.WeightVersion == nil {
		return nil, true
	}
	return parseVersion(answer.WeightVersion), false
}

// versionRequest is the request of endpoint ep, built for the target's credentials when first
// needed.
func (s *scraper) versionRequest(ep versionEndpoint) (*request, error) {
	if r := s.ver.reqs[ep]; r != nil && r.auth == s.auth {
		return r, nil
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return nil, err
	}
	u = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: endpointPaths[ep]}
	r, err := newRequest(u.String(), s.auth, s.opt.Compression, nil)
	if err != nil {
		return nil, err
	}
	r.accept = "application/json"
	s.ver.reqs[ep] = r
	return r, nil
}

// MaxVersionTag bounds a version string kept as a Tag, and the name a trainer gives a version.
const MaxVersionTag = 256

// parseVersion reads a weight_version: a JSON string (as both engines send it) or number that
// is a decimal integer from 0 to MaxVersion is a version; another string is a Tag, or Refused
// when it is too long or not printable; null, and anything else, is no version.
func parseVersion(raw json.RawMessage) *VersionReading {
	var s string
	isString := json.Unmarshal(raw, &s) == nil
	if !isString {
		s = string(raw) // a number, or what no engine sends
	}
	if v, ok := decimalVersion(s); ok {
		return &VersionReading{Version: v, Reports: true}
	}
	if !isString || s == "" || allDigits(s) {
		return &VersionReading{} // a decimal out of range stays no version, as before tags
	}
	if why := VersionTagProblem(s); why != "" {
		return &VersionReading{Refused: why}
	}
	return &VersionReading{Tag: s}
}

// ParseDecimalVersion reads s when it is a decimal integer from 0 to MaxVersion: a version as
// an engine reports it.
func ParseDecimalVersion(s string) (int64, bool) { return decimalVersion(s) }

// decimalVersion reads s when it is a decimal integer from 0 to MaxVersion.
func decimalVersion(s string) (int64, bool) {
	if s == "" || len(s) > 16 || !allDigits(s) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > MaxVersion {
		return 0, false
	}
	return v, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// VersionTagProblem says what makes s no version string ("" when it is one): it must be 1 to
// MaxVersionTag bytes of valid UTF-8 with no control or format characters, so that it can be
// logged and written as it is. It says nothing of s's bytes.
func VersionTagProblem(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > MaxVersionTag:
		return fmt.Sprintf("longer than %d bytes", MaxVersionTag)
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return "has a control or non-printing character"
		}
	}
	return ""
}

// TrailingVersion reads the version a tag such as "step-42" ends in: its trailing decimal
// digits, 1 to 16 of them and at most MaxVersion, when the part before them has a letter and
// does not end in '.' (so "v1.0" and "-1" end in none).
func TrailingVersion(tag string) (int64, bool) {
	i := len(tag)
	for i > 0 && tag[i-1] >= '0' && tag[i-1] <= '9' {
		i--
	}
	prefix := tag[:i]
	if i == len(tag) || prefix == "" || prefix[len(prefix)-1] == '.' || !strings.ContainsFunc(prefix, unicode.IsLetter) {
		return 0, false
	}
	return decimalVersion(tag[i:])
}

// versionError says why a version reading failed without the answer's bytes, which some
// failures of a malformed answer quote.
func versionError(u string, err error) error {
	var why string
	var se *StatusError
	var op *net.OpError
	switch {
	case errors.As(err, &se):
		why = se.Error()
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		why = "timed out"
	case errors.Is(err, ErrBodyTooLarge):
		why = "answer too large"
	case err == errRedirect:
		why = "answered with a redirect"
	case errors.As(err, &op):
		why = op.Error()
	default:
		why = "malformed answer"
	}
	return fmt.Errorf("read weight version at %q: %s", u, why)
}
