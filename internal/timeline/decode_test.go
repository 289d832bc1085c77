package timeline

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
)

// randomFile is a timeline with values of every magnitude, for comparing the decoders.
func randomFile(rng *rand.Rand, workers int) *File {
	start := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	f := &File{Step: rng.Int64N(1e7), Start: start, End: start.Add(time.Duration(rng.Int64N(1e11))), Workers: []Worker{}}
	for w := range workers {
		wk := Worker{Target: "http://h" + strconv.Itoa(w) + ":8000/metrics", Engine: strconv.Itoa(w % 3), Series: map[string][]step.Point{}}
		if w%2 == 1 { // Ray's worker labels
			wk.Labels = map[string]string{"ReplicaId": "r" + strconv.Itoa(w), "WorkerId": strconv.FormatUint(rng.Uint64(), 16)}
		}
		if w%3 != 2 { // busy and idle time; never busy on every fourth
			busy, idle := float64(w%4)*rng.Float64(), rng.Float64()*10
			last := busy + idle/2
			wk.BusyS, wk.IdleS = &busy, &idle
			if busy > 0 {
				wk.LastBusyS = &last
			}
		}
		for _, name := range []string{"kv_cache_usage_perc", "generation_tokens", "num_preemptions", "empty"} {
			ps := []step.Point{}
			if name != "empty" {
				for range rng.IntN(30) {
					v := rng.Float64()
					switch rng.IntN(5) {
					case 0:
						v = math.Round(v * 1000)
					case 1:
						v *= math.Pow(10, float64(rng.IntN(60)-30))
					case 2:
						v = -v
					case 3:
						v = math.Floor(v*1e6) / 1e6
					}
					ps = append(ps, step.Point{OffsetS: float64(rng.Int64N(1e12)) / 1e9, Value: v})
				}
			}
			wk.Series[name] = ps
		}
		f.Workers = append(f.Workers, wk)
	}
	return f
}

func TestDecodeFastMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		data, err := Marshal(randomFile(rng, i%7))
		if err != nil {
			t.Fatal(err)
		}
		fast, err := decodeFast(data)
		if err != nil {
			t.Fatalf("file %d: fast decoder gave up: %v\n%s", i, err, data)
		}
		slow, err := decodeJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("file %d: decoders differ\n%s", i, data)
		}
	}
}

func TestDecodeFallsBack(t *testing.T) {
	for _, tt := range []struct{ name, in string }{
		{"indented", "{\n  \"step\": 3,\n  \"start\": \"2025-06-01T12:00:00Z\",\n  \"end\": \"2025-06-01T12:00:01Z\",\n  \"workers\": [ { \"target\": \"a\", \"engine\": \"\", \"series\": { \"x\": [ { \"v\": 2, \"t\": 1E0 } ] } } ]\n}"},
		{"escaped string", `{"step":3,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:01Z","workers":[{"target":"a\"b","engine":"","series":{}}]}`},
		{"escaped label", `{"step":3,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:01Z","workers":[{"target":"a","engine":"0","labels":{"ReplicaId":"r\"1"},"series":{}}]}`},
		{"activity twice", `{"step":3,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:01Z","workers":[{"target":"a","engine":"0","busy_s":1,"busy_s":2,"series":{}}]}`},
		{"another key", `{"step":3,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:01Z","workers":[],"note":"x"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Unmarshal([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			want, _ := decodeJSON([]byte(tt.in))
			if !reflect.DeepEqual(got, want) || got.Step != 3 {
				t.Errorf("Unmarshal = %+v, want %+v", got, want)
			}
		})
	}
	for _, bad := range []string{"", "{", `{"step":"x"}`, `{"workers":[{"series":{"x":[{"t":1,"v":}]}}]}`, `{"step":1} x`} {
		if _, err := Unmarshal([]byte(bad)); err == nil {
			t.Errorf("Unmarshal(%q) succeeded", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	golden, _ := os.ReadFile(filepath.Join("testdata", "step_000007.json"))
	f.Add(golden)
	f.Add([]byte(`{"step":1,"start":"2025-06-01T12:00:00Z","end":"2025-06-01T12:00:00Z","workers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ferr := decodeFast(data)
		if ferr != nil {
			return // encoding/json decides
		}
		slow, serr := decodeJSON(data)
		if serr != nil {
			t.Fatalf("fast decoder accepted what encoding/json rejects (%v): %q", serr, data)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decoders differ on %q:\n%+v\n%+v", data, fast, slow)
		}
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := randomFile(rng, 64)
	data, _ := Marshal(f)
	for _, d := range []struct {
		name string
		fn   func([]byte) (*File, error)
	}{{"fast", decodeFast}, {"encoding_json", decodeJSON}} {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.fn(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
