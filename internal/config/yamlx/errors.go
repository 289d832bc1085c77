// Package yamlx decodes YAML nodes into Go structs strictly, for vllmstat's configuration and
// its sinks' settings. Every problem is collected, not only the first, each with its key path
// relative to the decoded node and its line: an unknown key (with the keys allowed there and,
// for a likely typo, a "did you mean"), a key given twice in one mapping (which YAML decoders
// otherwise resolve silently, the last one winning), a value of the wrong kind or out of range.
//
// Fields are named by their yaml tags; fields without a tag are not read. A field's type may
// decode itself through yaml.v3's Unmarshaler (UnmarshalYAML(*yaml.Node) error): returning
// Errors reports problems at paths below the field, NotAllowed quotes the value. Types of other
// packages decode through Options.Hooks.
package yamlx

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem: where (a key path relative to the decoded node, "" for the node itself,
// and a line, 0 when unknown) and what.
type Error struct {
	Path string
	Line int
	Msg  string
}

// Errors are every problem of a decode. The zero value is no problem.
type Errors []Error

func (es Errors) Error() string { return strings.Join(es.Strings(""), "; ") }

// Strings renders each problem as "<prefix><path> (line N): <msg>".
func (es Errors) Strings(prefix string) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.At(prefix)
	}
	return out
}

// At renders e below prefix as "<prefix><path> (line N): <msg>".
func (e Error) At(prefix string) string {
	s := Join(prefix, e.Path)
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s + ": " + e.Msg
}

// In returns es with path put before each problem's path.
func (es Errors) In(path string) Errors {
	out := make(Errors, len(es))
	for i, e := range es {
		e.Path = Join(path, e.Path)
		out[i] = e
	}
	return out
}

// Join joins key paths: Join("sinks[1]", "dir") is "sinks[1].dir", Join("targets", "[0]") is
// "targets[0]".
func Join(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case prefix == "":
		return path
	case path[0] == '[':
		return prefix + path
	}
	return prefix + "." + path
}

// Problem is one problem at node n itself.
func Problem(n *yaml.Node, msg string) Errors { return Errors{{Line: line(n), Msg: msg}} }

// NotAllowed is the problem of a value that is not allowed, quoted, and what is allowed.
func NotAllowed(n *yaml.Node, allowed string) Errors {
	return Problem(n, Show(n)+" is not allowed: "+allowed)
}

// Show quotes a scalar and names any other node, for messages.
func Show(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// Where holds the value node of every key and list item a decode met, by key path
// ("basic_auth.password", "file_sd[1]"), for checks after the decode to name lines and values.
type Where map[string]*yaml.Node

// Has reports that path was given.
func (w Where) Has(path string) bool { return w[path] != nil }

// Line returns the line where path was given, or 0.
func (w Where) Line(path string) int { return line(w[path]) }

// NotAllowed is the problem of the value at path, quoted, and what is allowed; a path that was
// not given is named without a line.
func (w Where) NotAllowed(path string, v any, allowed string) Error {
	if n := w[path]; n != nil {
		return Error{Path: path, Line: n.Line, Msg: Show(n) + " is not allowed: " + allowed}
	}
	return Error{Path: path, Msg: fmt.Sprintf("%v is not allowed: %s", v, allowed)}
}

// Problem is a problem at path, with its line when it was given.
func (w Where) Problem(path, msg string) Error {
	return Error{Path: path, Line: w.Line(path), Msg: msg}
}
