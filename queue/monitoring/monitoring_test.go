package monitoring_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ax-scheduler/ax/queue/monitoring"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRulesAreWellFormed: every rule has a name, an expression over
// ax metrics, a severity and a summary.
func TestAlertRulesAreWellFormed(t *testing.T) {
	var rules ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(monitoring.Alerts)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rules))
	require.Len(t, rules.Groups, 1)
	names := map[string]bool{}
	for _, r := range rules.Groups[0].Rules {
		require.NotEmpty(t, r.Alert)
		require.False(t, names[r.Alert], "duplicate alert %s", r.Alert)
		names[r.Alert] = true
		require.Contains(t, r.Expr, "ax_", r.Alert)
		require.Equal(t, strings.Count(r.Expr, "("), strings.Count(r.Expr, ")"), "balanced parentheses in %s", r.Alert)
		require.Contains(t, []string{"page", "warn"}, r.Labels["severity"], r.Alert)
		require.NotEmpty(t, r.Annotations["summary"], r.Alert)
	}
	for _, want := range []string{"AxJobFailing", "AxScheduleMissed", "AxCallbacksFailing", "AxQueueDepthGrowing", "AxNoReadyAgents"} {
		require.True(t, names[want], "alert %s", want)
	}
}

// TestPromtoolChecksRules: promtool accepts the rule file.
func TestPromtoolChecksRules(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(requireTool(t, "promtool"), "check", "rules", "alerts.yml").CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// TestDashboardIsValid: the dashboard parses and every panel queries ax
// metrics.
func TestDashboardIsValid(t *testing.T) {
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(monitoring.Dashboard, &dash))
	require.Equal(t, "ax-scheduler", dash.UID)
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, target := range p.Targets {
			require.Contains(t, target.Expr, "ax_", p.Title)
		}
	}
	require.Contains(t, monitoring.MetricNames(), "ax_fire_lag_seconds")
}
