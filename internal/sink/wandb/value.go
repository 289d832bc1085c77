package wandb

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// jsonFloat writes v as the W&B SDK writes numbers in value_json: the shortest decimal that
// reads back to the same float64, and NaN, Infinity and -Infinity, which W&B's JSON reader
// accepts, for the values plain JSON has no word for. Plain notation is used between 1e-6
// and 1e21, as JavaScript prints numbers, so that the UI shows what it would have been sent.
func jsonFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.FormatFloat(v, 'e', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// seconds is t in Unix seconds, as _timestamp holds it.
func seconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// plotKey names a plot's history key after its file: "plots/kv_cache_usage_perc" for
// ".../kv_cache_usage_perc.png", as the TensorBoard sink tags it.
func plotKey(path string) string {
	return "plots/" + plotName(path)
}

func plotName(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// mediaName is the file name of a copied plot, as the W&B SDK names media files:
// <key>_<step>_<first 20 hex digits of the SHA-256>.png, with the key reduced to characters
// safe in a file name.
func mediaName(path string, step int64, sha string) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			return r
		}
		return '_'
	}, plotName(path))
	return name + "_" + strconv.FormatInt(step, 10) + "_" + sha[:20] + ".png"
}
