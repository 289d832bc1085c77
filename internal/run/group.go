package run

import (
	"context"
	"errors"
)

// Group starts components in the order they were added and stops them in the reverse order, so
// that each one starts after the ones it needs and stops before them. Its methods are called
// from one goroutine.
type Group struct {
	comps   []component
	started int // comps[:started] are started
}

// component is one part of a Group; a nil start or stop has nothing to do.
type component struct {
	start, stop func(context.Context) error
}

// Add adds a component after those added before. start either succeeds or undoes what it did
// before it returns its error: a component whose start failed is not stopped. stop is called
// once, if start succeeded.
func (g *Group) Add(start, stop func(context.Context) error) {
	g.comps = append(g.comps, component{start: start, stop: stop})
}

// Start starts the components not started yet, in order. When one fails, Start stops those it
// has started, in reverse order, and returns the failure, joined with the errors of those stops
// if any; those stops get ctx without its end, so that they finish what they have to.
func (g *Group) Start(ctx context.Context) error {
	for g.started < len(g.comps) {
		if start := g.comps[g.started].start; start != nil {
			if err := start(ctx); err != nil {
				if serr := g.Stop(context.WithoutCancel(ctx)); serr != nil {
					return errors.Join(err, serr)
				}
				return err
			}
		}
		g.started++
	}
	return nil
}

// Stop stops the started components in reverse order, each once, and returns their errors
// joined in that order; nil when none failed.
func (g *Group) Stop(ctx context.Context) error {
	var errs []error
	for g.started > 0 {
		g.started--
		if stop := g.comps[g.started].stop; stop != nil {
			errs = append(errs, stop(ctx))
		}
	}
	return errors.Join(errs...)
}
