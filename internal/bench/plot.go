package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WritePlotFile writes the latency plot of rep to path: SVG, or PNG when
// the name ends in .png.
func WritePlotFile(path string, rep *Report) error {
	var b bytes.Buffer
	var err error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		err = WriteSVG(&b, rep)
	case ".png":
		err = WritePNG(&b, rep)
	default:
		return fmt.Errorf("plot %q: want a .svg or .png file name", path)
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// modeColors are the line colours by mode order.
var modeColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// Plot geometry.
const (
	plotPanelW, plotPanelH = 520, 380
	plotMarginL            = 70
	plotMarginR            = 40
	plotMarginT            = 60
	plotMarginB            = 60
	plotWidth              = 2 * (plotMarginL + plotPanelW + plotMarginR)
	plotHeight             = plotMarginT + plotPanelH + plotMarginB + 30
)

// canvas is what the plot is drawn on (SVG or raster).
type canvas interface {
	line(x1, y1, x2, y2 float64, color string, width float64)
	polyline(pts [][2]float64, color string, width float64)
	rect(x, y, w, h float64, stroke string)
	// text at (x, y) baseline; anchor start, middle or end; vertical
	// rotates by -90° around (x, y).
	text(x, y float64, s, anchor string, size int, vertical bool)
	// marker draws a filled shape of radius r centred on (x, y), outlined
	// in black; title is its tooltip where the format has them (SVG).
	marker(x, y, r float64, shape markerShape, color, title string)
}

// markerShape is the shape of a plot marker.
type markerShape int

const (
	markerCircle markerShape = iota
	markerDiamond
	markerSquare
)

// drawPlot draws a report's plot: the frontier of a sweep, else the
// latency distributions.
func drawPlot(c canvas, rep *Report) {
	if rep.Sweep != nil {
		drawFrontier(c, rep)
		return
	}
	drawLatency(c, rep)
}

// drawLatency draws the percentile distributions of produce and end-to-end
// latency, one panel each side by side, every mode a line in both panels
// (so the modes are compared on the same axes). The x axis is the
// percentile on the usual HDR scale (log of 1/(1-q): 90%, 99%, 99.9%
// equally spaced), the y axis the latency in ms on a log scale.
func drawLatency(c canvas, rep *Report) {
	s := rep.Settings
	title := fmt.Sprintf("strata bench: acks=%s, %d B records, %d partitions, %v window", s.Acks, s.RecordSize, s.Partitions, s.Duration)
	c.text(plotWidth/2, 24, title, "middle", 16, false)

	panels := []struct {
		title string
		get   func(*ModeResult) LatencySummary
	}{
		{"produce latency", func(m *ModeResult) LatencySummary { return m.ProduceLatency }},
		{"end-to-end latency", func(m *ModeResult) LatencySummary { return m.EndToEndLatency }},
	}
	for pi, p := range panels {
		// Axis ranges.
		xMax, yMin, yMax := 3.0, math.Inf(1), math.Inf(-1)
		for i := range rep.Modes {
			for _, pt := range curveXY(p.get(&rep.Modes[i])) {
				xMax = math.Max(xMax, pt[0])
				if pt[1] > 0 {
					yMin = math.Min(yMin, pt[1])
					yMax = math.Max(yMax, pt[1])
				}
			}
		}
		xMax = math.Ceil(xMax)
		if math.IsInf(yMin, 1) {
			yMin, yMax = 0.1, 1
		}
		lyMin, lyMax := math.Floor(math.Log10(yMin)), math.Ceil(math.Log10(yMax))
		if lyMax <= lyMin {
			lyMax = lyMin + 1
		}
		x0 := float64(pi*(plotMarginL+plotPanelW+plotMarginR) + plotMarginL)
		y0 := float64(plotMarginT)
		px := func(x float64) float64 { return x0 + x/xMax*plotPanelW }
		py := func(ms float64) float64 {
			return y0 + plotPanelH - (math.Log10(ms)-lyMin)/(lyMax-lyMin)*plotPanelH
		}
		c.text(x0+plotPanelW/2, y0-10, p.title, "middle", 14, false)
		// X grid and ticks: 0%, 90%, 99%, ...
		for d := 0.0; d <= xMax; d++ {
			x := px(d)
			c.line(x, y0, x, y0+plotPanelH, "#dddddd", 1)
			c.text(x, y0+plotPanelH+16, percentileLabel(d), "middle", 12, false)
		}
		c.text(x0+plotPanelW/2, y0+plotPanelH+36, "percentile", "middle", 12, false)
		// Y grid and ticks: 1, 2, 5 per decade.
		for e := lyMin; e <= lyMax; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if math.Log10(v) > lyMax+1e-9 {
					continue
				}
				y := py(v)
				stroke := "#eeeeee"
				if m == 1 {
					stroke = "#cccccc"
				}
				c.line(x0, y, x0+plotPanelW, y, stroke, 1)
				c.text(x0-6, y+4, trimFloat(v), "end", 12, false)
			}
		}
		c.rect(x0, y0, plotPanelW, plotPanelH, "#333333")
		c.text(x0-50, y0+plotPanelH/2, "latency (ms)", "middle", 12, true)
		// Lines and legend.
		for i := range rep.Modes {
			sum := p.get(&rep.Modes[i])
			color := modeColors[i%len(modeColors)]
			ly := y0 + 18 + float64(i)*18
			label := rep.Modes[i].Mode
			if sum.Count == 0 {
				label += " (no samples)"
			} else {
				label += fmt.Sprintf(" p50 %s, p99 %s, p99.9 %s ms", FormatValue(&sum.P50Ms), FormatValue(&sum.P99Ms), FormatValue(&sum.P999Ms))
			}
			c.line(x0+10, ly-4, x0+30, ly-4, color, 2)
			c.text(x0+36, ly, label, "start", 12, false)
			pts := curveXY(sum)
			if len(pts) == 0 {
				continue
			}
			var path [][2]float64
			for _, pt := range pts {
				ms := math.Max(pt[1], math.Pow(10, lyMin))
				path = append(path, [2]float64{px(pt[0]), py(ms)})
			}
			c.polyline(path, color, 2)
		}
	}
	drawStages(c, rep, plotHeight)
}

// WriteSVG writes the latency plot as SVG.
func WriteSVG(w io.Writer, rep *Report) error {
	c := &svgCanvas{}
	pw, ph := plotSize(rep)
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		pw, ph, pw, ph)
	c.b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	drawPlot(c, rep)
	c.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, c.b.String())
	return err
}

type svgCanvas struct{ b strings.Builder }

func (c *svgCanvas) line(x1, y1, x2, y2 float64, color string, width float64) {
	fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%g"/>`+"\n", x1, y1, x2, y2, color, width)
}

func (c *svgCanvas) polyline(pts [][2]float64, color string, width float64) {
	var ps []string
	for _, p := range pts {
		ps = append(ps, fmt.Sprintf("%.1f,%.1f", p[0], p[1]))
	}
	fmt.Fprintf(&c.b, `<polyline fill="none" stroke="%s" stroke-width="%g" points="%s"/>`+"\n", color, width, strings.Join(ps, " "))
}

func (c *svgCanvas) rect(x, y, w, h float64, stroke string) {
	fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="%s"/>`+"\n", x, y, w, h, stroke)
}

func (c *svgCanvas) marker(x, y, r float64, shape markerShape, color, title string) {
	tip := "<title>" + html.EscapeString(title) + "</title>"
	switch shape {
	case markerDiamond:
		fmt.Fprintf(&c.b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="#000000">%s</polygon>`+"\n",
			x, y-r, x+r, y, x, y+r, x-r, y, color, tip)
	case markerSquare:
		fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="#000000">%s</rect>`+"\n",
			x-r, y-r, 2*r, 2*r, color, tip)
	default:
		fmt.Fprintf(&c.b, `<circle cx="%.1f" cy="%.1f" r="%g" fill="%s" stroke="#000000">%s</circle>`+"\n", x, y, r, color, tip)
	}
}

func (c *svgCanvas) text(x, y float64, s, anchor string, size int, vertical bool) {
	rot := ""
	if vertical {
		rot = fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, x, y)
	}
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="%s"%s>%s</text>`+"\n", x, y, size, anchor, rot, html.EscapeString(s))
}

// curveXY maps a summary's curve to (log10(1/(1-q)), ms) points; the max
// (q = 1) is drawn at the rank of one sample, log10(count).
func curveXY(s LatencySummary) [][2]float64 {
	var out [][2]float64
	last := 0.0
	for _, p := range s.Curve {
		var x float64
		if p.Quantile >= 1 {
			x = math.Max(last, math.Log10(float64(max(s.Count, 1))))
		} else {
			x = math.Log10(1 / (1 - p.Quantile))
		}
		last = x
		out = append(out, [2]float64{x, p.Ms})
	}
	return out
}

// percentileLabel labels decade d of the percentile axis: 0 → "0%",
// 1 → "90%", 2 → "99%", 3 → "99.9%".
func percentileLabel(d float64) string {
	n := int(d)
	if n == 0 {
		return "0%"
	}
	return strconv.FormatFloat(100*(1-math.Pow(10, -float64(n))), 'f', max(0, n-2), 64) + "%"
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
