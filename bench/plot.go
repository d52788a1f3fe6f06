package main

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// plotPoint is one frontier row drawn in the picture: the whole-system
// cost (publisher + broker cores) against p99 commit → append.
type plotPoint struct {
	label    string // the case, e.g. "default" or "100ms"
	delivery string // "at-least-once" or "exactly-once"
	rate     int    // events/s asked
	cores    float64
	p99ms    float64
}

// frontierSVG writes a picture of points to path: one panel per delivery
// mode, p99 commit → append in ms on a logarithmic x axis, publisher +
// broker cores on the y axis, one colour per rate and the case's label
// beside each point. The SVG is plain text (no fonts embedded, no script),
// so it diffs and renders on GitHub as it is.
func frontierSVG(path string, points []plotPoint) error {
	const panelW, panelH, left, top, gap = 420.0, 300.0, 60.0, 40.0, 70.0
	deliveries := []string{"at-least-once", "exactly-once"}
	var rates []int
	xlo, xhi, yhi := math.Inf(1), math.Inf(-1), 0.0
	for _, p := range points {
		if !slices.Contains(rates, p.rate) {
			rates = append(rates, p.rate)
		}
		xlo, xhi, yhi = min(xlo, max(p.p99ms, 0.1)), max(xhi, p.p99ms), max(yhi, p.cores)
	}
	slices.Sort(rates)
	if len(points) == 0 {
		return fmt.Errorf("frontier picture: no points")
	}
	// Decades that hold every p99, and a y range rounded up to 0.1 core.
	dlo, dhi := math.Floor(math.Log10(xlo)), math.Ceil(math.Log10(xhi))
	if dhi == dlo {
		dhi++
	}
	ymax := math.Ceil(yhi*10+0.5) / 10
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"}
	var sb strings.Builder
	w := left + 2*panelW + gap + 20
	h := top + panelH + 90
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, dl := range deliveries {
		x0 := left + float64(i)*(panelW+gap)
		xOf := func(ms float64) float64 {
			return x0 + (math.Log10(max(ms, 0.1))-dlo)/(dhi-dlo)*panelW
		}
		yOf := func(c float64) float64 { return top + panelH - c/ymax*panelH }
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.0f" font-size="13" font-weight="bold">%s</text>`+"\n", x0, top-15, dl)
		fmt.Fprintf(&sb, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#444"/>`+"\n", x0, top, panelW, panelH)
		for d := dlo; d <= dhi; d++ {
			x := xOf(math.Pow(10, d))
			fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", x, top, x, top+panelH)
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.0f" text-anchor="middle">%g</text>`+"\n", x, top+panelH+14, math.Pow(10, d))
		}
		for y := 0.0; y <= ymax+1e-9; y += 0.1 {
			fmt.Fprintf(&sb, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, yOf(y), x0+panelW, yOf(y))
			fmt.Fprintf(&sb, `<text x="%.0f" y="%.1f" text-anchor="end">%.1f</text>`+"\n", x0-4, yOf(y)+4, y)
		}
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.0f" text-anchor="middle">p99 commit → append (ms, log scale)</text>`+"\n", x0+panelW/2, top+panelH+32)
		fmt.Fprintf(&sb, `<text transform="translate(%.0f,%.0f) rotate(-90)" text-anchor="middle">publisher + broker cores</text>`+"\n", x0-40, top+panelH/2)
		ps := slices.Clone(points)
		slices.SortFunc(ps, func(a, b plotPoint) int { return cmp.Or(cmp.Compare(a.rate, b.rate), cmp.Compare(a.p99ms, b.p99ms)) })
		for _, p := range ps {
			if p.delivery != dl {
				continue
			}
			c := colors[slices.Index(rates, p.rate)%len(colors)]
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", xOf(p.p99ms), yOf(p.cores), c)
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", xOf(p.p99ms)+6, yOf(p.cores)+4, c, xmlEscape(p.label))
		}
	}
	for i, r := range rates {
		x := left + float64(i)*130
		fmt.Fprintf(&sb, `<circle cx="%.0f" cy="%.0f" r="4" fill="%s"/><text x="%.0f" y="%.0f">%d events/s</text>`+"\n",
			x, h-22, colors[i%len(colors)], x+8, h-18, r)
	}
	sb.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// xmlEscape escapes s for an SVG text node.
func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// plotPointsFrom reads the frontier rows of a results table written by
// the bench (BENCHMARKS.md: "| frontier 5000/s, exactly-once, 20ms
// (latency-budget 20ms) | publisher 0.086 + broker 0.231 = 0.317 cores;
// p50 9.97 ms, p99 17.24 ms, ..."), so that a picture can be drawn again
// from a run on record (-frontier-svg with -frontier-from).
func plotPointsFrom(md string) []plotPoint {
	var out []plotPoint
	for _, line := range strings.Split(md, "\n") {
		var p plotPoint
		var rest string
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "frontier ") || strings.Contains(cells[1], "idle") {
			continue
		}
		head := strings.TrimPrefix(strings.TrimSpace(cells[1]), "frontier ")
		f := strings.SplitN(head, ", ", 3)
		if len(f) != 3 {
			continue
		}
		if _, err := fmt.Sscanf(f[0], "%d/s", &p.rate); err != nil {
			continue
		}
		p.delivery = f[1]
		p.label, _, _ = strings.Cut(f[2], " (")
		_, rest, _ = strings.Cut(cells[2], "= ")
		if _, err := fmt.Sscanf(rest, "%f cores", &p.cores); err != nil {
			continue
		}
		_, rest, _ = strings.Cut(cells[2], "p99 ")
		if _, err := fmt.Sscanf(rest, "%f ms", &p.p99ms); err != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}
