// Package plot draws a step's timelines as PNG images, one per metric, and runs that drawing on
// its own goroutine (Stage) so that closing a step never waits for it.
package plot

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"path"
	"path/filepath"
	"slices"

	"git.sr.ht/~sbinet/gg"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// Dir is the folder of the images inside OUT_DIR.
const Dir = "plots"

// Options size the images.
type Options struct {
	// Width and Height are the image's size in pixels; 0 means 800 by 400.
	Width, Height int
	// MaxLines is how many workers are drawn one line each; a larger fleet is drawn as a
	// min–max band with mean and p95 lines. 0 means 16.
	MaxLines int
}

func (o Options) withDefaults() Options {
	if o.Width <= 0 {
		o.Width = 800
	}
	if o.Height <= 0 {
		o.Height = 400
	}
	if o.MaxLines <= 0 {
		o.MaxLines = 16
	}
	return o
}

// Metric says how a timeline series is labelled.
type Metric struct {
	Name  string // series name, e.g. "kv_cache_usage_perc"
	Title string
	Unit  string // the y axis label
	// Fraction marks values in 0..1, drawn on a fixed 0..1 axis.
	Fraction bool
}

// known are the timeline series of step.Timeline, in the order their images are listed.
var known = func() []Metric {
	var ms []Metric
	for _, s := range vllm.TimelineSeries() {
		ms = append(ms, Metric{s.Name, s.Title, s.Unit, s.Fraction})
	}
	return ms
}()

// Describe returns how the series name is labelled; an unknown name is its own title.
func Describe(name string) Metric {
	for _, m := range known {
		if m.Name == name {
			return m
		}
	}
	return Metric{Name: name, Title: name, Unit: "value"}
}

// Metrics lists the series of r's timeline that hold at least one sample: the known ones in
// their fixed order, then any others sorted by name.
func Metrics(r *step.Record) []string {
	if r.Timeline == nil {
		return nil
	}
	has := map[string]bool{}
	for _, w := range r.Timeline.Workers {
		for name, ps := range w.Series {
			if len(ps) > 0 {
				has[name] = true
			}
		}
	}
	var out []string
	for _, m := range known {
		if has[m.Name] {
			out = append(out, m.Name)
			delete(has, m.Name)
		}
	}
	var rest []string
	for name := range has {
		rest = append(rest, name)
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// RelPath is the path of a step's image of metric, relative to OUT_DIR, with forward slashes.
func RelPath(n int64, metric string) string {
	return path.Join(Dir, fmt.Sprintf("step_%06d", n), metric+".png")
}

// The colours of the worker lines, chosen to tell apart on white; the fleet is drawn in black.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
	{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
	{188, 189, 34, 255}, {23, 190, 207, 255}, {0, 72, 140, 255}, {176, 80, 0, 255},
	{0, 110, 60, 255}, {150, 0, 60, 255}, {90, 60, 150, 255}, {100, 100, 40, 255},
}

var (
	black     = color.RGBA{0, 0, 0, 255}
	bandFill  = color.RGBA{150, 180, 220, 255}
	p95Colour = color.RGBA{214, 39, 40, 255}
)

// Renderer draws images and keeps its buffers between them. It is not safe for concurrent use.
type Renderer struct {
	opt Options
	img *image.RGBA
	enc png.Encoder
	buf bytes.Buffer
}

// NewRenderer returns a Renderer for images of opt's size.
func NewRenderer(opt Options) *Renderer {
	opt = opt.withDefaults()
	return &Renderer{
		opt: opt,
		img: image.NewRGBA(image.Rect(0, 0, opt.Width, opt.Height)),
		enc: png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &encoderBuffer{}},
	}
}

// encoderBuffer keeps the PNG encoder's buffers (its compressor is most of what drawing an
// image allocates) for the Renderer's next image.
type encoderBuffer struct{ b *png.EncoderBuffer }

func (e *encoderBuffer) Get() *png.EncoderBuffer  { return e.b }
func (e *encoderBuffer) Put(b *png.EncoderBuffer) { e.b = b }

// stepsXY reads a series as plotter.XYer of a step line, without copying it: a sample holds
// its value over the interval since the previous sample (the first one since the step start),
// as in timeline.Resample, so the workers' lines and the fleet's mean and band agree.
type stepsXY []step.Point

func (p stepsXY) Len() int { return 2 * len(p) }
func (p stepsXY) XY(i int) (x, y float64) {
	k := i / 2
	if i%2 == 1 {
		return p[k].OffsetS, p[k].Value
	}
	if k == 0 {
		return min(0, p[0].OffsetS), p[0].Value
	}
	return p[k-1].OffsetS, p[k].Value
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// columnsXY draws the non-NaN columns of a grid row as steps, each over its column.
func columnsXY(ys []float64, width float64) plotter.XYs {
	xys := make(plotter.XYs, 0, 2*len(ys))
	for c, y := range ys {
		if finite(y) {
			xys = append(xys, plotter.XY{X: float64(c) * width, Y: y}, plotter.XY{X: float64(c+1) * width, Y: y})
		}
	}
	return xys
}

// Image draws metric of r's timeline. The image is reused by the next call.
func (rd *Renderer) Image(r *step.Record, metric string) (image.Image, error) {
	m := Describe(metric)
	var ids []step.WorkerID
	var series [][]step.Point
	if r.Timeline != nil {
		for _, w := range r.Timeline.Workers {
			ps := w.Series[metric]
			if len(ps) == 0 {
				continue
			}
			if slices.ContainsFunc(ps, func(p step.Point) bool { return !finite(p.OffsetS) || !finite(p.Value) }) {
				ps = slices.DeleteFunc(slices.Clone(ps), func(p step.Point) bool { return !finite(p.OffsetS) || !finite(p.Value) })
			}
			ids = append(ids, w.WorkerID)
			series = append(series, ps)
		}
	}
	dur := r.DurationS
	if !(dur > 0) {
		dur = r.End.Sub(r.Start).Seconds()
	}
	for _, ps := range series {
		if len(ps) > 0 {
			dur = max(dur, ps[len(ps)-1].OffsetS)
		}
	}
	if !(dur > 0) {
		dur = 1
	}

	p := gplot.New()
	p.Title.Text = fmt.Sprintf("step %d · %s · %d workers", r.Step, m.Title, len(ids))
	p.X.Label.Text = "seconds since step start"
	p.Y.Label.Text = m.Unit
	p.Add(plotter.NewGrid())
	legend := gplot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(8)

	// The fleet's mean (and band) on a fine grid, so that workers scraped at different
	// moments blur little.
	const cols = 240
	width := dur / float64(cols)
	band := timeline.Spread(timeline.Grid(series, dur, cols))

	if len(ids) <= rd.opt.MaxLines {
		labels := timeline.Labels(ids, 22)
		for i, ps := range series {
			l, err := plotter.NewLine(stepsXY(ps))
			if err != nil {
				return nil, fmt.Errorf("plot %s of step %d: %w", metric, r.Step, err)
			}
			l.Color, l.Width = palette[i%len(palette)], vg.Points(1)
			p.Add(l)
			legend.Add(labels[i], l)
		}
	} else {
		hi, lo := columnsXY(band.Max, width), columnsXY(band.Min, width)
		if len(hi) > 0 {
			slices.Reverse(lo)
			poly, err := plotter.NewPolygon(append(hi, lo...))
			if err != nil {
				return nil, fmt.Errorf("plot %s of step %d: %w", metric, r.Step, err)
			}
			poly.Color, poly.LineStyle.Width = bandFill, 0
			p.Add(poly)
			legend.Add(fmt.Sprintf("min–max of %d", len(ids)), poly)
		}
		if xys := columnsXY(band.P95, width); len(xys) > 0 {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("plot %s of step %d: %w", metric, r.Step, err)
			}
			l.Color, l.Width, l.Dashes = p95Colour, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(2)}
			p.Add(l)
			legend.Add("fleet p95", l)
		}
	}
	if xys := columnsXY(band.Mean, width); len(xys) > 0 && len(ids) > 1 { // one worker is its own mean
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s of step %d: %w", metric, r.Step, err)
		}
		l.Color, l.Width = black, vg.Points(2)
		p.Add(l)
		legend.Add("fleet mean", l)
	}

	p.X.Min, p.X.Max = 0, dur
	p.Y.Min = 0
	switch {
	case m.Fraction && p.Y.Max <= 1:
		p.Y.Max = 1
	case p.Y.Max <= 0:
		p.Y.Max = 1
	default:
		p.Y.Max *= 1.05
	}
	if len(ids) == 0 {
		p.Title.Text += " (no samples)"
	}

	// 96 dots per inch: one point is 4/3 pixels.
	const dpi = 96
	toPt := func(px int) vg.Length { return vg.Length(px) * vg.Inch / dpi }
	// The canvas draws straight into rd.img through its own context (vgimg.UseImage would copy
	// the image on every call); the context is set up as vgimg.New sets up its own.
	ctx := gg.NewContextForRGBA(rd.img)
	ctx.SetLineCapButt()
	ctx.InvertY()
	c := vgimg.NewWith(vgimg.UseImageWithContext(rd.img, ctx), vgimg.UseDPI(dpi))
	dc := draw.New(c)
	legendW := toPt(min(160, rd.opt.Width/4))
	p.Draw(draw.Crop(dc, toPt(2), -legendW, toPt(2), -toPt(6)))
	legend.Draw(draw.Crop(dc, dc.Max.X-legendW+toPt(6), -toPt(4), 0, -toPt(36)))
	return rd.img, nil
}

// WritePNG draws metric of r's timeline and writes it to w as PNG.
func (rd *Renderer) WritePNG(w io.Writer, r *step.Record, metric string) error {
	img, err := rd.Image(r, metric)
	if err != nil {
		return err
	}
	return rd.enc.Encode(w, img)
}

// WriteFiles writes the image of every metric of r's timeline (Metrics) to
// outDir/plots/step_NNNNNN/<metric>.png and returns their paths relative to outDir.
func (rd *Renderer) WriteFiles(outDir string, r *step.Record) ([]string, error) {
	return rd.writeFiles(outDir, r, func() bool { return false })
}

// writeFiles is WriteFiles that stops before the next image once stop reports true.
func (rd *Renderer) writeFiles(outDir string, r *step.Record, stop func() bool) ([]string, error) {
	var rels []string
	for _, metric := range Metrics(r) {
		if stop() {
			break
		}
		rd.buf.Reset()
		if err := rd.WritePNG(&rd.buf, r, metric); err != nil {
			return rels, err
		}
		rel := RelPath(r.Step, metric)
		if err := timeline.WriteFileAtomic(filepath.Join(outDir, filepath.FromSlash(rel)), rd.buf.Bytes()); err != nil {
			return rels, err
		}
		rels = append(rels, rel)
	}
	return rels, nil
}
