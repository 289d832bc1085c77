// Command stepend measures what a trainer waits for at vllmstat's step ends and phase edges: it
// plays a training loop against a running vllmstat's API (a rollout phase started and ended,
// then the step ended, a pause between each), times every call from request to answer, and
// prints p50, p90, p99 and the largest wait per kind of call as a markdown table.
//
//	stepend -api http://127.0.0.1:9400 -steps 30 [-pause 1s] [-phases=false] [-first N]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"time"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:9400", "vllmstat's API")
	steps := flag.Int("steps", 30, "steps to end")
	first := flag.Int("first", 1, "number of the first step to end")
	pause := flag.Duration("pause", time.Second, "time between two calls (the rollout, the training)")
	phases := flag.Bool("phases", true, "mark a rollout phase in every step")
	flag.Parse()
	waits := map[string][]time.Duration{}
	call := func(kind, path string, body any) {
		d, err := post(*api+path, body)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stepend: %s: %v\n", kind, err)
			os.Exit(1)
		}
		waits[kind] = append(waits[kind], d)
	}
	for k := *first; k < *first+*steps; k++ {
		if *phases {
			call("phase start", "/v1/phases/start", map[string]string{"phase": "rollout"})
			time.Sleep(*pause)
			call("phase end", "/v1/phases/end", map[string]string{"phase": "rollout"})
		}
		time.Sleep(*pause)
		call("step end", "/v1/steps/end", map[string]int{"step": k})
	}
	fmt.Println("| call | n | p50 ms | p90 ms | p99 ms | max ms |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, kind := range []string{"step end", "phase start", "phase end"} {
		ds := waits[kind]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		fmt.Printf("| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", kind, len(ds), ms(quantile(ds, 0.5)), ms(quantile(ds, 0.9)),
			ms(quantile(ds, 0.99)), ms(ds[len(ds)-1]))
	}
}

// post sends body as JSON and returns the time to the whole answer; an answer other than 200
// is an error.
func post(url string, body any) (time.Duration, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	return d, nil
}

// quantile is the nearest-rank quantile q of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
