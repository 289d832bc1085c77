package collector

import (
	"errors"
	"net/http"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/scrape"
)

// hint logs what a target's answer tells of its server's setup (page.Hint: no metrics page at
// its URL, a server that exports none of the families vllmstat reads, an SGLang server whose DP
// ranks but the first export nothing) once, when the hint appears or changes.
func (s *state) hint(t *TargetState, res *scrape.Result) {
	var se *scrape.StatusError
	h := page.Hint(res.Page, errors.As(res.Err(), &se) && se.Code == http.StatusNotFound, res.Declared)
	if h == t.hint {
		return
	}
	t.hint = h
	switch h {
	case "":
	case page.HintNotFound:
		s.c.log.Warn("no metrics page at "+t.URL+": "+h, "target", t.URL)
	default:
		s.c.log.Warn("target "+h, "target", t.URL)
	}
}
