package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progress shows how far a long read has come, on one terminal line updated in place: bytes
// read of the total and the rate. It shows nothing when its writer is not a terminal (a log file,
// a pipe, a test), and its line is gone once done.
type progress struct {
	w     io.Writer // nil: show nothing
	what  string
	total int64
	now   func() time.Time
	start time.Time
	last  time.Time
	shown bool
}

// progressEvery is how often the line is redrawn at most.
const progressEvery = 200 * time.Millisecond

// newProgress returns the progress of reading total bytes for what ("replay"), on w when w is a
// terminal.
func newProgress(w io.Writer, what string, total int64) *progress {
	if f, ok := w.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		w = nil
	}
	p := &progress{w: w, what: what, total: total, now: time.Now}
	p.start = p.now()
	return p
}

// update shows that n bytes are read, at most every progressEvery.
func (p *progress) update(n int64) {
	if p.w == nil {
		return
	}
	now := p.now()
	if now.Sub(p.last) < progressEvery {
		return
	}
	p.last, p.shown = now, true
	fmt.Fprintf(p.w, "\r\033[K%s: %s", p.what, p.status(n, now))
}

// status says how far n bytes are, and how fast they came.
func (p *progress) status(n int64, now time.Time) string {
	s := mib(n)
	if p.total > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", mib(p.total), n*100/p.total)
	}
	if d := now.Sub(p.start).Seconds(); d > 0 {
		s += fmt.Sprintf(", %s/s", mib(int64(float64(n)/d)))
	}
	return s
}

// done clears the line.
func (p *progress) done() {
	if p.w != nil && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
