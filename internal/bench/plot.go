package bench

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// WritePlotFile writes the latency plot of rep to path (SVG).
func WritePlotFile(path string, rep *Report) error {
	var b bytes.Buffer
	if err := WriteSVG(&b, rep); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// modeColors are the line colours by mode order.
var modeColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}

// WriteSVG draws the percentile distributions of produce and end-to-end
// latency, one panel each side by side, every mode a line in both panels
// (so the modes are compared on the same axes). The x axis is the
// percentile on the usual HDR scale (log of 1/(1-q): 90%, 99%, 99.9%
// equally spaced), the y axis the latency in ms on a log scale.
func WriteSVG(w io.Writer, rep *Report) error {
	const (
		panelW, panelH = 520, 380
		marginL        = 70
		marginR        = 40
		marginT        = 60
		marginB        = 60
		width          = 2*(marginL+panelW+marginR) + 0
		height         = marginT + panelH + marginB + 30
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	s := rep.Settings
	title := fmt.Sprintf("strata bench: acks=%s, %d B records, %d partitions, %v window", s.Acks, s.RecordSize, s.Partitions, s.Duration)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))

	type series struct {
		name  string
		color string
		sum   LatencySummary
	}
	panels := []struct {
		title string
		get   func(*ModeResult) LatencySummary
	}{
		{"produce latency", func(m *ModeResult) LatencySummary { return m.ProduceLatency }},
		{"end-to-end latency", func(m *ModeResult) LatencySummary { return m.EndToEndLatency }},
	}
	for pi, p := range panels {
		var ss []series
		for i := range rep.Modes {
			ss = append(ss, series{rep.Modes[i].Mode, modeColors[i%len(modeColors)], p.get(&rep.Modes[i])})
		}
		// Axis ranges.
		xMax, yMin, yMax := 3.0, math.Inf(1), math.Inf(-1)
		for _, s := range ss {
			pts := curveXY(s.sum)
			for _, pt := range pts {
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
		x0 := float64(pi*(marginL+panelW+marginR) + marginL)
		y0 := float64(marginT)
		px := func(x float64) float64 { return x0 + x/xMax*panelW }
		py := func(ms float64) float64 {
			return y0 + panelH - (math.Log10(ms)-lyMin)/(lyMax-lyMin)*panelH
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="14" text-anchor="middle">%s</text>`+"\n", x0+panelW/2, y0-10, p.title)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", x0, y0, panelW, panelH)
		// X ticks: 0%, 90%, 99%, ...
		for d := 0.0; d <= xMax; d++ {
			x := px(d)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, y0, x, y0+panelH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+panelH+16, percentileLabel(d))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">percentile</text>`+"\n", x0+panelW/2, y0+panelH+36)
		// Y ticks: 1, 2, 5 per decade.
		for e := lyMin; e <= lyMax; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if math.Log10(v) > lyMax+1e-9 {
					continue
				}
				y := py(v)
				stroke := "#eee"
				if m == 1 {
					stroke = "#ccc"
				}
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0, y, x0+panelW, y, stroke)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, y+4, trimFloat(v))
			}
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">latency (ms)</text>`+"\n",
			x0-50, y0+panelH/2, x0-50, y0+panelH/2)
		// Lines and legend.
		for i, s := range ss {
			pts := curveXY(s.sum)
			ly := y0 + 18 + float64(i)*18
			label := s.name
			if s.sum.Count == 0 {
				label += " (no samples)"
			} else {
				label += fmt.Sprintf(" p50 %s, p99 %s, p99.9 %s ms", FormatValue(&s.sum.P50Ms), FormatValue(&s.sum.P99Ms), FormatValue(&s.sum.P999Ms))
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", x0+10, ly-4, x0+30, ly-4, s.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x0+36, ly, html.EscapeString(label))
			if len(pts) == 0 {
				continue
			}
			var path []string
			for _, pt := range pts {
				ms := math.Max(pt[1], math.Pow(10, lyMin))
				path = append(path, fmt.Sprintf("%.1f,%.1f", px(pt[0]), py(ms)))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(path, " "))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
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
