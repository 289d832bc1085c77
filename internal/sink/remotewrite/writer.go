// Package remotewrite is the remote_write sink: it sends every closed step, and optionally
// every worker's interval values, to a Prometheus remote-write 1.0 receiver (Prometheus,
// VictoriaMetrics, Mimir, Thanos receive, ...), under the names vllmstat's own /metrics uses.
package remotewrite

import (
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/vllm"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/snappy"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
)

// Writer sends step records and interval values by remote write. Write sends a step's samples,
// a batch per request, and returns the first transient failure: the sink runtime retries the
// step with backoff (the one retry policy for steps), and Write resumes after the batches
// already accepted, so that no sample is sent twice. Interval values go into a bounded buffer
// that the Writer's own sender, started by Start, sends and retries; Close stops it.
type Writer struct {
	set    Settings
	prefix string
	keys   *keyset.Set // the step keys sent; nil: every key
	log    *slog.Logger
	client *http.Client
	stats  sink.Stats

	failing   atomic.Bool // the interval sender logged a transient failure and no success since
	rejecting atomic.Bool // a rejection was logged and no success since

	// resume is Write's progress on a step it could not finish; Write's caller owns it.
	resume struct {
		ok   bool
		step int64
		end  time.Time
		sent int
	}

	mu      sync.Mutex
	buf     []sample // interval samples waiting, oldest first
	pending int      // interval samples waiting or in flight; at most QueueSize
	closed  bool
	cache   map[string]*series // interval series by name, target, engine and target labels

	wake    chan struct{} // a sample was buffered
	drain   chan struct{} // closed by Close: send what is left, then return
	ctx     context.Context
	cancel  context.CancelFunc // at Close's deadline: abandon requests and waits
	done    chan struct{}      // closed when the sender returns; nil without intervals
	started atomic.Bool
	once    sync.Once
	lost    int64 // interval samples abandoned at Close
}

// errRejected marks a request the receiver refused for good (a 4xx other than 429).
var errRejected = errors.New("rejected by the receiver")

// New returns a Writer for a sinks entry of type remote_write; prefix is the run's metric
// prefix. With intervals on, Start starts the goroutine that sends them.
func New(spec config.SinkSpec, prefix string, log *slog.Logger) (*Writer, error) {
	set, err := ParseSettings(spec)
	if err != nil {
		return nil, err
	}
	return NewWithSettings(set, prefix, log), nil
}

// NewWithSettings is New with settings already parsed.
func NewWithSettings(set Settings, prefix string, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if prefix == "" {
		prefix = vllm.Prefix
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	w := &Writer{set: set, prefix: prefix, keys: set.Settings.Compile(prefix), log: log.With("sink", "remote_write", "url", set.URL),
		client: &http.Client{Transport: tr}, cache: map[string]*series{}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if set.Intervals {
		w.wake = make(chan struct{}, 1)
		w.drain = make(chan struct{})
		w.done = make(chan struct{})
	}
	return w
}

// Start starts the interval sender, when intervals are on; the sink runtime calls it once.
// Interval values given before Start wait in the buffer.
func (w *Writer) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done != nil && !w.closed && !w.started.Swap(true) {
		go w.loop()
	}
}

// Backoff is the retry delay for steps: min_backoff, doubling up to max_backoff.
func (w *Writer) Backoff() (first, max time.Duration) { return w.set.MinBackoff, w.set.MaxBackoff }

// Stats returns the Writer's counters, in samples: Queued interval samples waiting or in
// flight, Written samples accepted, Errors failed requests, Dropped samples given up (buffer
// full, rejected, or not sent by Close's deadline). A step the sink queue gives up on is
// counted in the queue's stats.
func (w *Writer) Stats() *sink.Stats { return &w.stats }

// Write sends r's samples at its end time. It returns an error (with the receiver's
// Retry-After, if any) at the first request that fails; the same record written again resumes
// after the batches already sent. Samples the receiver rejects are logged and counted as
// dropped, not retried.
func (w *Writer) Write(ctx context.Context, r *step.Record) error {
	var samples []sample
	t := r.End.UnixMilli()
	r = w.keys.Record(r, w.prefix)
	byTarget := w.stepTargetLabels(r)
	promname.WalkStep(w.prefix, r, func(name string, labels []promname.Label, v float64) {
		if byTarget != nil {
			labels = withLabels(labels, byTarget[targetOf(labels)]) // per-worker series only
		}
		samples = append(samples, sample{newSeries(name, labels, w.set.ExtraLabels), t, v})
	})
	start := 0
	if w.resume.ok && w.resume.step == r.Step && w.resume.end.Equal(r.End) {
		start = w.resume.sent
	}
	w.resume.ok = false
	for i := start; i < len(samples); i += w.set.BatchSize {
		j := min(i+w.set.BatchSize, len(samples))
		retryAfter, err := w.send(ctx, samples[i:j])
		if errors.Is(err, errRejected) {
			continue
		}
		if err != nil {
			w.resume.ok, w.resume.step, w.resume.end, w.resume.sent = true, r.Step, r.End, i
			return sink.RetryAfter(fmt.Errorf("remote write step %d: %w", r.Step, err), retryAfter)
		}
	}
	return nil
}

// Interval buffers iv's values for sending at its scrape time; it never blocks. Without
// intervals in the settings it does nothing.
func (w *Writer) Interval(iv step.Interval) {
	if w.done == nil {
		return
	}
	t := iv.TS.UnixMilli()
	tl := w.targetLabels(iv.TargetLabels)
	tlKey := labelsKey(tl)
	w.mu.Lock()
	n, dropped := 0, int64(0)
	promname.WalkInterval(w.prefix, &iv, func(name string, labels []promname.Label, v float64) {
		if w.closed || w.pending >= w.set.QueueSize {
			dropped++
			return
		}
		key := name + "\xff" + iv.Target + "\xff" + iv.Engine + "\xff" + iv.Labels + "\xff" + tlKey
		s := w.cache[key]
		if s == nil {
			if len(w.cache) >= 1<<20 {
				clear(w.cache) // targets come and go; keep the cache bounded
			}
			s = newSeries(name, withLabels(labels, tl), w.set.ExtraLabels)
			w.cache[key] = s
		}
		// A receiver takes one sample per series and millisecond (Prometheus rejects a second
		// one as a duplicate), and a boundary scrape can follow a tick's within a millisecond:
		// such a sample is stamped a millisecond after the previous one instead.
		st := max(t, s.last+1)
		s.last = st
		w.buf = append(w.buf, sample{s, st, v})
		w.pending++
		n++
	})
	w.mu.Unlock()
	w.stats.Queued.Add(int64(n))
	if dropped > 0 && w.stats.Dropped.Add(dropped) == dropped {
		w.log.Warn("interval buffer full; dropping samples", "queue_size", w.set.QueueSize)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// loop sends buffered interval samples, retrying a batch until it is delivered, rejected or
// Close's deadline passes.
func (w *Writer) loop() {
	defer close(w.done)
	var batch []sample
	for {
		w.mu.Lock()
		n := min(len(w.buf), w.set.BatchSize)
		batch = append(batch[:0], w.buf[:n]...)
		w.buf = append(w.buf[:0], w.buf[n:]...)
		w.mu.Unlock()
		if n == 0 {
			select {
			case <-w.wake:
				continue
			case <-w.drain:
				w.mu.Lock()
				empty := len(w.buf) == 0
				w.mu.Unlock()
				if empty {
					return
				}
				continue
			case <-w.ctx.Done():
				return
			}
		}
		err := w.sendIntervals(w.ctx, batch)
		if err != nil && !errors.Is(err, errRejected) { // Close's deadline passed
			w.mu.Lock()
			left := w.pending
			w.buf, w.pending = nil, 0
			w.mu.Unlock()
			w.stats.Queued.Add(-int64(left))
			w.stats.Dropped.Add(int64(left))
			w.lost = int64(left)
			return
		}
		w.mu.Lock()
		w.pending -= n
		w.mu.Unlock()
		w.stats.Queued.Add(-int64(n))
	}
}

// sendIntervals sends a batch of interval samples, retrying transient failures (network
// errors, 5xx, 429) with backoff until ctx ends. It logs the changes between failing and
// working once each.
func (w *Writer) sendIntervals(ctx context.Context, batch []sample) error {
	delay := w.set.MinBackoff
	for {
		retryAfter, err := w.send(ctx, batch)
		if err == nil || errors.Is(err, errRejected) {
			if err == nil && w.failing.Swap(false) {
				w.log.Info("remote write of interval samples recovered")
			}
			return err
		}
		if !w.failing.Swap(true) {
			w.log.Warn("remote write of interval samples failing; retrying with backoff", "err", err)
		}
		t := time.NewTimer(min(max(delay, retryAfter), w.set.MaxBackoff))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
		delay = min(2*delay, w.set.MaxBackoff)
	}
}

// send posts batch once and counts the outcome in the stats. A transient failure comes back
// with the delay the receiver asked for, if any.
func (w *Writer) send(ctx context.Context, batch []sample) (time.Duration, error) {
	body := snappy.Encode(nil, encode(nil, batch))
	n := int64(len(batch))
	retryAfter, err := w.post(ctx, body)
	switch {
	case err == nil:
		w.stats.Written.Add(n)
		w.rejecting.Store(false)
	case errors.Is(err, errRejected):
		w.stats.Dropped.Add(n)
		if !w.rejecting.Swap(true) {
			w.log.Error("remote write rejected; dropping the samples, not retrying", "samples", n, "err", err)
		}
	default:
		w.stats.Errors.Add(1)
	}
	return retryAfter, err
}

// post makes one request. It returns errRejected for an answer not worth retrying, and for a
// 429 or 503 the delay the receiver asked for.
func (w *Writer) post(ctx context.Context, body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, w.set.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.set.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errRejected, err)
	}
	for k, v := range w.set.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "vllmstat")
	switch {
	case w.set.Username != "":
		req.SetBasicAuth(w.set.Username, w.set.Password)
	case w.set.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+w.set.BearerToken)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	code := resp.StatusCode
	switch {
	case code/100 == 2:
		return 0, nil
	case code/100 == 5 || code == http.StatusTooManyRequests:
		var ra time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			ra = time.Duration(s) * time.Second
		}
		return ra, fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(msg))
	default:
		return 0, fmt.Errorf("%w: HTTP %s: %s", errRejected, resp.Status, bytes.TrimSpace(msg))
	}
}

// Close sends the interval samples still buffered until ctx's deadline, then abandons the rest
// (counted as dropped) and returns an error that says how many.
func (w *Writer) Close(ctx context.Context) error {
	var err error
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		if w.done != nil && !w.started.Load() {
			w.lost = int64(w.pending) // never started: nothing was sent
			w.stats.Queued.Add(-w.lost)
			w.stats.Dropped.Add(w.lost)
		}
		if w.done != nil && w.started.Load() {
			close(w.drain)
			select {
			case <-w.done:
			case <-ctx.Done():
				w.cancel()
				<-w.done
			}
		}
		w.cancel()
		w.client.CloseIdleConnections()
		if w.lost > 0 {
			err = fmt.Errorf("remote write %q: %d interval samples not sent before the deadline", w.set.URL, w.lost)
		}
	})
	return err
}
