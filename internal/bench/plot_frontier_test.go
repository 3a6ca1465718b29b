package bench

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"os"
	"strings"
	"testing"
)

func TestWriteFrontierSVG(t *testing.T) {
	r := sampleSweepReport()
	var b bytes.Buffer
	if err := WriteSVG(&b, r); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML; every marker's tooltip (title) by element.
	type marker struct{ element, title string }
	var markers []marker
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var open string
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if n := tok.Name.Local; n == "circle" || n == "polygon" || n == "rect" {
				open = n
			}
		case xml.CharData:
			if open != "" {
				markers = append(markers, marker{open, string(tok)})
				open = ""
			}
		}
	}
	count := func(element, titlePrefix string) int {
		n := 0
		for _, m := range markers {
			if m.element == element && strings.HasPrefix(m.title, titlePrefix) {
				n++
			}
		}
		return n
	}
	for _, v := range []string{"10", "40"} {
		if n := count("circle", "wal+latency wal.upload.interval.ms="+v+": "); n != 1 {
			t.Errorf("point %s: %d markers, want 1 (markers %v)", v, n, markers)
		}
	}
	if n := count("circle", "wal+latency wal.upload.interval.ms=80"); n != 0 {
		t.Errorf("the point without a cost has %d markers", n)
	}
	if n := count("polygon", "classic: 0.040 USD/GB (1.000x classic), p99 "); n != 1 {
		t.Errorf("classic: %d diamond markers, want 1 (markers %v)", n, markers)
	}
	if n := count("rect", "wal (defaults): 0.010 USD/GB (0.250x classic), p99 "); n != 1 {
		t.Errorf("default point: %d square markers, want 1 (markers %v)", n, markers)
	}
	if n := count("rect", "wal, no tuning (wal.policy="+DefaultWALPolicy+")"); n != 1 {
		t.Errorf("legend of the default point: %d markers, want 1", n)
	}
	if n := count("circle", "wal+latency (wal.policy=latency)"); n != 1 {
		t.Errorf("legend of wal+latency: %d markers, want 1", n)
	}
	for _, want := range []string{
		"--sweep wal.upload.interval.ms: acks=all produce p99 against replication cost",
		"replication cost (USD per GB produced)", "cost / classic&#39;s", "y: acks=all produce p99 (ms)",
		"not drawn (cost or p99 n/a): wal+latency wal.upload.interval.ms=80",
		">10</text>", ">40</text>", ">classic</text>",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The mode's points are joined: one line through the two placed.
	if n := strings.Count(b.String(), "<polyline"); n != 1 {
		t.Errorf("%d polylines, want 1", n)
	}
}

func TestWriteFrontierPNG(t *testing.T) {
	path := t.TempDir() + "/frontier.png"
	if err := WritePlotFile(path, sampleSweepReport()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != frontierWidth || b.Dy() != frontierHeight {
		t.Errorf("size %v, want %dx%d", b, frontierWidth, frontierHeight)
	}
	// The swept mode's markers are filled with its colour: more pixels
	// of it than its 1.5 px line alone could give.
	want := parseColor(modeColors[0])
	n := 0
	for y := 0; y < frontierHeight; y++ {
		for x := 0; x < frontierWidth; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B {
				n++
			}
		}
	}
	if n < 3*50 {
		t.Errorf("%d pixels of the mode's colour, want its markers drawn", n)
	}
}

func TestNiceAxes(t *testing.T) {
	for _, tc := range []struct{ span, want float64 }{{0.044, 0.01}, {0.03, 0.005}, {1, 0.2}, {8, 1}, {0.0011, 0.0002}} {
		if got := niceStep(tc.span, 8); abs(got-tc.want) > tc.want*1e-9 {
			t.Errorf("niceStep(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
	if got := stepDecimals(0.005); got != 3 {
		t.Errorf("stepDecimals(0.005) = %d", got)
	}
	for _, tc := range []struct{ lo, hi, wantLo, wantHi float64 }{{35, 48, 20, 50}, {6.3, 192, 5, 200}, {10, 10, 10, 20}, {0.4, 1000, 0.2, 1000}} {
		if l, h := niceLogBounds(tc.lo, tc.hi); abs(l-tc.wantLo) > 1e-9 || abs(h-tc.wantHi) > 1e-9 {
			t.Errorf("niceLogBounds(%v, %v) = %v, %v; want %v, %v", tc.lo, tc.hi, l, h, tc.wantLo, tc.wantHi)
		}
	}
}
