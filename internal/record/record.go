// Package record reads and writes recordings: everything the scraper saw, as JSON Lines (gzip
// when the file name ends in .gz), so that replay can recompute the step records.
//
// The format is fixed; other tools produce and read it:
//
//	{"kind":"scrape","ts":"…","target":"http://h:8000/metrics","body":"<exposition text>"}
//	{"kind":"scrape","ts":"…","target":"…","error":"<why>"}
//	{"kind":"scrape","ts":"…","target":"…","error":"<why>","refused":true}
//	{"kind":"step","ts":"…","step":12}
//	{"kind":"gap","ts":"…","since":"…","events":340}
//	{"kind":"remove","ts":"…","target":"…"}
//	{"kind":"target","ts":"…","target":"…","labels":{"team":"a"}}
//	{"kind":"add","ts":"…","target":"…"}
//	{"kind":"start","ts":"…"}
//	{"kind":"start","ts":"…","resume_from":2}
//	{"kind":"phase","ts":"…","phase":"rollout","edge":"start"}
//	{"kind":"policy","ts":"…","version":12}
//	{"kind":"engine_version","ts":"…","target":"…","version":12}
//	{"kind":"engine_version","ts":"…","target":"…","worker_addr":"http://10.0.0.5:30000","version":12}
//
// Events are in time order. A failed scrape whose connection was refused (nothing listened on
// the target's port) says so (refused), and an add event marks a target added while the run
// ran, before its first scrape: a target there from the start whose every scrape was refused
// until its first page started its server during the run, and that page counts whole (see
// step.Refused); one added later does not. A gap event marks events the writer had to drop (its disk refused
// writes for longer than its memory could hold them): ts and since are the last and first
// dropped event's times. A remove event marks a target taken out of the run whose workers are
// forgotten: the run writes it once the target has been gone for its grace period (two scrape
// intervals; one back sooner goes on with its workers), so that if it comes back later its
// first scrape is a baseline, as it was live. A target
// event sets the labels discovery gave a target (none: no labels key), which its workers carry
// into per_worker records from then on. A start event, first in a segment, is when the run began
// collecting: its first step starts there, and a worker first seen later counts whole what it
// created after it (a segment without one, written by earlier versions, is replayed by the
// earlier rule: see step.Tracker.Begin); with resume_from, the run was resumed from that step
// and cut the steps after it out of steps.jsonl, so the earlier segments' steps after it are
// not the run's any more (see ResumedFrom). A phase event is a phase's start or end edge, at the
// moment it took effect. A policy event is the trainer's publish of a version of its weights, at
// the moment it took effect. An
// engine_version event is what a target's engine reported as its weight version, read right
// after its scrape of the same ts, as the collector resolved it (an engine's string such as
// "step-3" is the number it matched, and is not written): without version, it reports none
// (written only when it reported one before); with worker_addr, it is what the server a
// router's page names so reported (see step.Tracker.ServerVersion). Readers that do not know a
// kind skip it.
//
// A recording is never truncated: a run whose recording path exists writes the next segment
// (see SegmentPath), and each segment is one run.
package record

import (
	"encoding/json"
	"time"
)

// Event is one line of a recording.
type Event struct {
	Kind   string    `json:"kind"`
	TS     time.Time `json:"ts"`
	Target string    `json:"target,omitempty"`
	Body   *string   `json:"body,omitempty"`
	Error  string    `json:"error,omitempty"`
	// Refused is set on a failed scrape whose connection was refused.
	Refused bool      `json:"refused,omitempty"`
	Step    int64     `json:"step,omitempty"`
	Since   time.Time `json:"since,omitzero"`   // gap: the first dropped event's time
	Events  int64     `json:"events,omitempty"` // gap: how many events were dropped
	// Labels are a target event's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Phase and Edge are a phase event's phase name and EdgeStart or EdgeEnd.
	Phase string `json:"phase,omitempty"`
	Edge  string `json:"edge,omitempty"`
	// Version is a policy event's version, and an engine_version event's (nil: the engine
	// reports none).
	Version *int64 `json:"version,omitempty"`
	// WorkerAddr names, on an engine_version event of a router's page, the server whose version
	// it is.
	WorkerAddr string `json:"worker_addr,omitempty"`
	// ResumeFrom is set on the start event of a run resumed from a step (resume_from): that
	// run cut the steps after it out of steps.jsonl, and replay leaves them out of the segments
	// before it.
	ResumeFrom *int64 `json:"resume_from,omitempty"`
}

// TimeFormat is how ts is written: RFC 3339 in UTC, always with nine fractional digits, so that
// replay gets back the exact nanosecond the collector used.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// MarshalJSON writes ts (and since) in TimeFormat.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	var since string
	if !e.Since.IsZero() {
		since = e.Since.UTC().Format(TimeFormat)
	}
	return json.Marshal(struct {
		plain
		TS    string `json:"ts"`
		Since string `json:"since,omitempty"`
	}{plain(e), e.TS.UTC().Format(TimeFormat), since})
}

// Kinds of events.
const (
	KindScrape = "scrape"
	KindStep   = "step"
	KindGap    = "gap"
	KindRemove = "remove"
	KindTarget = "target"
	KindAdd    = "add"
	KindStart  = "start"
	KindPhase  = "phase"
	KindPolicy = "policy"
	// KindEngineVersion is an engine's reported weight version.
	KindEngineVersion = "engine_version"
)

// Edges of a phase event.
const (
	EdgeStart = "start"
	EdgeEnd   = "end"
)
