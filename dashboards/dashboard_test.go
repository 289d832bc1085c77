// Package dashboards holds the Grafana dashboards for vllmstat's step series (vllmstat.json).
// Its tests check that each is a well-formed dashboard and run every panel's query, with the
// dashboard's variables set as a user would set them, against a real Prometheus that holds a
// simulated run both by remote write and by scraping vllmstat's /metrics, and against
// VictoriaMetrics holding it by remote write.
package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
	"github.com/vllmstat/vllmstat/internal/sim"
	"github.com/vllmstat/vllmstat/internal/sink/remotewrite"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

const dashboardFile = "vllmstat.json"

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	GraphTooltip  int     `json:"graphTooltip"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID            int       `json:"id"`
	Type          string    `json:"type"`
	Title         string    `json:"title"`
	Description   string    `json:"description"`
	Datasource    *dsRef    `json:"datasource"`
	PluginVersion string    `json:"pluginVersion"`
	Collapsed     bool      `json:"collapsed"`
	GridPos       gridPos   `json:"gridPos"`
	Targets       []target  `json:"targets"`
	Panels        []panel   `json:"panels"` // a row's panels while it is collapsed
	Options       xyOptions `json:"options"`
}

type gridPos struct{ X, Y, W, H int }

type target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat"`
	Datasource   *dsRef `json:"datasource"`
}

// xyOptions are the options of an XY chart that say which field is x.
type xyOptions struct {
	Mapping string `json:"mapping"`
	Series  []struct {
		X *struct {
			Matcher struct {
				ID      string `json:"id"`
				Options string `json:"options"`
			} `json:"matcher"`
		} `json:"x"`
	} `json:"series"`
}

type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Definition string `json:"definition"`
	Datasource *dsRef `json:"datasource"`
	IncludeAll bool   `json:"includeAll"`
	Multi      bool   `json:"multi"`
	AllValue   string `json:"allValue"`
}

func load(t *testing.T) *dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return &d
}

// queryPanels returns every panel that is not a row, the panels of collapsed rows included.
func (d *dashboard) queryPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func (d *dashboard) variable(name string) *variable {
	for i := range d.Templating.List {
		if d.Templating.List[i].Name == name {
			return &d.Templating.List[i]
		}
	}
	return nil
}

// builtins are Grafana's global variables a query may use.
var builtins = []string{"__interval", "__interval_ms", "__rate_interval", "__range", "__range_s", "__range_ms"}

// phased matches the families that a step's phases have too, with a phase label: the step's
// keys and its duration (not the step number, workers and scrapes, nor a worker's keys).
var phased = regexp.MustCompile(`vllmstat_step_(\$\{prefix\}|duration_seconds)`)

var varRef = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// refName is the variable a match of varRef names.
func refName(m []string) string { return m[1] + m[2] }

// TestDashboardIsValid checks the dashboard's form: a Prometheus data-source variable that
// every panel and query uses, the variables the queries name, unique panel ids, panels that fit
// the 24-column grid without overlapping, and XY charts whose x field is one of their queries.
func TestDashboardIsValid(t *testing.T) {
	d := load(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed", d.UID, d.Title)
	}
	if d.SchemaVersion < 41 {
		t.Errorf("schemaVersion %d: want the current schema (41 or later)", d.SchemaVersion)
	}
	if d.GraphTooltip != 2 {
		t.Errorf("graphTooltip %d: want 2, a shared tooltip, which shows the step number beside any chart's values", d.GraphTooltip)
	}
	ds := d.variable("datasource")
	if ds == nil || ds.Type != "datasource" || ds.Query != "prometheus" {
		t.Fatalf("no data-source variable of type prometheus: %+v", ds)
	}
	names := map[string]bool{}
	for _, v := range d.Templating.List {
		if names[v.Name] {
			t.Errorf("variable %s defined twice", v.Name)
		}
		names[v.Name] = true
		if v.Type != "query" {
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s: datasource %+v, want ${datasource}", v.Name, v.Datasource)
		}
		if _, _, err := labelValues(v); err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
		}
		if !v.IncludeAll || v.AllValue == "" {
			t.Errorf("variable %s: want All with a custom regex as its value", v.Name)
		}
	}
	for _, name := range []string{"job", "instance", "run", "phase", "prefix"} {
		if !names[name] {
			t.Errorf("no variable %s", name)
		}
	}
	known := func(name string) bool { return names[name] || slices.Contains(builtins, name) }

	ids := map[int]string{}
	checkID := func(p panel) {
		if p.ID <= 0 {
			t.Errorf("panel %q: id %d", p.Title, p.ID)
		}
		if other, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
	}
	for _, p := range d.Panels {
		checkID(p)
		for _, c := range p.Panels {
			checkID(c)
		}
		if p.Type == "row" && !p.Collapsed && len(p.Panels) > 0 {
			t.Errorf("row %q is open but holds panels: an open row's panels follow it", p.Title)
		}
	}
	panels := d.queryPanels()
	if len(panels) < 15 {
		t.Errorf("only %d panels", len(panels))
	}
	for _, p := range panels {
		if p.Type != "timeseries" && p.Type != "xychart" {
			t.Errorf("panel %q: type %q", p.Title, p.Type)
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q: both are needed", p.ID, p.Title, p.Description)
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the prometheus ${datasource}", p.Title, p.Datasource)
		}
		if p.PluginVersion == "" {
			// Grafana migrates the options of a panel without one from an older plugin's form
			// (the XY chart's would be lost).
			t.Errorf("panel %q: no pluginVersion", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no targets", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q %s: no expr", p.Title, tg.RefID)
			}
			if phased.MatchString(tg.Expr) && !strings.Contains(tg.Expr, `phase=~"|$phase"`) {
				t.Errorf("panel %q %s: a family that phases have, without the whole step and the chosen phases (phase=~\"|$phase\")", p.Title, tg.RefID)
			}
			if tg.Datasource == nil || *tg.Datasource != *p.Datasource {
				t.Errorf("panel %q %s: datasource %+v, want the panel's", p.Title, tg.RefID, tg.Datasource)
			}
			for _, m := range varRef.FindAllStringSubmatch(tg.Expr+" "+tg.LegendFormat, -1) {
				if !known(refName(m)) {
					t.Errorf("panel %q %s: unknown variable $%s", p.Title, tg.RefID, refName(m))
				}
			}
		}
		if p.Type == "xychart" {
			if p.Options.Mapping != "auto" || len(p.Options.Series) != 1 || p.Options.Series[0].X == nil {
				t.Errorf("panel %q: XY options %+v, want auto mapping with the x field named", p.Title, p.Options)
				continue
			}
			x := p.Options.Series[0].X.Matcher
			found := false
			for _, tg := range p.Targets {
				found = found || x.ID == "byName" && tg.LegendFormat == x.Options
			}
			if !found {
				t.Errorf("panel %q: x field %+v is none of the queries' legends", p.Title, x)
			}
		}
	}
	checkGrid(t, "the dashboard", d.Panels)
	for _, p := range d.Panels {
		if p.Type == "row" && p.Collapsed {
			checkGrid(t, "row "+p.Title, p.Panels)
			for _, c := range p.Panels {
				if c.GridPos.Y <= p.GridPos.Y {
					t.Errorf("panel %q of row %q at y %d, above its row (%d)", c.Title, p.Title, c.GridPos.Y, p.GridPos.Y)
				}
			}
		}
	}
}

// checkGrid checks that panels fit Grafana's 24 columns and that no two overlap.
func checkGrid(t *testing.T, where string, panels []panel) {
	t.Helper()
	taken := map[[2]int]string{}
	for _, p := range panels {
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("%s: panel %q at %+v does not fit 24 columns", where, p.Title, g)
			continue
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[[2]int{x, y}]; ok {
					t.Errorf("%s: panels %q and %q overlap at %d,%d", where, other, p.Title, x, y)
					return
				}
				taken[[2]int{x, y}] = p.Title
			}
		}
	}
}

// labelValuesRe reads a label_values(selector, label) variable query.
var labelValuesRe = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

func labelValues(v variable) (selector, label string, err error) {
	q, ok := v.Query.(string)
	if !ok {
		return "", "", fmt.Errorf("query %v: want the label_values(...) text", v.Query)
	}
	if v.Definition != "" && v.Definition != q {
		return "", "", fmt.Errorf("definition %q differs from the query %q", v.Definition, q)
	}
	m := labelValuesRe.FindStringSubmatch(q)
	if m == nil {
		return "", "", fmt.Errorf("query %q: want label_values(selector, label)", q)
	}
	return m[1], m[2], nil
}

// choice is a value of a dashboard variable as Grafana would put it into a query.
type choice struct {
	all    bool
	values []string
}

// interpolate replaces the variables in s as Grafana's Prometheus data source does: All becomes
// the variable's custom all value, as it is; chosen values of a multi-value variable are
// escaped for a regex and joined as (a|b); a single-value variable's value is put in as it is.
func interpolate(d *dashboard, s string, chosen map[string]choice, rng time.Duration) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := refName(varRef.FindStringSubmatch(ref))
		switch name {
		case "__interval", "__rate_interval":
			return "1s"
		case "__range":
			return fmt.Sprintf("%ds", int(rng.Seconds()))
		}
		v := d.variable(name)
		c, ok := chosen[name]
		if v == nil || !ok {
			return ref
		}
		if c.all {
			return v.AllValue
		}
		if !v.Multi && !v.IncludeAll {
			return c.values[0]
		}
		var esc []string
		for _, x := range c.values {
			esc = append(esc, promRegexEscape(x))
		}
		if len(esc) == 1 {
			return esc[0]
		}
		return "(" + strings.Join(esc, "|") + ")"
	})
}

var regexMeta = regexp.MustCompile(`[$^*{}\[\]+?.()|]`)

// promRegexEscape is Grafana's prometheusSpecialRegexEscape: a backslash becomes four, a regex
// metacharacter gets two before it (one escapes the other in the PromQL string).
func promRegexEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\\\`)
	return regexMeta.ReplaceAllString(s, `\\$0`)
}

func TestInterpolate(t *testing.T) {
	d := &dashboard{}
	d.Templating.List = []variable{
		{Name: "job", IncludeAll: true, Multi: true, AllValue: ".*"},
		{Name: "prefix", Type: "textbox"},
	}
	for _, tt := range []struct {
		name   string
		chosen map[string]choice
		want   string
	}{
		{"all", map[string]choice{"job": {all: true}, "prefix": {values: []string{"vllm"}}}, `vllmstat_step_vllm_x{job=~".*"}`},
		{"one", map[string]choice{"job": {values: []string{"127.0.0.1:9400"}}, "prefix": {values: []string{"vllm"}}}, `vllmstat_step_vllm_x{job=~"127\\.0\\.0\\.1:9400"}`},
		{"two", map[string]choice{"job": {values: []string{"a", "b"}}, "prefix": {values: []string{"vllm"}}}, `vllmstat_step_vllm_x{job=~"(a|b)"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := interpolate(d, `vllmstat_step_${prefix}_x{job=~"$job"}`, tt.chosen, time.Minute); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// simulate drives a simulated fleet of two servers with two engines each, the last a
// straggler, through steps of scrapes every 500 ms that end at end, as the collector would. Each
// step has a phase rollout over its first five scrapes and, every other step, a phase eval over
// the next two.
func simulate(t *testing.T, end time.Time) []step.Record {
	t.Helper()
	const steps, scrapes = 6, 8
	const interval = 500 * time.Millisecond
	cfg := sim.DefaultConfig()
	cfg.Servers, cfg.DP, cfg.Seed = 2, 2, 5
	cfg.Workload.StartDelay = 0
	cfg.Workload.Pause = 500 * time.Millisecond
	cfg.Workload.Prompts = 4
	cfg.Workload.OutputMedian = 100
	cfg.Workload.MaxTokens = 512
	cfg.Workload.Straggler = 2
	s, err := sim.NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := step.NewTracker(step.Options{Prefix: "vllm", PerWorker: true, Scalars: true})
	var targets []string
	for i := range cfg.Servers {
		targets = append(targets, fmt.Sprintf("http://sim-%d.test:8000/metrics", i))
	}
	start := end.Truncate(time.Millisecond).Add(-steps * scrapes * interval)
	tr.Begin(start)
	var recs []step.Record
	var at time.Duration
	for n := 1; n <= steps; n++ {
		tr.StartPhase("rollout", start.Add(at))
		for k := 1; k <= scrapes; k++ {
			at += interval
			s.AdvanceTo(at)
			for i, target := range targets {
				page, err := page.ParsePage(s.Page(i, start))
				if err != nil {
					t.Fatalf("parse simulated page: %v", err)
				}
				tr.Observe(start.Add(at+time.Duration(i)*time.Millisecond), target, page, nil)
			}
			edge := start.Add(at + time.Duration(len(targets))*time.Millisecond)
			switch {
			case k == 5:
				tr.EndPhase("rollout", edge)
				if n%2 == 0 {
					tr.StartPhase("eval", edge)
				}
			case k == 7:
				tr.EndPhase("eval", edge)
			}
		}
		recs = append(recs, tr.EndStep(int64(n), start.Add(at+time.Duration(len(targets))*time.Millisecond)))
	}
	return recs
}

// TestDashboardQueries loads a simulated run into a real Prometheus twice, by remote write
// (run label, steps at their end times) and by Prometheus scraping vllmstat's /metrics while
// the steps close one by one, then runs every query of every panel over the run's time range
// as Grafana would (see runPanels): with the variables at All, at the remote-written run, and at
// the scraped instance. The variables' own queries must list the job, instance, run and phases.
func TestDashboardQueries(t *testing.T) {
	t.Parallel()
	d := load(t)
	metrics := selfmetrics.New(selfmetrics.Options{})
	self := httptest.NewServer(metrics.Handler())
	defer self.Close()
	instance := strings.TrimPrefix(self.URL, "http://")
	prom, err := promtest.StartPrometheus(promtest.Job{Name: "vllmstat", Targets: []string{instance}, Interval: 200 * time.Millisecond})
	promtest.Require(t, err)
	defer prom.Close()

	recs := simulate(t, time.Now())
	remoteWrite(t, prom.RemoteWriteURL(), recs)
	for i := range recs {
		metrics.StepClosed(&recs[i])
		waitScraped(t, prom, recs[i].Step)
	}
	start, end := recs[0].Start.Add(-time.Second), time.Now()
	runPanels(t, d, prom.Server, []source{
		{"all", nil, "", ""},
		{"remote-written run", map[string]choice{"run": {values: []string{runID}}}, "run", runID},
		{"scraped instance", map[string]choice{"instance": {values: []string{instance}}}, "instance", instance},
	}, start, end)
	checkVariables(t, d, prom.Server, map[string][]string{
		"job": {"vllmstat"}, "instance": {instance}, "run": {runID}, "phase": {"eval", "rollout"},
	}, start, end)
}

// TestDashboardQueriesVictoriaMetrics runs every panel's query against VictoriaMetrics holding
// the remote-written run, as TestDashboardQueries does against Prometheus: the dashboard's
// PromQL is also MetricsQL.
func TestDashboardQueriesVictoriaMetrics(t *testing.T) {
	t.Parallel()
	d := load(t)
	vm, err := promtest.StartVictoriaMetrics()
	promtest.Require(t, err)
	defer vm.Close()
	recs := simulate(t, time.Now())
	remoteWrite(t, vm.URL+"/api/v1/write", recs)
	if err := promtest.Flush(t.Context(), vm); err != nil {
		t.Fatal(err)
	}
	start, end := recs[0].Start.Add(-time.Second), recs[len(recs)-1].End.Add(time.Second)
	runPanels(t, d, vm, []source{
		{"all", nil, "", ""},
		{"remote-written run", map[string]choice{"run": {values: []string{runID}}}, "run", runID},
	}, start, end)
	checkVariables(t, d, vm, map[string][]string{"job": {"vllmstat"}, "run": {runID}, "phase": {"eval", "rollout"}}, start, end)
}

// runID is the run label of the remote-written steps.
const runID = "dashboard-test"

// remoteWrite sends recs to url by the remote-write sink, with extra labels job and run.
func remoteWrite(t *testing.T, url string, recs []step.Record) {
	t.Helper()
	set := remotewrite.DefaultSettings()
	set.URL = url
	set.ExtraLabels = []promname.Label{{Name: "job", Value: "vllmstat"}, {Name: "run", Value: runID}}
	rw := remotewrite.NewWithSettings(set, "vllm", nil)
	for i := range recs {
		if err := rw.Write(t.Context(), &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := rw.Stats(); st.Dropped.Load() != 0 || st.Errors.Load() != 0 {
		t.Fatalf("remote write dropped %d samples, %d requests failed", st.Dropped.Load(), st.Errors.Load())
	}
}

// source is a choice of the variables that selects one source of step series: every series a
// query returns must have label with value ("" for any).
type source struct {
	name         string
	chosen       map[string]choice // the rest at All
	label, value string
}

// runPanels runs every query of every panel as a range query over [start, end], for each
// source with all phases and with phase rollout. Every query must succeed and return series,
// only of the chosen source; with phase rollout, a query of a family that phases have must
// return both the whole step's series and the phase's, and no other phase's.
func runPanels(t *testing.T, d *dashboard, srv *promtest.Server, sources []source, start, end time.Time) {
	t.Helper()
	// Each step is on /metrics for a few scrapes only, far shorter than in a real run: the
	// queries are evaluated often enough to see every one.
	const queryStep = 100 * time.Millisecond
	queries := 0
	for _, src := range sources {
		for _, phase := range []choice{{all: true}, {values: []string{"rollout"}}} {
			chosen := map[string]choice{"job": {all: true}, "instance": {all: true}, "run": {all: true},
				"prefix": {values: []string{"vllm"}}, "phase": phase}
			maps.Copy(chosen, src.chosen)
			name := src.name + ", phase " + strings.Join(phase.values, "|")
			if phase.all {
				name = src.name + ", all phases"
			}
			t.Run(name, func(t *testing.T) {
				for _, p := range d.queryPanels() {
					for _, tg := range p.Targets {
						q := interpolate(d, tg.Expr, chosen, end.Sub(start))
						series, err := promtest.QueryRange(t.Context(), srv, q, start, end, queryStep)
						queries++
						if err != nil {
							t.Errorf("panel %q %s: %v\n%s", p.Title, tg.RefID, err, q)
							continue
						}
						if len(series) == 0 {
							t.Errorf("panel %q %s: no series\n%s", p.Title, tg.RefID, q)
							continue
						}
						for _, s := range series {
							if src.label != "" && s.Metric[src.label] != src.value {
								t.Errorf("panel %q %s: series %v is not of %s=%q", p.Title, tg.RefID, s.Metric, src.label, src.value)
								break
							}
						}
						if !phase.all {
							checkPhases(t, p.Title+" "+tg.RefID, series, strings.Contains(tg.Expr, "$phase"))
						}
					}
				}
			})
		}
	}
	t.Logf("%d queries over %s", queries, end.Sub(start).Round(time.Second))
}

// checkVariables runs the variables' queries, as Grafana does with the other variables at All,
// and compares the values they find with wants (none where wants has no entry).
func checkVariables(t *testing.T, d *dashboard, srv *promtest.Server, wants map[string][]string, start, end time.Time) {
	t.Helper()
	all := map[string]choice{"job": {all: true}, "instance": {all: true}, "run": {all: true}, "phase": {all: true}, "prefix": {values: []string{"vllm"}}}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		sel, label, err := labelValues(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := labelValuesOf(t.Context(), srv, interpolate(d, sel, all, end.Sub(start)), label, start, end)
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		if !slices.Equal(got, wants[v.Name]) {
			t.Errorf("variable %s: values %q, want %q", v.Name, got, wants[v.Name])
		}
	}
}

// checkPhases checks a query's series with phase rollout chosen: a query of a family that
// phases have returns the whole step's series and rollout's, and no other phase's; any other
// returns no phase's.
func checkPhases(t *testing.T, what string, series []promtest.Series, phased bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, s := range series {
		seen[s.Metric["phase"]] = true
	}
	if phased && (!seen["whole step"] || !seen["rollout"] || len(seen) != 2) {
		t.Errorf("%s: phases %v, want the whole step and rollout", what, seen)
	}
	if !phased && (!seen[""] || len(seen) != 1) {
		t.Errorf("%s: phases %v, want none", what, seen)
	}
}

// waitScraped waits until Prometheus has scraped /metrics showing step n.
func waitScraped(t *testing.T, prom *promtest.Prometheus, n int64) {
	t.Helper()
	var s []promtest.Series
	var err error
	if !testkit.Poll(30*time.Second, func() bool {
		s, err = promtest.Query(t.Context(), prom.Server, `vllmstat_step_number{job="vllmstat", run=""}`, time.Now())
		return err == nil && len(s) == 1 && s[0].Samples[0].V == float64(n)
	}) {
		t.Fatalf("Prometheus did not scrape step %d in 30s (%v, %v): %s", n, s, err, prom.Output())
	}
}

// labelValuesOf asks the server for the values of label among the series that match sel, as
// Grafana's label_values(sel, label) does.
func labelValuesOf(ctx context.Context, srv *promtest.Server, sel, label string, start, end time.Time) ([]string, error) {
	v := url.Values{"match[]": {sel}, "start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(end.Unix() + 1)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/label/"+label+"/values?"+v.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Data   []string `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Status != "success" {
		return nil, fmt.Errorf("label values of %s for %s: %v %s: %.200s", label, sel, err, out.Error, b)
	}
	sort.Strings(out.Data)
	return out.Data, nil
}

// importable is what Grafana's import reads of a dashboard shared as a file: the inputs it asks
// for (a data source) and what the dashboard requires.
type importable struct {
	Inputs []struct {
		Name     string `json:"name"`
		Label    string `json:"label"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Requires []struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"__requires"`
}

// inputRef is a ${NAME} in the dashboard's text, which Grafana's import replaces by the value
// of the input NAME.
var inputRef = regexp.MustCompile(`\$\{(\w+)\}`)

// TestDashboardImport checks the dashboard as Grafana's import reads it: it asks for one
// Prometheus data source, which the data-source variable starts at and so every panel uses;
// every ${NAME} is an input, a variable or one of Grafana's own; and it requires a Grafana at
// least as new as its panels' form, the panel types it has and the Prometheus data source.
func TestDashboardImport(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var im importable
	if err := json.Unmarshal(raw, &im); err != nil {
		t.Fatal(err)
	}
	d := load(t)
	if len(im.Inputs) != 1 || im.Inputs[0].Type != "datasource" || im.Inputs[0].PluginID != "prometheus" || im.Inputs[0].Name == "" || im.Inputs[0].Label == "" {
		t.Fatalf("__inputs %+v: want one input of a prometheus data source, named and labelled", im.Inputs)
	}
	in := im.Inputs[0].Name

	// Every ${NAME} is the input, a variable or Grafana's.
	used := false
	for _, m := range inputRef.FindAllStringSubmatch(string(raw), -1) {
		switch name := m[1]; {
		case name == in:
			used = true
		case d.variable(name) != nil, slices.Contains(builtins, name):
		default:
			t.Errorf("${%s} is neither the input %s, a variable nor Grafana's", name, in)
		}
	}
	if !used {
		t.Errorf("the input %s is used nowhere", in)
	}

	// The import replaces ${input} everywhere by the data source chosen; the data-source
	// variable then starts at it, and every panel and query follows the variable.
	const chosen = "chosen-prometheus-uid"
	var imported struct {
		Templating struct {
			List []struct {
				Name    string `json:"name"`
				Current struct {
					Value any `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "${"+in+"}", chosen)), &imported); err != nil {
		t.Fatal(err)
	}
	var current any
	for _, v := range imported.Templating.List {
		if v.Name == "datasource" {
			current = v.Current.Value
		}
	}
	if current != chosen {
		t.Errorf("after import, the data-source variable starts at %v, want the data source chosen (%s)", current, chosen)
	}
	for _, p := range d.queryPanels() {
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the data-source variable", p.Title, p.Datasource)
		}
	}

	// What it requires.
	req := map[string]string{}
	for _, r := range im.Requires {
		if r.Name == "" {
			t.Errorf("__requires %+v: no name", r)
		}
		req[r.Type+"/"+r.ID] = r.Version
	}
	least, ok := req["grafana/grafana"]
	if !ok || version(least) == nil {
		t.Fatalf("__requires %+v: want Grafana with a minimum version", im.Requires)
	}
	if _, ok := req["datasource/prometheus"]; !ok {
		t.Errorf("__requires %+v: want the prometheus data source", im.Requires)
	}
	for _, p := range d.queryPanels() {
		if _, ok := req["panel/"+p.Type]; !ok {
			t.Errorf("__requires lacks the panel type %s (panel %q)", p.Type, p.Title)
		}
		// A panel saved in a newer Grafana's form than the minimum may hold options an older one
		// does not know.
		if slices.Compare(version(p.PluginVersion), version(least)) > 0 {
			t.Errorf("panel %q is of Grafana %s, newer than the minimum required, %s", p.Title, p.PluginVersion, least)
		}
	}
}

// version is a version "12.2.0" as numbers, nil when it is not one.
func version(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}
