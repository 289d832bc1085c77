package target

import (
	"fmt"
	"io"
	"log/slog"
)

// Secret holds a credential. It prints, logs and encodes as "<secret>" whatever the verb or
// encoder; Reveal is the only way to its value. The value sits behind a pointer so that even
// reflection-based printing of a struct holding a Secret in an unexported field shows an
// address, not the value.
type Secret struct{ v *string }

// NewSecret returns a Secret holding s.
func NewSecret(s string) Secret { return Secret{v: &s} }

// Reveal returns the value, for the one place that sends it.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

const redacted = "<secret>"

// Format writes "<secret>" for every verb (%v, %+v, %#v, %s, %q, %x, ...).
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// String returns "<secret>".
func (Secret) String() string { return redacted }

// GoString returns "<secret>".
func (Secret) GoString() string { return redacted }

// MarshalJSON encodes "<secret>".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText encodes "<secret>".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue logs "<secret>".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }
