package bench

import (
	"fmt"
	"math"
)

// The WAL stage panel of --plot: below the latency panels, one row per
// stage, per WAL mode a thick bar to its p99 and a thin black bar to its
// p50, on a log scale of ms, so the stage to work on stands out.
const (
	stageRowH     = 14 // per mode within a stage row
	stageRowGap   = 10
	stageMarginL  = 170 // stage names
	stageMarginT  = 50
	stagePanelBot = 50
)

// stageModes are the modes with a stage breakdown.
func stageModes(rep *Report) []int {
	var out []int
	for i := range rep.Modes {
		if len(rep.Modes[i].Stages) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// stagePanelHeight is the height the stage panel adds (0: no WAL mode).
func stagePanelHeight(rep *Report) int {
	modes := stageModes(rep)
	if len(modes) == 0 {
		return 0
	}
	return stageMarginT + len(walStages)*(len(modes)*stageRowH+stageRowGap) + stagePanelBot
}

// plotSize is the plot's size: the frontier of a sweep, else the two
// latency panels, and the stage panel when a mode has stages.
func plotSize(rep *Report) (w, h int) {
	if rep.Sweep != nil {
		return frontierWidth, frontierHeight
	}
	return plotWidth, plotHeight + stagePanelHeight(rep)
}

// drawStages draws the stage panel from y top.
func drawStages(c canvas, rep *Report, top float64) {
	modes := stageModes(rep)
	if len(modes) == 0 {
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, i := range modes {
		for _, st := range rep.Modes[i].Stages {
			for _, v := range []*float64{st.P50Ms, st.P99Ms} {
				if v != nil && *v > 0 {
					lo, hi = math.Min(lo, *v), math.Max(hi, *v)
				}
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	llo, lhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if lhi <= llo {
		lhi = llo + 1
	}
	x0 := float64(stageMarginL)
	w := float64(plotWidth) - x0 - plotMarginR - 140 // room for the value labels
	px := func(ms float64) float64 {
		return x0 + (math.Log10(math.Max(ms, math.Pow(10, llo)))-llo)/(lhi-llo)*w
	}
	y0 := top + stageMarginT
	h := float64(len(walStages)*(len(modes)*stageRowH+stageRowGap)) - stageRowGap
	c.text(float64(plotWidth)/2, top+24, "WAL stages: p99 (thick) and p50 (thin, black), ms, all brokers", "middle", 14, false)
	for e := llo; e <= lhi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if math.Log10(v) > lhi+1e-9 {
				continue
			}
			x := px(v)
			c.line(x, y0, x, y0+h, "#eeeeee", 1)
			c.text(x, y0+h+16, trimFloat(v), "middle", 12, false)
		}
	}
	c.text(x0+w/2, y0+h+34, "latency (ms)", "middle", 12, false)
	y := y0
	for _, stage := range walStages {
		rowTop := y
		for _, i := range modes {
			m := &rep.Modes[i]
			color := modeColors[i%len(modeColors)]
			var st *StageFigure
			for j := range m.Stages {
				if m.Stages[j].Stage == stage {
					st = &m.Stages[j]
				}
			}
			cy := y + float64(stageRowH)/2
			if st != nil && st.P99Ms != nil {
				c.line(x0, cy, px(*st.P99Ms), cy, color, 8)
				label := fmt.Sprintf("%s / %s", FormatValue(st.P50Ms), FormatValue(st.P99Ms))
				if len(modes) > 1 {
					label = m.Mode + " " + label
				}
				c.text(px(*st.P99Ms)+6, cy+4, label, "start", 11, false)
			}
			if st != nil && st.P50Ms != nil {
				c.line(x0, cy, px(*st.P50Ms), cy, "#000000", 2)
			}
			y += stageRowH
		}
		name := stage
		for _, i := range modes {
			if rep.Modes[i].SlowestStageP99 == stage {
				name += " *"
			}
		}
		c.text(x0-8, rowTop+float64(len(modes)*stageRowH)/2+4, name, "end", 12, false)
		y += stageRowGap
	}
	c.rect(x0, y0-4, w, h+8, "#333333")
	c.text(x0-8, y0+h+34, "* slowest at p99", "end", 11, false)
}
