package tensorboard

import "testing"

// PythonRead lets the end-to-end test (package tensorboard_test) use the independent reader.
func PythonRead(t *testing.T, path string) []PyEvent { return pythonRead(t, path) }

// PyEvent is an event as the independent reader prints it.
type PyEvent = pyEvent
