package window

import (
	"errors"
	"fmt"
)

// ErrLimit is the failure of a page over a target's limits (see Limits).
var ErrLimit = errors.New("page over limit")

// Limits bound what one target's page may hold, as Prometheus' sample_limit and label_limit
// do, so that one broken or hostile target cannot take the process's memory. Zero means no
// limit.
type Limits struct {
	// MaxSeries bounds the series of the families vllmstat reads (every _bucket, _sum, _count,
	// _created and gauge line counts as one).
	MaxSeries int
	// MaxWorkers bounds the engines (workers) on one page.
	MaxWorkers int
}

// DefaultLimits are well above any real vLLM page: a page with 16 data-parallel engines holds
// about 2,000 series of the families vllmstat reads.
var DefaultLimits = Limits{MaxSeries: 20000, MaxWorkers: 64}

// ParsePageLimits is ParsePage for a page that must stay within lim; a page over them is an
// error wrapping ErrLimit.
func ParsePageLimits(body []byte, lim Limits) (*Page, error) {
	p, err := ParsePage(body)
	if err != nil {
		return nil, err
	}
	if lim.MaxWorkers > 0 && len(p.Engines) > lim.MaxWorkers {
		return nil, fmt.Errorf("%w: %d engines, more than the limit of %d workers per target", ErrLimit, len(p.Engines), lim.MaxWorkers)
	}
	if lim.MaxSeries > 0 {
		n := 0
		for i := range p.Engines {
			n += len(p.Engines[i].Counters) + len(p.Engines[i].Hists)
		}
		if n > lim.MaxSeries {
			return nil, fmt.Errorf("%w: %d series, more than the limit of %d per target", ErrLimit, n, lim.MaxSeries)
		}
	}
	return p, nil
}
