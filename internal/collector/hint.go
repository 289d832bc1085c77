package collector

import (
	"errors"
	"net/http"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/scrape"
)

// hint logs what a target's answer tells of its server's setup (page.Hint: an SGLang server
// started without --enable-metrics, or whose DP ranks but the first export nothing) once, when
// the hint appears or changes.
func (s *state) hint(t *TargetState, res *scrape.Result) {
	var se *scrape.StatusError
	h := page.Hint(res.Page, errors.As(res.Err(), &se) && se.Code == http.StatusNotFound)
	if h == t.hint {
		return
	}
	t.hint = h
	if h != "" {
		s.c.log.Warn("target "+h, "target", t.URL)
	}
}
