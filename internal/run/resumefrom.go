package run

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/appendlog"
)

// cutAfter cuts the out_dir's steps back to step n for a run resumed from n (resume_from): a
// trainer restarted from its checkpoint of step n ends step n+1 next, which a run continuing
// after the out_dir's last step would refuse, and the trackers would show the steps after n
// twice. The records of the steps after n go into files beside those that held them, first the
// sinks' (steps.csv.cut-<k>, the event files'), then steps.jsonl's (steps.jsonl.cut-<k>), each
// named in the log; nothing is thrown away. steps.jsonl is cut last, so that a run refused by a
// sink's cut leaves it as it was.
func cutAfter(stepsPath string, n int64, planned []plannedSink, log *slog.Logger) error {
	for _, ps := range planned {
		cuts, err := ps.p.CutAfter(n)
		for _, c := range cuts {
			log.Info("resuming from an earlier step: the steps after it were cut out of a sink's file, into a file beside it",
				"resume_from", n, "sink", ps.spec.Type, "file", c.File, "kept_in", c.Side, "records", c.Records)
		}
		if err != nil {
			return fmt.Errorf("resume from step %d: %s sink (%s): %w", n, ps.spec.Type, ps.spec.Path, err)
		}
	}
	side, lines, err := appendlog.CutLines(stepsPath, func(line []byte) bool {
		k, ok := lineStep(line)
		return ok && k > n
	})
	if err != nil {
		return fmt.Errorf("resume from step %d: %w", n, err)
	}
	if lines > 0 {
		log.Info("resuming from an earlier step: the steps after it were cut out of steps.jsonl, into a file beside it",
			"resume_from", n, "file", stepsPath, "kept_in", side, "records", lines)
	}
	return nil
}

// lineStep is the step of a steps.jsonl line that is a step record, as lastStep reads it.
func lineStep(line []byte) (int64, bool) {
	var rec struct {
		Step json.RawMessage `json:"step"`
	}
	if json.Unmarshal(line, &rec) != nil || len(rec.Step) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(rec.Step), 10, 64)
	return n, err == nil
}
