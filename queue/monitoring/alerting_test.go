package monitoring_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ax-scheduler/ax/queue/monitoring"
)

// TestPromtoolRuleTests runs the unit tests of the rules (alerts_test.yml):
// each alert fires on the series it is about, and not on their near
// misses, with the labels and text Alertmanager routes and shows.
func TestPromtoolRuleTests(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(requireTool(t, "promtool"), "test", "rules", "alerts_test.yml").CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// TestEveryAlertIsUnitTested: alerts_test.yml has, for every alert of
// alerts.yml, an evaluation where it fires and one where it does not.
func TestEveryAlertIsUnitTested(t *testing.T) {
	t.Parallel()
	var rules ruleFile
	require.NoError(t, yaml.Unmarshal(monitoring.Alerts, &rules))
	raw, err := os.ReadFile("alerts_test.yml")
	require.NoError(t, err)
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name      string `yaml:"name"`
			AlertRule []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &tests))
	require.Equal(t, []string{"alerts.yml"}, tests.RuleFiles)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRule {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range rules.Groups[0].Rules {
		require.True(t, fires[r.Alert], "alerts_test.yml has no case where %s fires", r.Alert)
		require.True(t, quiet[r.Alert], "alerts_test.yml has no case where %s stays quiet", r.Alert)
	}
}

// TestAmtoolChecksConfig: Alertmanager accepts the configuration and its
// template.
func TestAmtoolChecksConfig(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(requireTool(t, "amtool"), "check-config", "alertmanager.yml").CombinedOutput()
	require.NoError(t, err, "amtool check-config:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
	require.Contains(t, string(out), "1 templates")
}

// TestAmtoolRoutesByOwner: an alert about a job reaches the receiver of
// the job's owner; alerts about ax itself, and jobs whose owner has no
// route, reach the operators.
func TestAmtoolRoutesByOwner(t *testing.T) {
	t.Parallel()
	amtool := requireTool(t, "amtool")
	for _, tc := range []struct {
		labels   []string
		receiver string
	}{
		{[]string{"alertname=AxJobFailing", "severity=page", "owner=team-billing", "group=billing", "job=nightly"}, "team-billing"},
		{[]string{"alertname=AxJobFailing", "severity=page", "owner=team-reports", "group=reports", "job=weekly"}, "team-reports"},
		{[]string{"alertname=AxJobFailing", "severity=page", "owner=team-billing-eu", "job=nightly"}, "ax-operators"},
		{[]string{"alertname=AxJobFailing", "severity=page", "job=no-owner"}, "ax-operators"},
		{[]string{"alertname=AxScheduleMissed", "severity=page"}, "ax-operators"},
		{[]string{"alertname=AxNoReadyAgents", "severity=page", "pool=billing"}, "ax-operators"},
		{[]string{"alertname=AxDBPoolWaiting", "severity=warn", "instance=ax-1"}, "ax-operators"},
	} {
		args := append([]string{"config", "routes", "test", "--config.file=alertmanager.yml",
			"--verify.receivers=" + tc.receiver}, tc.labels...)
		cmd := exec.Command(amtool, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "amtool %s:\n%s%s", strings.Join(args, " "), out, stderr.String())
		require.Equal(t, tc.receiver, strings.TrimSpace(string(out)), "%v", tc.labels)
	}
}

// TestAmtoolRendersChatMessage: the chat text of a notification names
// the owner and each job's summary, resolved ones marked.
func TestAmtoolRendersChatMessage(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data.json")
	require.NoError(t, os.WriteFile(data, []byte(`{
	  "receiver": "team-billing", "status": "firing",
	  "alerts": [
	    {"status": "firing", "labels": {"alertname": "AxJobFailing", "owner": "team-billing", "group": "billing", "job": "nightly"},
	     "annotations": {"summary": "Job billing/nightly (owner team-billing) failed 3 times in a row", "description": "More than half failed."}},
	    {"status": "resolved", "labels": {"alertname": "AxJobFailing", "owner": "team-billing", "group": "billing", "job": "weekly"},
	     "annotations": {"summary": "Job billing/weekly (owner team-billing) failed 4 times in a row"}}],
	  "groupLabels": {"alertname": "AxJobFailing", "owner": "team-billing"},
	  "commonLabels": {"alertname": "AxJobFailing", "owner": "team-billing", "group": "billing"},
	  "commonAnnotations": {}, "externalURL": "http://alertmanager.example.com"}`), 0o600))
	out, err := exec.Command(requireTool(t, "amtool"), "template", "render", "--template.glob=ax.tmpl",
		"--template.data="+data, `--template.text={{ template "ax.title" . }}`+"\n"+`{{ template "ax.text" . }}`).CombinedOutput()
	require.NoError(t, err, "amtool template render:\n%s", out)
	require.Equal(t, "[FIRING:1] AxJobFailing (team-billing)\n"+
		"Job billing/nightly (owner team-billing) failed 3 times in a row\n"+
		"More than half failed.\n"+
		"resolved: Job billing/weekly (owner team-billing) failed 4 times in a row\n", string(out))
}
