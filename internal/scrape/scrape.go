// Package scrape fetches /metrics pages: one goroutine per target, never two scrapes of one
// target at once, each scrape bounded in time and size, the page parsed where it was fetched so
// that parsing spreads over cores.
package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/vllmstat/vllmstat/internal/window"
)

// DefaultMaxBody bounds a page; vLLM's are 30 to 100 KB.
const DefaultMaxBody = 16 << 20

// ErrBodyTooLarge is the failure of a page over the size limit.
var ErrBodyTooLarge = errors.New("body exceeds size limit")

// Result is one scrape of one target.
type Result struct {
	// Target is the target's URL (never with user info).
	Target string
	// Gen is the generation of the target instance that scraped: a target removed and added
	// again is a new instance, and a result of the old one is stale (see Pool.Generation).
	Gen      uint64
	Start    time.Time
	Duration time.Duration
	// Body is the page as answered (kept for recordings), nil when the fetch failed.
	Body      []byte
	BodyBytes int
	Page      *window.Page
	// FetchErr is a failure to get a page; ParseErr a page that is not exposition text or is
	// over the target's limits (window.ErrLimit).
	FetchErr error
	ParseErr error
	// Boundary is the id of the step-boundary request this scrape answers, 0 for a tick.
	Boundary uint64
}

// Err returns why the scrape failed, or nil.
func (r *Result) Err() error {
	if r.FetchErr != nil {
		return r.FetchErr
	}
	return r.ParseErr
}

// Reason classifies a failure for counting: "timeout", "refused", "http_status",
// "body_too_large", "limit", "parse", "credentials", "network", "other"; "" for success.
func (r *Result) Reason() string {
	switch err := r.FetchErr; {
	case err == nil && errors.Is(r.ParseErr, window.ErrLimit):
		return "limit"
	case err == nil && r.ParseErr != nil:
		return "parse"
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, ErrBodyTooLarge):
		return "body_too_large"
	case errors.Is(err, ErrCredentials):
		return "credentials"
	case errors.As(err, new(*StatusError)):
		return "http_status"
	default:
		var ne net.Error
		if errors.As(err, &ne) {
			return "network"
		}
		return "other"
	}
}

// StatusError is an answer other than 200 OK.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP status %d", e.Code) }

// NewClient returns the HTTP client shared by all targets: keep-alive connections to every
// target (a fleet can be a thousand of them), and transparent gzip.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no global cap: one idle connection per target is the point
	tr.MaxIdleConnsPerHost = 4
	tr.IdleConnTimeout = 5 * time.Minute
	return &http.Client{Transport: tr}
}

// Fetch scrapes t once, within opt.Timeout, reading at most opt.MaxBody bytes, and parses the
// page within opt.Limits. Only opt.Client, Timeout, MaxBody, Limits, WorkerLabels, KeepBody and Clock matter
// here; a nil Client or Clock means the shared client and the wall clock.
func Fetch(ctx context.Context, t Target, opt Options) Result {
	opt = opt.withDefaults()
	start := opt.Clock.Now()
	res := fetch(ctx, t, &opt)
	res.Start = start
	res.Duration = opt.Clock.Now().Sub(start)
	return res
}

func fetch(ctx context.Context, t Target, opt *Options) Result {
	res := Result{Target: t.URL}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	buf := bufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 4<<20 { // an oversized page's buffer is not worth keeping
			bufs.Put(buf)
		}
	}()
	buf.Reset()
	err := get(ctx, opt.Client, &t, opt.MaxBody, buf)
	body := buf.Bytes()
	res.BodyBytes = len(body)
	if err != nil {
		res.FetchErr = err
		return res
	}
	// The page keeps no reference into body (its strings are copies), so the buffer is reused.
	res.Page, res.ParseErr = window.ParsePageOptions(body, window.Options{Limits: opt.Limits, WorkerLabels: opt.WorkerLabels})
	if opt.KeepBody && !errors.Is(res.ParseErr, window.ErrLimit) { // a page over the limits is not kept
		res.Body = bytes.Clone(body)
	}
	return res
}

// bufs recycles page buffers: a fleet's pages arrive at up to hundreds of MB/s, and reading
// each into a fresh, repeatedly grown slice was most of the collector's garbage.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func get(ctx context.Context, client *http.Client, t *Target, maxBody int64, buf *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return err
	}
	if err := t.Auth.apply(req); err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
	req.Header.Set("User-Agent", "vllmstat")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // let the connection be reused
		return &StatusError{Code: resp.StatusCode}
	}
	if resp.ContentLength > 0 && resp.ContentLength <= maxBody {
		buf.Grow(int(resp.ContentLength) + 1)
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxBody+1)); err != nil {
		return err
	}
	if int64(buf.Len()) > maxBody {
		return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	}
	return nil
}
