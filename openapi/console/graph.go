package console

import (
	"html/template"

	"github.com/ax-scheduler/ax/openapi/client"
)

// The job page draws a job's place among the jobs that run after other
// jobs (trigger kind after): its upstreams in the left column, the job in
// the middle, its downstreams on the right, each box a link to its job and
// each edge labelled with the end it waits for. Drawn here as inline SVG,
// as the home page's charts are.

const (
	graphBoxWidth  = 220.0
	graphBoxHeight = 30.0
	graphRowGap    = 14.0
	graphColumnGap = 70.0
)

// jobGraph draws g; "" when the job has neither upstreams nor downstreams.
func jobGraph(g client.JobGraph) template.HTML {
	up, down := list(g.Upstream), list(g.Downstream)
	if len(up) == 0 && len(down) == 0 {
		return ""
	}
	rows := max(len(up), len(down), 1)
	height := float64(rows)*(graphBoxHeight+graphRowGap) + graphRowGap
	width := 3*graphBoxWidth + 2*graphColumnGap + 2
	var b svg
	open(&b, "job-graph", "The jobs "+g.Job+" runs after, and those that run after it", width, height)
	rowY := func(i, n int) float64 { // n boxes centred in the column
		top := (height - float64(n)*(graphBoxHeight+graphRowGap) + graphRowGap) / 2
		return top + float64(i)*(graphBoxHeight+graphRowGap)
	}
	midX := graphBoxWidth + graphColumnGap + 1
	midY := rowY(0, 1)
	mode := ""
	if g.Mode != nil {
		mode = " (" + string(*g.Mode) + ")"
	}
	graphBox(&b, "", midX, midY, g.Job+mode, "job")
	for i, e := range up {
		y := rowY(i, len(up))
		graphEdge(&b, 1+graphBoxWidth, y+graphBoxHeight/2, midX, midY+graphBoxHeight/2, string(e.On))
		graphBox(&b, Prefix+"/jobs/"+e.JobId.String(), 1, y, e.Job, "upstream")
	}
	for i, e := range down {
		y := rowY(i, len(down))
		graphEdge(&b, midX+graphBoxWidth, midY+graphBoxHeight/2, midX+graphBoxWidth+graphColumnGap, y+graphBoxHeight/2,
			string(e.On))
		graphBox(&b, Prefix+"/jobs/"+e.JobId.String(), midX+graphBoxWidth+graphColumnGap, y, e.Job, "downstream")
	}
	b.f(`</svg>`)
	return b.html()
}

// graphBox draws a job's box at (x, y), a link to href unless it is "".
func graphBox(b *svg, href string, x, y float64, name, role string) {
	if href != "" {
		b.f(`<a href="%s">`, esc(href))
	}
	b.f(`<g class="graph-job" data-role="%s" data-job="%s"><title>%s</title>`, role, esc(name), esc(name))
	fill := "#eef3fa"
	if role == "job" {
		fill = "#cfe0f5"
	}
	b.f(`<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" rx="4" fill="%s" stroke="#1f5fa8"/>`,
		x, y, graphBoxWidth, graphBoxHeight, fill)
	label := name
	if len(label) > 30 {
		label = label[:29] + "…"
	}
	b.f(`<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">%s</text></g>`,
		x+graphBoxWidth/2, y+graphBoxHeight/2+4, esc(label))
	if href != "" {
		b.f(`</a>`)
	}
}

// graphEdge draws an arrow from (x1, y1) to (x2, y2) labelled on (the end
// the upstream's run must reach).
func graphEdge(b *svg, x1, y1, x2, y2 float64, on string) {
	b.f(`<g class="graph-edge" data-on="%s"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555"/>`,
		esc(on), x1, y1, x2-6, y2)
	b.f(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="#555"/>`, x2, y2, x2-7, y2-4, x2-7, y2+4)
	b.f(`<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%s</text></g>`,
		(x1+x2)/2, (y1+y2)/2-4, esc(on))
}
