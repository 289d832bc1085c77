package selfmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllmstat/vllmstat/internal/sink"
)

// AddStepsFile exposes the counters of steps.jsonl's writer: steps waiting in memory for the
// disk, failed writes, and steps given up, which a run never loses silently.
func (m *Metrics) AddStepsFile(st *sink.Stats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vllmstat_steps_pending_write",
			Help: "Closed steps waiting in memory because steps.jsonl refused writes (a full disk); written at the next step close that succeeds."},
			func() float64 { return float64(st.Queued.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "vllmstat_steps_write_errors_total",
			Help: "Failed writes to steps.jsonl (each one cut back, the step kept for a retry)."},
			func() float64 { return float64(st.Errors.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "vllmstat_steps_unwritten_total",
			Help: "Closed steps that will never be in steps.jsonl: dropped beyond the memory bound while it refused writes, or still unwritten at exit."},
			func() float64 { return float64(st.Dropped.Load()) }),
	)
}

// AddRecording exposes the counters of the recording's writer, in events.
func (m *Metrics) AddRecording(st *sink.Stats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vllmstat_recording_events_pending",
			Help: "Recorded events waiting in memory to be written to the recording."},
			func() float64 { return float64(st.Queued.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "vllmstat_recording_write_errors_total",
			Help: "Failed writes to the recording (each one cut back, the events kept for a retry)."},
			func() float64 { return float64(st.Errors.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "vllmstat_recording_events_dropped_total",
			Help: "Recorded events lost: dropped beyond the memory bound (a gap event marks them) or still unwritten at exit."},
			func() float64 { return float64(st.Dropped.Load()) }),
	)
}
