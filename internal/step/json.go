package step

import (
	"bytes"
	"encoding/json"
)

// MarshalLine encodes r as one JSON line (with the trailing newline), the form of steps.jsonl
// and of replay's output. Map keys come out sorted, so equal records give equal bytes.
func MarshalLine(r *Record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
