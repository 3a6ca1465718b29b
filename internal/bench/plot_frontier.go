package bench

import (
	"fmt"
	"math"
	"strings"
)

// The frontier plot of a --sweep: x = replication cost per produced GB
// (linear from 0, with classic's multiples on the top axis), y = produce
// p99 (log), a marker per point labelled with its value, the points of a
// mode joined in value order, classic a black diamond, the default point
// (Sweep.Default) a yellow square.
const (
	frontierWidth, frontierHeight = 960, 660
	frontierMarginL               = 90
	frontierMarginR               = 40
	frontierMarginT               = 100 // title, subtitle, top axis
	frontierMarginB               = 110 // ticks, axis label, legend, points not drawn
	frontierPanelW                = frontierWidth - frontierMarginL - frontierMarginR
	frontierPanelH                = frontierHeight - frontierMarginT - frontierMarginB
	frontierMarkerR               = 6
	classicColor                  = "#000000"
	defaultColor                  = "#ffd400"
)

// frontierXY is where a point goes: its cost and its produce p99; ok is
// false when either is n/a (or the p99 is not positive: log scale).
func frontierXY(p *SweepPoint) (x, y float64, ok bool) {
	if p == nil || p.CostUSDPerGBProduced == nil || p.ProduceP99Ms == nil || *p.ProduceP99Ms <= 0 {
		return 0, 0, false
	}
	return *p.CostUSDPerGBProduced, *p.ProduceP99Ms, true
}

func drawFrontier(c canvas, rep *Report) {
	sw, s := rep.Sweep, rep.Settings
	rate := "max"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%d rec/s", s.Rate)
	}
	c.text(frontierWidth/2, 26, fmt.Sprintf("strata bench --sweep %s: acks=%s produce p99 against replication cost", sw.Key, s.Acks), "middle", 16, false)
	c.text(frontierWidth/2, 46, fmt.Sprintf("%d B records, %d partitions, rate %s, %v window; each point labelled with its %s", s.RecordSize, s.Partitions, rate, s.Duration, sw.Key), "middle", 12, false)

	var skipped []string
	xMax, yMin, yMax := 0.0, math.Inf(1), math.Inf(-1)
	all := append([]*SweepPoint{}, sw.Classic, sw.Default)
	for i := range sw.Points {
		all = append(all, &sw.Points[i])
	}
	for _, p := range all {
		if p == nil {
			continue
		}
		x, y, ok := frontierXY(p)
		if !ok {
			skipped = append(skipped, p.Label(sw.Key))
			continue
		}
		xMax, yMin, yMax = math.Max(xMax, x), math.Min(yMin, y), math.Max(yMax, y)
	}
	if xMax <= 0 {
		xMax = 0.01
	}
	if math.IsInf(yMin, 1) {
		yMin, yMax = 1, 10
	}
	xStep := niceStep(xMax*1.1, 8)
	xMax = math.Ceil(xMax*1.1/xStep) * xStep
	yLo, yHi := niceLogBounds(yMin, yMax)

	x0, y0 := float64(frontierMarginL), float64(frontierMarginT)
	px := func(x float64) float64 { return x0 + x/xMax*frontierPanelW }
	py := func(ms float64) float64 {
		return y0 + frontierPanelH - (math.Log10(ms)-math.Log10(yLo))/(math.Log10(yHi)-math.Log10(yLo))*frontierPanelH
	}
	// X grid and ticks.
	for i := 0; float64(i)*xStep <= xMax+xStep/1e6; i++ {
		v := float64(i) * xStep
		c.line(px(v), y0, px(v), y0+frontierPanelH, "#dddddd", 1)
		c.text(px(v), y0+frontierPanelH+16, fmt.Sprintf("%.*f", stepDecimals(xStep), v), "middle", 12, false)
	}
	c.text(x0+frontierPanelW/2, y0+frontierPanelH+38, "replication cost (USD per GB produced)", "middle", 12, false)
	// Top axis: multiples of classic's cost.
	if cl := sw.Classic; cl != nil && cl.CostUSDPerGBProduced != nil && *cl.CostUSDPerGBProduced > 0 {
		base := *cl.CostUSDPerGBProduced
		rStep := niceStep(xMax/base, 8)
		for i := 0; float64(i)*rStep*base <= xMax*(1+1e-9); i++ {
			r := float64(i) * rStep
			c.line(px(r*base), y0-4, px(r*base), y0, "#333333", 1)
			c.text(px(r*base), y0-8, fmt.Sprintf("%.*fx", stepDecimals(rStep), r), "middle", 11, false)
		}
		c.text(x0+frontierPanelW/2, y0-24, "cost / classic's", "middle", 12, false)
	}
	// Y grid and ticks: 1, 2, 5 per decade.
	for e := math.Floor(math.Log10(yLo)); e <= math.Ceil(math.Log10(yHi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v < yLo*(1-1e-9) || v > yHi*(1+1e-9) {
				continue
			}
			stroke := "#eeeeee"
			if m == 1 {
				stroke = "#cccccc"
			}
			c.line(x0, py(v), x0+frontierPanelW, py(v), stroke, 1)
			c.text(x0-6, py(v)+4, trimFloat(v), "end", 12, false)
		}
	}
	c.rect(x0, y0, frontierPanelW, frontierPanelH, "#333333")
	// Horizontal, above the y axis: the PNG canvas cannot rotate text.
	c.text(10, y0-34, fmt.Sprintf("y: acks=%s produce p99 (ms)", s.Acks), "start", 12, false)

	// One colour per swept mode: its points joined in value order.
	var modes []string
	byMode := map[string][]*SweepPoint{}
	for i := range sw.Points {
		p := &sw.Points[i]
		if _, ok := byMode[p.Mode]; !ok {
			modes = append(modes, p.Mode)
		}
		byMode[p.Mode] = append(byMode[p.Mode], p)
	}
	// The legend goes in a row below the axis, where no point can hide
	// it (about 7 px per character: the PNG font's width).
	legendX, legendY := x0, y0+frontierPanelH+62
	legend := func(shape markerShape, color, label string) {
		c.marker(legendX+6, legendY-4, frontierMarkerR-1, shape, color, label)
		c.text(legendX+16, legendY, label, "start", 12, false)
		legendX += 16 + 7*float64(len(label)) + 24
	}
	for k, mode := range modes {
		color := modeColors[k%len(modeColors)]
		var path [][2]float64
		for _, p := range byMode[mode] {
			if x, y, ok := frontierXY(p); ok {
				path = append(path, [2]float64{px(x), py(y)})
			}
		}
		if len(path) > 1 {
			c.polyline(path, color, 1.5)
		}
		for _, p := range byMode[mode] {
			x, y, ok := frontierXY(p)
			if !ok {
				continue
			}
			c.marker(px(x), py(y), frontierMarkerR, markerCircle, color, pointTitle(p, sw.Key))
			c.text(px(x)+frontierMarkerR+3, py(y)-frontierMarkerR, p.Value, "start", 11, false)
		}
		legend(markerCircle, color, fmt.Sprintf("%s (wal.policy=%s)", mode, modePolicy(mode)))
	}
	if x, y, ok := frontierXY(sw.Classic); ok {
		c.marker(px(x), py(y), frontierMarkerR+1, markerDiamond, classicColor, pointTitle(sw.Classic, sw.Key))
		c.text(px(x)+frontierMarkerR+4, py(y)-frontierMarkerR, sw.Classic.Mode, "start", 11, false)
		legend(markerDiamond, classicColor, sw.Classic.Mode+" (reference)")
	}
	if x, y, ok := frontierXY(sw.Default); ok {
		c.marker(px(x), py(y), frontierMarkerR+1, markerSquare, defaultColor, pointTitle(sw.Default, sw.Key))
		c.text(px(x)+frontierMarkerR+4, py(y)+frontierMarkerR+10, "default", "start", 11, false)
		legend(markerSquare, defaultColor, fmt.Sprintf("%s, no tuning (wal.policy=%s)", ModeWAL, sw.Default.WALPolicy))
	}
	if len(skipped) > 0 {
		c.text(x0, y0+frontierPanelH+86, "not drawn (cost or p99 n/a): "+strings.Join(skipped, ", "), "start", 11, false)
	}
}

// pointTitle is a point's tooltip: its label and coordinates.
func pointTitle(p *SweepPoint, key string) string {
	return fmt.Sprintf("%s: %s USD/GB (%s classic), p99 %s ms", p.Label(key),
		FormatValue(p.CostUSDPerGBProduced), FormatRatio(p.CostRatioToClassic), FormatValue(p.ProduceP99Ms))
}

// niceStep is the smallest 1, 2 or 5 × 10^k step that divides span into
// at most n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// stepDecimals is how many decimals print multiples of step exactly.
func stepDecimals(step float64) int {
	return max(0, int(-math.Floor(math.Log10(step)+1e-9)))
}

// niceLogBounds widens [lo, hi] (lo > 0) to 1, 2 or 5 × 10^k at both
// ends, never to an empty range.
func niceLogBounds(lo, hi float64) (float64, float64) {
	down := func(v float64) float64 {
		mag := math.Pow(10, math.Floor(math.Log10(v)))
		for _, m := range []float64{5, 2, 1} {
			if m*mag <= v*(1+1e-9) {
				return m * mag
			}
		}
		return mag
	}
	up := func(v float64) float64 {
		mag := math.Pow(10, math.Floor(math.Log10(v)))
		for _, m := range []float64{1, 2, 5, 10} {
			if m*mag >= v*(1-1e-9) {
				return m * mag
			}
		}
		return 10 * mag
	}
	l, h := down(lo), up(hi)
	if h <= l {
		h = up(l * 1.01)
	}
	return l, h
}
