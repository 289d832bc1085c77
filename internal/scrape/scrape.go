// Package scrape fetches /metrics pages: one goroutine per target, never two scrapes of one
// target at once, each scrape bounded in time and size, the page parsed where it was fetched so
// that parsing spreads over cores.
package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

// DefaultMaxBody bounds a page; vLLM's are 30 to 100 KB.
const DefaultMaxBody = 16 << 20

// DefaultFirstTimeout bounds a target's first two scrapes (see Options.FirstTimeout).
const DefaultFirstTimeout = 10 * time.Second

// ErrBodyTooLarge is the failure of a page over the size limit.
var ErrBodyTooLarge = errors.New("body exceeds size limit")

// ErrTruncated is the failure of a page cut short: its last line has no final newline.
var ErrTruncated = errors.New("page truncated")

// cutShort returns ErrTruncated, with where the page was cut, when page's last line has no
// final newline: the exposition format ends every line with one, and OpenMetrics every line
// but its closing "# EOF". An empty page is whole.
func cutShort(page []byte) error {
	if len(page) == 0 || page[len(page)-1] == '\n' {
		return nil
	}
	start := bytes.LastIndexByte(page, '\n') + 1
	if string(page[start:]) == "# EOF" {
		return nil
	}
	return fmt.Errorf("%w: its last line, line %d (bytes %d to %d of %d), has no final newline: the answer was cut short",
		ErrTruncated, bytes.Count(page[:start], []byte{'\n'})+1, start+1, len(page), len(page))
}

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
	Page      *page.Page
	// FetchErr is a failure to get a page; ParseErr a page that is not exposition text or is
	// over the target's limits (page.ErrLimit).
	FetchErr error
	ParseErr error
	// Declared is set on a page without any sample vllmstat reads that names one of the
	// families it reads in a HELP or TYPE line (page.Declares): its server has the families,
	// without series yet.
	Declared bool
	// Boundary is the id of the step-boundary request this scrape answers, 0 for a tick.
	Boundary uint64
	// NewConnections is set once the target has answered out of turn on a kept-alive
	// connection (see errOutOfTurn), from the scrape that found it on: every scrape of it then
	// goes on a new connection, closed after its answer, for as long as it is a target.
	NewConnections bool
	// Version is the engine's weight version, read after the page at boundary scrapes and at
	// scrapes asked for it (Pool.AskVersion); nil when not read (see scraper.readVersion).
	Version *VersionReading
	// Servers are the version readings of the servers a router's page names, read instead of
	// Version (see servers.go).
	Servers []ServerVersion
}

// Err returns why the scrape failed, or nil.
func (r *Result) Err() error {
	if r.FetchErr != nil {
		return r.FetchErr
	}
	return r.ParseErr
}

// Reason classifies a failure for counting: "timeout", "refused", "http_status",
// "body_too_large", "truncated" (a page whose last line has no final newline), "limit", "parse", "credentials", "protocol" (a server that answered out of
// turn), "network", "other"; "" for success.
func (r *Result) Reason() string {
	switch err := r.FetchErr; {
	case err == nil && errors.Is(r.ParseErr, page.ErrLimit):
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
	case errors.Is(err, ErrTruncated):
		return "truncated"
	case errors.Is(err, target.ErrCredentials):
		return "credentials"
	case errors.Is(err, errOutOfTurn):
		return "protocol"
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

// Fetch scrapes t once, within opt.Timeout, reading at most opt.MaxBody bytes (inflated), and
// parses the page within opt.Limits. It asks for the full page (opt.RequestNames needs a
// target's earlier pages; see Pool). A nil Client or Clock means the shared client and the
// wall clock.
func Fetch(ctx context.Context, t target.Target, opt Options) Result {
	opt = opt.withDefaults()
	opt.FirstTimeout = opt.Timeout // one scrape: its own timeout is the caller's
	s := newScraper(ctx, t, &opt)
	defer s.close()
	return s.scrape()
}
