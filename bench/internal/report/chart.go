package report

import (
	"fmt"
	"image/color"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/seckill/seckill/bench/internal/stats"
)

var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

type line struct {
	name string
	xy   plotter.XYs
}

// ticks are gonum's default ticks labelled without trailing zeros.
type ticks struct{}

func (ticks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

func newPanel(title, ylabel string, lines []line) (*plot.Plot, error) {
	p := plot.New()
	p.X.Tick.Marker, p.Y.Tick.Marker = ticks{}, ticks{}
	p.Title.Text = title
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, l := range lines {
		if len(l.xy) == 0 {
			continue
		}
		ln, err := plotter.NewLine(l.xy)
		if err != nil {
			return nil, err
		}
		ln.Color = palette[i%len(palette)]
		ln.Width = vg.Points(1.5)
		p.Add(ln)
		p.Legend.Add(l.name, ln)
	}
	return p, nil
}

func writePanels(path string, panels []*plot.Plot) error {
	const width = 9 * vg.Inch
	height := vg.Length(len(panels)) * 3 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func rateXY(ps []stats.Point) plotter.XYs {
	xy := make(plotter.XYs, len(ps))
	for i, p := range ps {
		xy[i] = plotter.XY{X: p.T, Y: p.Rate}
	}
	return xy
}

func pctXY(ps []stats.Point, p99 bool) plotter.XYs {
	xy := make(plotter.XYs, 0, len(ps))
	for _, p := range ps {
		if p.Rate == 0 {
			continue
		}
		v := p.P50Ms
		if p99 {
			v = p.P99Ms
		}
		xy = append(xy, plotter.XY{X: p.T, Y: v})
	}
	return xy
}

// RunChart draws one run: throughput, then client latency P50/P99, then
// (sustained) orders landing in MySQL and the consumer's lag.
func RunChart(path string, r *Run) error {
	rates := []line{{"requests answered /s", rateXY(r.Series)}}
	if r.Pipeline != nil {
		xy := make(plotter.XYs, 0, len(r.Pipeline.Lag))
		for _, l := range r.Pipeline.Lag {
			xy = append(xy, plotter.XY{X: l.T, Y: l.Rate})
		}
		rates = append(rates, line{"orders created in MySQL /s", xy})
	}
	tp, err := newPanel(fmt.Sprintf("%s: throughput", r.Name), "per second", rates)
	if err != nil {
		return err
	}
	lat, err := newPanel(fmt.Sprintf("%s: client latency", r.Name), "ms", []line{
		{"P50", pctXY(r.Series, false)}, {"P99", pctXY(r.Series, true)},
	})
	if err != nil {
		return err
	}
	panels := []*plot.Plot{tp, lat}
	if r.Pipeline != nil {
		xy := make(plotter.XYs, 0, len(r.Pipeline.Lag))
		for _, l := range r.Pipeline.Lag {
			xy = append(xy, plotter.XY{X: l.T, Y: float64(l.Inflight)})
		}
		lag, err := newPanel(fmt.Sprintf("%s: consumer lag", r.Name), "orders PENDING (in flight)", []line{{"in flight", xy}})
		if err != nil {
			return err
		}
		ptc, err := newPanel(fmt.Sprintf("%s: PENDING -> CREATED, by reservation time", r.Name), "ms", []line{
			{"P50", pctXY(r.Pipeline.PendingToCreatedSeries, false)}, {"P99", pctXY(r.Pipeline.PendingToCreatedSeries, true)},
		})
		if err != nil {
			return err
		}
		panels = append(panels, lag, ptc)
	}
	return writePanels(path, panels)
}

// CompareChart draws every strategy's throughput and P99 on shared panels.
func CompareChart(path string, rows []*Row) error {
	var rates, p99s []line
	for _, r := range rows {
		rates = append(rates, line{r.Strategy, rateXY(r.Series)})
		p99s = append(p99s, line{r.Strategy, pctXY(r.Series, true)})
	}
	tp, err := newPanel("compare: throughput", "requests answered /s", rates)
	if err != nil {
		return err
	}
	lat, err := newPanel("compare: client latency P99 (log scale)", "ms", p99s)
	if err != nil {
		return err
	}
	// The lock's queue makes its P99 orders of magnitude above the rest.
	lat.Y.Min = 0.1
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	return writePanels(path, []*plot.Plot{tp, lat})
}
