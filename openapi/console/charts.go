package console

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/openapi/client"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// The home page's charts are SVG drawn here, inline in the page: nothing
// is loaded from elsewhere and no script draws them. Every mark carries
// its numbers in data- attributes and a <title> (a tooltip), so the page
// can be read by a test or a screen reader as well as looked at. Text
// goes through esc; numbers are formatted here.

var esc = template.HTMLEscapeString

// stateColours colour the runs' states as the rest of the console does.
var stateColours = map[axtype.ExecutionState]string{
	axtype.ExecutionPending: "#8fb3e0", axtype.ExecutionRunning: "#1f5fa8", axtype.ExecutionSucceeded: "#2e7d32",
	axtype.ExecutionFailed: "#b03a2e", axtype.ExecutionTimedOut: "#e08a1e", axtype.ExecutionCancelled: "#9aa0a8",
}

// runStatesDrawn are the states stacked, in this order from the bottom.
var runStatesDrawn = []axtype.ExecutionState{axtype.ExecutionSucceeded, axtype.ExecutionFailed, axtype.ExecutionTimedOut,
	axtype.ExecutionCancelled, axtype.ExecutionRunning, axtype.ExecutionPending}

// swatch is a legend's square of colour.
func swatch(colour string) string {
	return `<svg class="swatch" width="10" height="10" aria-hidden="true"><rect width="10" height="10" fill="` + colour + `"/></svg> `
}

// palette tells the jobs' lines apart.
var palette = []string{"#1f5fa8", "#b03a2e", "#2e7d32", "#8e44ad", "#e08a1e", "#16a2b8", "#6d4c41", "#c2185b"}

// chart geometry: a plot area left of which the y axis is labelled.
const (
	chartLeft   = 56.0
	chartTop    = 12.0
	chartHeight = 200.0
)

type svg struct{ strings.Builder }

func (b *svg) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }

func (b *svg) html() template.HTML { return template.HTML(b.String()) } //nolint:gosec // built from esc'd text and numbers

func open(b *svg, id, label string, width, height float64) {
	b.f(`<svg id="%s" class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		id, width, height, esc(label))
}

// yAxis draws the y axis's grid for values up to top, labelled by label.
func yAxis(b *svg, width, top float64, label func(float64) string) {
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := chartTop + chartHeight - chartHeight*float64(i)/4
		b.f(`<line class="grid" x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#e3e6eb"/>`, chartLeft, width-8, y, y)
		b.f(`<text x="%.0f" y="%.1f" text-anchor="end" font-size="11" fill="#5f6672">%s</text>`, chartLeft-6, y+4, esc(label(v)))
	}
}

// timeAxis labels the window every three hours, in UTC.
func timeAxis(b *svg, since time.Time, x func(time.Time) float64) {
	first := since.UTC().Truncate(3 * time.Hour).Add(3 * time.Hour)
	for t := first; t.Before(since.Add(24 * time.Hour)); t = t.Add(3 * time.Hour) {
		b.f(`<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11" fill="#5f6672">%s</text>`,
			x(t), chartTop+chartHeight+16, t.Format("15:04"))
	}
}

// niceTop rounds a chart's largest value up to a round number.
func niceTop(v float64) float64 {
	if v <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// runsChart stacks each minute's runs by state: one bar per minute and
// state, in a series per state whose data-total is its runs' count.
func runsChart(o *axtype.Overview) template.HTML {
	const width = chartLeft + 1440 + 8
	perMinute := map[time.Time]int64{}
	totals := map[axtype.ExecutionState]int64{}
	var top int64
	for _, r := range o.Runs {
		perMinute[r.Minute] += r.Runs
		top = max(top, perMinute[r.Minute])
		totals[r.State] += r.Runs
	}
	yTop := niceTop(float64(top))
	x := func(t time.Time) float64 { return chartLeft + t.Sub(o.Since).Minutes() }
	var b svg
	open(&b, "runs-chart", "Runs per minute by state, last 24 hours", width, chartTop+chartHeight+24)
	yAxis(&b, width, yTop, func(v float64) string { return trimFloat(v) })
	timeAxis(&b, o.Since, x)
	stacked := map[time.Time]float64{}
	for _, state := range runStatesDrawn {
		if totals[state] == 0 {
			continue
		}
		b.f(`<g class="series" data-state="%s" data-total="%d" fill="%s">`, state, totals[state], stateColours[state])
		for _, r := range o.Runs {
			if r.State != state {
				continue
			}
			h := chartHeight * float64(r.Runs) / yTop
			y := chartTop + chartHeight - stacked[r.Minute] - h
			stacked[r.Minute] += h
			b.f(`<rect class="bar" x="%.1f" y="%.2f" width="1" height="%.2f" data-minute="%s" data-runs="%d"><title>%s UTC: %d %s</title></rect>`,
				max(x(r.Minute), chartLeft), y, h, r.Minute.UTC().Format(time.RFC3339), r.Runs,
				r.Minute.UTC().Format("2006-01-02 15:04"), r.Runs, state)
		}
		b.f(`</g>`)
	}
	b.f(`</svg>`)
	// The legend names each state with its count, outside the SVG so it
	// reads as text.
	b.f(`<p class="legend" id="runs-legend">`)
	for _, state := range runStatesDrawn {
		if totals[state] > 0 {
			b.f(`<span data-state="%s" data-total="%d">%s%s %d</span> `, state, totals[state], swatch(stateColours[state]), state, totals[state])
		}
	}
	if len(totals) == 0 {
		b.f(`No runs in the last 24 hours.`)
	}
	b.f(`</p>`)
	return b.html()
}

// durationsChart draws each busy job's hourly p50 (solid) and p95
// (dashed) run time as lines over the window.
func durationsChart(o *axtype.Overview) template.HTML {
	const width = chartLeft + 960 + 8
	var top time.Duration
	for _, d := range o.Durations {
		top = max(top, d.P95)
	}
	yTop := niceTop(top.Seconds())
	x := func(t time.Time) float64 { return chartLeft + 960*t.Sub(o.Since).Hours()/24 }
	y := func(d time.Duration) float64 { return chartTop + chartHeight - chartHeight*d.Seconds()/yTop }
	var b svg
	open(&b, "durations-chart", "Run time per job (p50 and p95 per hour), last 24 hours", width, chartTop+chartHeight+24)
	yAxis(&b, width, yTop, func(v float64) string { return seconds(v) })
	timeAxis(&b, o.Since, x)
	var jobs []string
	byJob := map[string][]axtype.JobDurations{}
	for _, d := range o.Durations {
		name := d.Group + "/" + d.Name
		if _, ok := byJob[name]; !ok {
			jobs = append(jobs, name)
		}
		byJob[name] = append(byJob[name], d)
	}
	var legend svg
	legend.f(`<p class="legend" id="durations-legend">`)
	for i, name := range jobs {
		colour := palette[i%len(palette)]
		points := byJob[name]
		b.f(`<g class="series" data-job="%s" data-hours="%d" stroke="%s" fill="%s">`, esc(name), len(points), colour, colour)
		for _, stat := range []string{"p50", "p95"} {
			pick := func(d axtype.JobDurations) time.Duration {
				if stat == "p50" {
					return d.P50
				}
				return d.P95
			}
			var path []string
			for _, d := range points {
				path = append(path, fmt.Sprintf("%.1f,%.1f", x(d.Hour.Add(30*time.Minute)), y(pick(d))))
			}
			dash := ""
			if stat == "p95" {
				dash = ` stroke-dasharray="5 3"`
			}
			b.f(`<polyline class="line" data-stat="%s" points="%s" fill="none" stroke-width="2"%s/>`, stat, strings.Join(path, " "), dash)
			for _, d := range points {
				b.f(`<circle class="point" data-stat="%s" data-hour="%s" data-seconds="%.3f" data-runs="%d" cx="%.1f" cy="%.1f" r="3"><title>%s, %s UTC: %s %s over %d runs</title></circle>`,
					stat, d.Hour.UTC().Format(time.RFC3339), pick(d).Seconds(), d.Runs, x(d.Hour.Add(30*time.Minute)), y(pick(d)),
					esc(name), d.Hour.UTC().Format("15:04"), stat, seconds(pick(d).Seconds()), d.Runs)
			}
		}
		b.f(`</g>`)
		legend.f(`<span data-job="%s">%s%s</span> `, esc(name), swatch(colour), esc(name))
	}
	b.f(`</svg>`)
	if len(jobs) == 0 {
		legend.f(`No runs finished in the last 24 hours.`)
	} else {
		legend.f(`<span class="note">solid: median (p50); dashed: p95</span>`)
	}
	legend.f(`</p>`)
	return b.html() + legend.html()
}

// hbar is one row of a horizontal bar chart.
type hbar struct {
	label string
	value float64
	of    float64 // the bar's whole, drawn behind it; 0: none
	text  string
	attrs string // data- attributes, already escaped
}

// hbars draws labelled horizontal bars scaled to the largest value (or to
// each bar's whole, when it has one).
func hbars(id, label string, rows []hbar, empty string) template.HTML {
	const width, barLeft, barWidth, rowHeight = 900.0, 220.0, 400.0, 22.0
	if len(rows) == 0 {
		return template.HTML(`<p class="note" id="` + id + `">` + esc(empty) + `</p>`) //nolint:gosec // escaped
	}
	var top float64
	for _, r := range rows {
		top = max(top, r.value, r.of)
	}
	top = niceTop(top)
	var b svg
	open(&b, id, label, width, rowHeight*float64(len(rows))+8)
	for i, r := range rows {
		y := 4 + rowHeight*float64(i)
		b.f(`<g class="row" %s>`, r.attrs)
		b.f(`<text x="%.0f" y="%.1f" text-anchor="end" font-size="12" fill="#1d2330">%s</text>`, barLeft-8, y+14, esc(r.label))
		if r.of > 0 {
			b.f(`<rect class="whole" x="%.0f" y="%.1f" width="%.1f" height="16" fill="#e3e6eb"/>`, barLeft, y+2, barWidth*r.of/top)
		}
		b.f(`<rect class="bar" x="%.0f" y="%.1f" width="%.1f" height="16" fill="#4a6fa5"><title>%s: %s</title></rect>`,
			barLeft, y+2, barWidth*r.value/top, esc(r.label), esc(r.text))
		b.f(`<text x="%.0f" y="%.1f" font-size="12" fill="#1d2330">%s</text>`, barLeft+barWidth+8, y+14, esc(r.text))
		b.f(`</g>`)
	}
	b.f(`</svg>`)
	return b.html()
}

// queueChart draws the pending tasks by class and priority.
func queueChart(o *axtype.Overview) template.HTML {
	rows := make([]hbar, 0, len(o.Queue))
	for _, q := range o.Queue {
		class := cmp.Or(q.Class, "(no class)")
		rows = append(rows, hbar{label: fmt.Sprintf("%s · priority %d", class, q.Priority), value: float64(q.Tasks),
			text:  fmt.Sprintf("%d waiting", q.Tasks),
			attrs: fmt.Sprintf(`data-class="%s" data-priority="%d" data-tasks="%d"`, esc(q.Class), q.Priority, q.Tasks)})
	}
	return hbars("queue-chart", "Pending tasks by rate class and priority", rows, "No task is waiting.")
}

// agentsChart draws each agent's running tasks against its capacity.
func agentsChart(agents []client.AgentInfo) template.HTML {
	slices.SortFunc(agents, func(a, b client.AgentInfo) int { return strings.Compare(a.Name, b.Name) })
	rows := make([]hbar, 0, len(agents))
	for _, a := range agents {
		rows = append(rows, hbar{label: a.Name, value: float64(a.Running), of: float64(a.Capacity),
			text: fmt.Sprintf("%d / %d running, load %.2f, %s", a.Running, a.Capacity, a.Load, a.State),
			attrs: fmt.Sprintf(`data-agent="%s" data-running="%d" data-capacity="%d" data-state="%s"`,
				esc(a.Name), a.Running, a.Capacity, esc(string(a.State)))})
	}
	return hbars("agents-chart", "Agents: running tasks against capacity", rows, "No agents.")
}

// trimFloat prints a count without a needless fraction.
func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// seconds prints a run time briefly.
func seconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 120:
		return trimFloat(math.Round(s*10)/10) + " s"
	case s < 7200:
		return trimFloat(math.Round(s/6)/10) + " min"
	}
	return trimFloat(math.Round(s/360)/10) + " h"
}
