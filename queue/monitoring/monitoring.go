// Package monitoring holds what operators load into their monitoring:
// Prometheus alert rules (alerts.yml, unit-tested by alerts_test.yml with
// promtool), an Alertmanager configuration that sends each job's alerts
// to its owner (alertmanager.yml with its template ax.tmpl, checked with
// amtool) and a Grafana dashboard (dashboard.json) over the metrics of
// ax serve. The rules and the dashboard are embedded so tests can check
// that every metric they use is exported.
package monitoring

import (
	_ "embed"
	"regexp"
	"slices"
	"strings"
)

// Alerts is the Prometheus rule file.
//
//go:embed alerts.yml
var Alerts []byte

// Dashboard is the Grafana dashboard.
//
//go:embed dashboard.json
var Dashboard []byte

var metricName = regexp.MustCompile(`\bax_[a-z0-9_]+`)

// MetricNames lists the ax metrics the rules and the dashboard use, as
// exported (histogram series are reduced to their family name).
func MetricNames() []string {
	var rules strings.Builder
	for line := range strings.Lines(string(Alerts)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") { // comments name metric families loosely
			rules.WriteString(line)
		}
	}
	var names []string
	for _, m := range metricName.FindAllString(rules.String()+string(Dashboard), -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(m, "_seconds"+suffix) {
				m = strings.TrimSuffix(m, suffix)
			}
		}
		names = append(names, m)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
