package yamlx

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/decimal"
)

// Hook decodes n into dst, a value of a type that cannot carry an UnmarshalYAML method (another
// package's). Its error is reported as an UnmarshalYAML's is.
type Hook func(n *yaml.Node, dst reflect.Value) error

// HookFor makes a Hook for type T from a function that builds a T.
func HookFor[T any](f func(n *yaml.Node) (T, error)) (reflect.Type, Hook) {
	return reflect.TypeFor[T](), func(n *yaml.Node, dst reflect.Value) error {
		v, err := f(n)
		if err == nil {
			dst.Set(reflect.ValueOf(v))
		}
		return err
	}
}

// Options change a decode.
type Options struct {
	// Ignore are keys of the top mapping that are allowed but not read (a sink entry's type,
	// which chose the sink). They are listed first among the allowed keys.
	Ignore []string
	// Open ignores unknown keys of the top mapping, for sections shared with another program.
	Open bool
	// Hooks decode the types of other packages.
	Hooks map[reflect.Type]Hook
}

// UnknownKeyer is implemented by a struct that words its own unknown-key problem: the text
// before the list of its keys, e.g. "unknown setting of a tensorboard sink: the settings are".
type UnknownKeyer interface{ UnknownKey() string }

// Exampler is implemented by a struct that shows what a mapping of it looks like, for the
// problem of a value that is not a mapping, e.g. "{type: tensorboard, images: false}".
type Exampler interface{ YAMLExample() string }

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	durationType    = reflect.TypeFor[time.Duration]()
	nodePtrType     = reflect.TypeFor[*yaml.Node]()
)

// Decode reads node n into out, a pointer to a struct whose fields hold the defaults. It returns
// where every key and item was given, and every problem; a value with a problem leaves its
// field as it was.
func Decode(n *yaml.Node, out any, o Options) (Where, Errors) {
	d := &decoder{o: o, where: Where{}}
	v := reflect.ValueOf(out)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("yamlx.Decode: out is a %T, want a non-nil pointer", out))
	}
	d.value(n, v.Elem(), "", field{}, true)
	return d.where, d.errs
}

type decoder struct {
	o     Options
	where Where
	errs  Errors
}

// field is what a struct field's tags say about its value.
type field struct {
	key    string
	index  []int
	want   string // "must be <want>" for a value of the wrong kind (tag want)
	item   string // the same for each item of a list (tag item)
	secret bool   // never quote the value (tag secret:"true")
}

func (d *decoder) add(path string, n *yaml.Node, msg string) {
	d.errs = append(d.errs, Error{Path: path, Line: line(n), Msg: msg})
}

// fail reports err of a type's own decoding at path.
func (d *decoder) fail(path string, n *yaml.Node, err error) {
	var es Errors
	if errors.As(err, &es) {
		d.errs = append(d.errs, es.In(path)...)
		return
	}
	d.add(path, n, err.Error())
}

// notAllowed reports a value of the right kind that is not allowed; f.secret hides it.
func (d *decoder) notAllowed(path string, n *yaml.Node, f field, allowed string) {
	switch {
	case f.want != "":
		d.add(path, n, "must be "+f.want)
	case f.secret:
		d.add(path, n, allowed+" (its value is not shown)")
	default:
		d.add(path, n, Show(n)+" is not allowed: "+allowed)
	}
}

// value decodes n into v and reports whether it did.
func (d *decoder) value(n *yaml.Node, v reflect.Value, path string, f field, top bool) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if path != "" {
		d.where[path] = n
	}
	t := v.Type()
	if h, ok := d.o.Hooks[t]; ok {
		if err := h(n, v); err != nil {
			d.fail(path, n, err)
			return false
		}
		return true
	}
	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.fail(path, n, err)
			return false
		}
		return true
	}
	switch t {
	case durationType:
		x, err := ParseDuration(n)
		if err != nil {
			d.notAllowed(path, n, f, err.Error())
			return false
		}
		v.SetInt(int64(x))
		return true
	case nodePtrType:
		v.Set(reflect.ValueOf(n))
		return true
	}
	scalar := n.Kind == yaml.ScalarNode
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if !v.IsNil() {
			p.Elem().Set(v.Elem())
		}
		ok := d.value(n, p.Elem(), path, f, top)
		// A mapping read with a problem still holds its other keys, for later checks.
		if ok || (t.Elem().Kind() == reflect.Struct && n.Kind == yaml.MappingNode) {
			v.Set(p)
		}
		return ok
	case reflect.Struct:
		return d.mapping(n, v, path, f, top)
	case reflect.Bool:
		var b bool
		if !scalar || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.notAllowed(path, n, f, "must be true or false")
			return false
		}
		v.SetBool(b)
		return true
	case reflect.String:
		if !scalar || n.Tag == "!!null" {
			d.notAllowed(path, n, f, "must be a string")
			return false
		}
		v.SetString(n.Value)
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		// The digits are read here, not by the YAML library, which reads 010 as octal 8 and 08
		// as a float: a step number is decimal (see package decimal).
		if !scalar || (n.Tag != "!!int" && n.Tag != "!!float") {
			d.notAllowed(path, n, f, "must be a whole number")
			return false
		}
		x, err := decimal.ParseInt(n.Value, 64)
		if err == nil && v.OverflowInt(x) {
			err = fmt.Errorf("must be a whole number of at most %d bits", t.Bits())
		}
		if err != nil {
			d.notAllowed(path, n, f, err.Error())
			return false
		}
		v.SetInt(x)
		return true
	case reflect.Float32, reflect.Float64:
		if !scalar || (n.Tag != "!!int" && n.Tag != "!!float") {
			d.notAllowed(path, n, f, "must be a number")
			return false
		}
		var x float64
		if n.Tag == "!!int" {
			i, err := decimal.ParseInt(n.Value, 64)
			if err != nil {
				d.notAllowed(path, n, f, err.Error())
				return false
			}
			x = float64(i)
		} else if n.Decode(&x) != nil {
			d.notAllowed(path, n, f, "must be a number")
			return false
		}
		// YAML reads .inf and .nan as numbers; no setting means them.
		if math.IsInf(x, 0) || math.IsNaN(x) {
			d.notAllowed(path, n, f, "must be a finite number (not .inf or .nan)")
			return false
		}
		v.SetFloat(x)
		return true
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.kind(path, n, f, "a list")
			return false
		}
		s := reflect.MakeSlice(t, 0, len(n.Content))
		ok := true
		for i, e := range n.Content {
			x := reflect.New(t.Elem()).Elem()
			if d.value(e, x, fmt.Sprintf("%s[%d]", path, i), field{want: f.item, secret: f.secret}, false) {
				s = reflect.Append(s, x)
			} else {
				ok = false
			}
		}
		v.Set(s)
		return ok
	case reflect.Map:
		if n.Kind != yaml.MappingNode || t.Key().Kind() != reflect.String {
			d.kind(path, n, f, "a mapping")
			return false
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		ok := d.duplicates(n, path)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, e := n.Content[i], n.Content[i+1]
			if m.MapIndex(reflect.ValueOf(k.Value).Convert(t.Key())).IsValid() {
				continue // reported by duplicates; the first one is read
			}
			x := reflect.New(t.Elem()).Elem()
			if d.value(e, x, Join(path, k.Value), field{secret: f.secret}, false) {
				m.SetMapIndex(reflect.ValueOf(k.Value).Convert(t.Key()), x)
			} else {
				ok = false
			}
		}
		v.Set(m)
		return ok
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.notAllowed(path, n, f, err.Error())
			return false
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
		return true
	}
	panic(fmt.Sprintf("yamlx: cannot decode into %v at %q", t, path))
}

// kind reports a node of the wrong kind: a list or mapping where another is needed.
func (d *decoder) kind(path string, n *yaml.Node, f field, want string) {
	if f.want != "" {
		want = f.want
	}
	d.add(path, n, "must be "+want)
}

// mapping decodes a mapping into struct v.
func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string, f field, top bool) bool {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		want := "a mapping"
		if ex, ok := reflect.New(t).Interface().(Exampler); ok {
			want += " such as " + ex.YAMLExample()
		}
		d.kind(path, n, f, want)
		return false
	}
	fields := fieldsOf(t)
	ok := d.duplicates(n, path)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, e := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(path, k, "a key must be a name, not "+Show(k))
			ok = false
			continue
		}
		if seen[k.Value] {
			continue // reported by duplicates; the first one is read
		}
		seen[k.Value] = true
		kp := Join(path, k.Value)
		fl, found := fields[k.Value]
		switch {
		case found:
			if !d.value(e, v.FieldByIndex(fl.index), kp, fl, false) {
				ok = false
			}
		case top && contains(d.o.Ignore, k.Value):
			d.where[kp] = e
		case top && d.o.Open:
		default:
			d.add(kp, k, unknownKey(t, k.Value, keysOf(t, top, d.o.Ignore)))
			ok = false
		}
	}
	return ok
}

// duplicates reports every key given twice in mapping n, naming both lines.
func (d *decoder) duplicates(n *yaml.Node, path string) bool {
	es := Duplicates(n)
	d.errs = append(d.errs, es.In(path)...)
	return len(es) == 0
}

// Duplicates returns a problem for every key of mapping n given again, naming both lines.
func Duplicates(n *yaml.Node) Errors {
	var es Errors
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if l, dup := first[k.Value]; dup {
			es = append(es, Error{Path: k.Value, Line: k.Line,
				Msg: fmt.Sprintf("is given twice, at lines %d and %d: give a key once in a mapping", l, k.Line)})
			continue
		}
		first[k.Value] = k.Line
	}
	return es
}

func unknownKey(t reflect.Type, key string, keys []string) string {
	lead := "unknown key; the keys here are"
	if u, ok := reflect.New(t).Interface().(UnknownKeyer); ok {
		lead = u.UnknownKey()
	}
	msg := lead + " " + strings.Join(keys, ", ")
	if s := Suggest(key, keys); s != "" {
		msg += "; did you mean " + s + "?"
	}
	return msg
}

// fieldsOf maps the yaml keys of struct t to its fields, inline structs' keys included.
func fieldsOf(t reflect.Type) map[string]field {
	m := map[string]field{}
	for _, f := range fieldList(t, nil) {
		m[f.key] = f
	}
	return m
}

// keysOf lists the keys of struct t in field order, after the ignored ones at the top.
func keysOf(t reflect.Type, top bool, ignore []string) []string {
	var keys []string
	if top {
		keys = append(keys, ignore...)
	}
	for _, f := range fieldList(t, nil) {
		keys = append(keys, f.key)
	}
	return keys
}

func fieldList(t reflect.Type, index []int) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("yaml")
		if !ok || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		idx := append(index[:len(index):len(index)], i)
		if opts == "inline" && sf.Type.Kind() == reflect.Struct {
			out = append(out, fieldList(sf.Type, idx)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		out = append(out, field{key: name, index: idx, want: sf.Tag.Get("want"), item: sf.Tag.Get("item"), secret: sf.Tag.Get("secret") == "true"})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// durationRule says what a duration may be.
const durationRule = "must be a duration such as 30s, 500ms or 1m, or a number of seconds"

// ParseDuration reads a duration >= 0: a Go duration ("30s", "1m30s") or a number of seconds.
func ParseDuration(n *yaml.Node) (time.Duration, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f >= 0 && f*float64(time.Second) < math.MaxInt64 {
			return time.Duration(f * float64(time.Second)), nil
		}
		if x, err := time.ParseDuration(n.Value); err == nil && x >= 0 {
			return x, nil
		}
	}
	return 0, errors.New(durationRule)
}
