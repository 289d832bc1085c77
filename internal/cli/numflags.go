package cli

import (
	"flag"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/decimal"
)

// decimalNumbers makes the number flags of fs read decimal only while fs parses, and returns
// the function that puts them back. The flag package reads a whole number with strconv's base
// 0, so --resume-from 010 was step 8 and cut steps 9 and 10 of a run resumed from its
// checkpoint 010; it reads a float with strconv.ParseFloat, so --interval nan and 0x1p-1 were
// numbers. Here a whole number is decimal digits, leading zeros decimal, a 0x, 0b or 0o prefix
// refused; a number is finite and decimal. The flags keep their own types outside parsing, so
// that the help names their kinds (int, float) as the flag package does.
func decimalNumbers(fs *flag.FlagSet) (restore func()) {
	var undo []func()
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var read func(string) (string, error)
		switch g.Get().(type) {
		case int:
			read = func(s string) (string, error) { return wholeText(decimal.ParseInt(s, strconv.IntSize)) }
		case int64:
			read = func(s string) (string, error) { return wholeText(decimal.ParseInt(s, 64)) }
		case float64:
			read = func(s string) (string, error) {
				x, err := decimal.ParseFloat(s)
				return strconv.FormatFloat(x, 'g', -1, 64), err
			}
		default:
			return
		}
		orig := f.Value
		f.Value = decimalValue{Value: orig, read: read}
		undo = append(undo, func() { f.Value = orig })
	})
	return func() {
		for _, u := range undo {
			u()
		}
	}
}

// decimalValue is a flag's value that is given the number read, written in plain decimal
// digits, which base 0 reads as decimal too.
type decimalValue struct {
	flag.Value
	read func(string) (string, error)
}

func (v decimalValue) Set(s string) error {
	t, err := v.read(s)
	if err != nil {
		return err
	}
	return v.Value.Set(t)
}

func wholeText(n int64, err error) (string, error) { return strconv.FormatInt(n, 10), err }
