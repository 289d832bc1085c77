package run

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// trace is what a group's components did, in order.
type trace struct{ events []string }

// add adds a component named name to g that writes down its start and stop in t, failing to
// start with startErr and to stop with stopErr (nil: success).
func (t *trace) add(g *Group, name string, startErr, stopErr error) {
	g.Add(func(context.Context) error {
		if startErr != nil {
			t.events = append(t.events, "fail "+name)
			return startErr
		}
		t.events = append(t.events, "start "+name)
		return nil
	}, func(context.Context) error {
		t.events = append(t.events, "stop "+name)
		return stopErr
	})
}

func TestGroupStartsInOrderAndStopsInReverse(t *testing.T) {
	var g Group
	var tr trace
	tr.add(&g, "a", nil, nil)
	g.Add(nil, nil) // a component with nothing to do
	tr.add(&g, "b", nil, nil)
	tr.add(&g, "c", nil, nil)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(context.Background()); err != nil { // each is stopped once
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if !slices.Equal(tr.events, want) {
		t.Errorf("events %q, want %q", tr.events, want)
	}
}

// TestGroupStartFailureStopsTheStarted: a component that fails to start is not stopped, those
// started before it are, in reverse order, and those after it never start. Start returns the
// failure as it is when the stops succeed, joined with theirs when they fail.
func TestGroupStartFailureStopsTheStarted(t *testing.T) {
	refused := errors.New("address in use")
	stuck := errors.New("close: stuck")
	for _, tt := range []struct {
		name   string
		stopB  error
		errMsg string
	}{
		{name: "stops succeed", errMsg: "address in use"},
		{name: "a stop fails", stopB: stuck, errMsg: "address in use\nclose: stuck"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var g Group
			var tr trace
			tr.add(&g, "a", nil, nil)
			tr.add(&g, "b", nil, tt.stopB)
			tr.add(&g, "c", refused, nil)
			tr.add(&g, "d", nil, nil)
			err := g.Start(context.Background())
			if !errors.Is(err, refused) || err.Error() != tt.errMsg {
				t.Fatalf("Start: %q, want %q", err, tt.errMsg)
			}
			if tt.stopB != nil && !errors.Is(err, tt.stopB) {
				t.Errorf("Start: %v does not hold the stop's error", err)
			}
			if tt.stopB == nil && err != refused {
				t.Errorf("Start: %#v, want the failure itself", err)
			}
			want := []string{"start a", "start b", "fail c", "stop b", "stop a"}
			if !slices.Equal(tr.events, want) {
				t.Errorf("events %q, want %q", tr.events, want)
			}
			if err := g.Stop(context.Background()); err != nil || len(tr.events) != len(want) {
				t.Errorf("Stop after a failed Start: %v, events %q; want nothing left to stop", err, tr.events)
			}
		})
	}
}

// TestGroupStopJoinsErrors: every component is stopped even when some fail, and their errors
// come joined in the order stopped.
func TestGroupStopJoinsErrors(t *testing.T) {
	var g Group
	var tr trace
	errA, errC := errors.New("a failed"), errors.New("c failed")
	tr.add(&g, "a", nil, errA)
	tr.add(&g, "b", nil, nil)
	tr.add(&g, "c", nil, errC)
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := g.Stop(context.Background())
	if !errors.Is(err, errA) || !errors.Is(err, errC) || err.Error() != "c failed\na failed" {
		t.Errorf("Stop: %q, want both errors, c's first", err)
	}
	if want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}; !slices.Equal(tr.events, want) {
		t.Errorf("events %q, want %q", tr.events, want)
	}
}

// TestGroupStopsOnFailureDespiteCancel: the stops after a failed start get a context that has
// not ended even when Start's has, so that they can finish what they have to.
func TestGroupStopsOnFailureDespiteCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var g Group
	var stopCtxErr error
	g.Add(nil, func(ctx context.Context) error { stopCtxErr = ctx.Err(); return nil })
	g.Add(func(context.Context) error { cancel(); return errors.New("refused") }, nil)
	if err := g.Start(ctx); err == nil {
		t.Fatal("Start succeeded")
	}
	if stopCtxErr != nil {
		t.Errorf("the stop's context had ended: %v", stopCtxErr)
	}
}
