package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// WritePNG writes the same plot as WriteSVG as a PNG (drawn with the
// standard library and the 7x13 bitmap font of x/image: every text has
// one size, the y-axis label is horizontal).
func WritePNG(w io.Writer, rep *Report) error {
	pw, ph := plotSize(rep)
	img := image.NewRGBA(image.Rect(0, 0, pw, ph))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	drawPlot(&pngCanvas{img: img}, rep)
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("encode png: %w", err)
	}
	return nil
}

type pngCanvas struct{ img *image.RGBA }

func parseColor(s string) color.RGBA {
	c := color.RGBA{A: 255}
	if len(s) == 7 && s[0] == '#' {
		if v, err := strconv.ParseUint(s[1:], 16, 32); err == nil {
			c.R, c.G, c.B = uint8(v>>16), uint8(v>>8), uint8(v)
		}
	}
	return c
}

// line draws a segment of the given width by stamping squares along it.
func (c *pngCanvas) line(x1, y1, x2, y2 float64, col string, width float64) {
	rgba := parseColor(col)
	steps := int(math.Max(math.Abs(x2-x1), math.Abs(y2-y1))) + 1
	half := int(width) / 2
	for i := 0; i <= steps; i++ {
		t := float64(i) / float64(steps)
		x := int(math.Round(x1 + (x2-x1)*t))
		y := int(math.Round(y1 + (y2-y1)*t))
		for dx := -half; dx <= half; dx++ {
			for dy := -half; dy <= half; dy++ {
				c.img.SetRGBA(x+dx, y+dy, rgba)
			}
		}
	}
}

func (c *pngCanvas) polyline(pts [][2]float64, col string, width float64) {
	for i := 1; i < len(pts); i++ {
		c.line(pts[i-1][0], pts[i-1][1], pts[i][0], pts[i][1], col, width)
	}
}

func (c *pngCanvas) rect(x, y, w, h float64, stroke string) {
	c.line(x, y, x+w, y, stroke, 1)
	c.line(x+w, y, x+w, y+h, stroke, 1)
	c.line(x+w, y+h, x, y+h, stroke, 1)
	c.line(x, y+h, x, y, stroke, 1)
}

func (c *pngCanvas) marker(x, y, r float64, shape markerShape, col, _ string) {
	fill, edge := parseColor(col), parseColor("#000000")
	n := int(math.Ceil(r))
	for dy := -n; dy <= n; dy++ {
		for dx := -n; dx <= n; dx++ {
			// d: the distance to the centre in the shape's own norm
			// (Euclidean for a circle, |dx|+|dy| for a diamond, the
			// larger of |dx| and |dy| for a square).
			d := math.Hypot(float64(dx), float64(dy))
			switch shape {
			case markerDiamond:
				d = math.Abs(float64(dx)) + math.Abs(float64(dy))
			case markerSquare:
				d = max(math.Abs(float64(dx)), math.Abs(float64(dy)))
			}
			switch {
			case d > r:
			case d > r-1.5:
				c.img.SetRGBA(int(math.Round(x))+dx, int(math.Round(y))+dy, edge)
			default:
				c.img.SetRGBA(int(math.Round(x))+dx, int(math.Round(y))+dy, fill)
			}
		}
	}
}

func (c *pngCanvas) text(x, y float64, s, anchor string, _ int, vertical bool) {
	face := basicfont.Face7x13
	d := &font.Drawer{Dst: c.img, Src: image.Black, Face: face}
	width := d.MeasureString(s).Round()
	if vertical {
		// Horizontal instead, above the axis labels.
		x, y, anchor = x+20, float64(plotMarginT)-24, "start"
	}
	switch anchor {
	case "middle":
		x -= float64(width) / 2
	case "end":
		x -= float64(width)
	}
	d.Dot = fixed.P(int(math.Round(x)), int(math.Round(y)))
	d.DrawString(s)
}
