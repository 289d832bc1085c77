package page

import (
	"errors"
	"fmt"
	"strings"
)

// ErrLimit is the failure of a page over a target's limits (see Limits).
var ErrLimit = errors.New("page over limit")

// Limits bound what one target's page may hold, as Prometheus' sample_limit and label_limit
// do, so that one broken or hostile target cannot take the process's memory. Zero means no
// limit.
type Limits struct {
	// MaxSeries bounds the samples of the families vllmstat reads (every _bucket, _sum, _count,
	// _created, counter and gauge line counts as one, in every spelling on the page).
	MaxSeries int
	// MaxWorkers bounds the workers on one page: the distinct values of the engine label and
	// the worker labels (see Options) among those samples. The copies of one worker's figures
	// that its ranks export count once (see EnginePage.Copies), and SGLang's tokenizers
	// (EnginePage.Tokenizer) not at all: they are bounded by the same number on their own. The
	// collector bounds by it too the workers a target has had within a step (see
	// CheckStepWorkers).
	MaxWorkers int
}

// CheckStepWorkers is the failure of a page pg that would bring the workers its target has had
// within the open step to workers, or its SGLang tokenizers to tokenizers, over MaxWorkers: an
// error wrapping ErrLimit, or nil. A page whose engine labels change from scrape to scrape is
// within the limit on its own, and would otherwise bring ever more workers.
func (lim Limits) CheckStepWorkers(pg *Page, workers, tokenizers int) error {
	if lim.MaxWorkers <= 0 || workers <= lim.MaxWorkers && tokenizers <= lim.MaxWorkers {
		return nil
	}
	keys := make([]workerKey, len(pg.Engines))
	for i, ep := range pg.Engines {
		keys[i] = workerKey{engine: ep.Engine, labels: ep.Labels}
	}
	by := ""
	if names := workerLabelNames(keys); len(names) > 0 {
		by = "; its workers are told apart by " + strings.Join(names, ", ")
	}
	if workers > lim.MaxWorkers {
		return fmt.Errorf("%w: this page would make %d workers (engines) of the target within the step, more than the limit of %d workers per target%s", ErrLimit, workers, lim.MaxWorkers, by)
	}
	return fmt.Errorf("%w: this page would make %d SGLang tokenizers (workers without ranks) of the target within the step, more than the limit of %d per target%s", ErrLimit, tokenizers, lim.MaxWorkers, by)
}

// DefaultLimits are well above any real vLLM page: a page with 16 data-parallel engines holds
// about 2,000 samples of the families vllmstat reads (twice that where vLLM 0.9.2 to 0.10
// export the old and new names). A router's page of SGLang servers holds a worker per server
// and DP rank (its copies by TP and PP rank and its tokenizer not counted): 64 servers of one
// DP rank, or 16 of 4, each about 130 samples of the families vllmstat reads.
var DefaultLimits = Limits{MaxSeries: 20000, MaxWorkers: 64}

// ParsePageLimits is ParsePage for a page that must stay within lim (workers told apart by
// DefaultWorkerLabels). A page over them is an
// error wrapping ErrLimit that names the limit and the line where it was passed; parsing stops
// there, so what such a page costs is bounded by the limits, not by its size.
func ParsePageLimits(body []byte, lim Limits) (*Page, error) {
	return parse(body, Options{Limits: lim})
}

// ParsePageOptions is ParsePage with limits and worker labels of the caller's choosing.
func ParsePageOptions(body []byte, opt Options) (*Page, error) { return parse(body, opt) }
