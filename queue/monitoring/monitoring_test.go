package monitoring_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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

// TestPromtoolChecksRules runs promtool on the rules: from PATH, else from
// Debian's prometheus package unpacked into the user cache (no root).
func TestPromtoolChecksRules(t *testing.T) {
	promtool, err := findPromtool(t)
	if err != nil {
		t.Skipf("promtool not available (%v); TestAlertRulesAreWellFormed still checks the file", err)
	}
	file := filepath.Join(t.TempDir(), "alerts.yml")
	require.NoError(t, os.WriteFile(file, monitoring.Alerts, 0o600))
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

func findPromtool(t *testing.T) (string, error) {
	if p, err := exec.LookPath("promtool"); err == nil {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "ax-test", "prometheus-deb")
	bin := filepath.Join(dir, "usr", "bin", "promtool")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", errors.New("no apt-get to fetch Debian's prometheus package")
	}
	download := t.TempDir()
	cmd := exec.Command("apt-get", "download", "prometheus")
	cmd.Dir = download
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("apt-get download prometheus: " + strings.TrimSpace(string(out)))
	}
	debs, _ := filepath.Glob(filepath.Join(download, "prometheus_*.deb"))
	if len(debs) != 1 {
		return "", errors.New("apt-get download gave no prometheus package")
	}
	tmp := dir + ".tmp" + filepath.Base(download)
	if out, err := exec.Command("dpkg", "-x", debs[0], tmp).CombinedOutput(); err != nil {
		return "", errors.New("dpkg -x: " + strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		_ = os.RemoveAll(tmp) // another test process unpacked it first
	}
	return bin, nil
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
