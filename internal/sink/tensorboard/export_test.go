package tensorboard

import (
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// PythonRead lets the end-to-end test (package tensorboard_test) use the independent reader.
func PythonRead(t *testing.T, path string) []PyEvent { return pythonRead(t, path) }

// PyEvent is an event as the independent reader prints it.
type PyEvent = pyEvent

// ReadSteps lets the end-to-end test read the run's steps.jsonl as the other tests do.
func ReadSteps(t *testing.T, path string) []*step.Record { return readSteps(t, path) }
