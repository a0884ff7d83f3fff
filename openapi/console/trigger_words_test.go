package console

import "testing"

// TestTriggerWords: the common cron shapes and intervals are said in
// words, as the guides write them; any other shape is left to the
// expression itself.
func TestTriggerWords(t *testing.T) {
	for expr, want := range map[string]string{
		"30 1 * * *":      "every day at 01:30 Europe/London",
		"0 30 1 * * ?":    "every day at 01:30 Europe/London",
		"*/2 * * * *":     "every 2 minutes",
		"* * * * *":       "every minute",
		"5 * * * *":       "every hour at minute 5",
		"15 */6 * * *":    "every 6 hours at minute 15",
		"0 9 * * 1-5":     "on weekdays at 09:00 Europe/London",
		"0 9 * * MON":     "every Monday at 09:00 Europe/London",
		"0 9,17 * * 1,3":  "on Monday and Wednesday at 09:00 and 17:00 Europe/London",
		"0 3 1 * *":       "on day 1 of every month at 03:00 Europe/London",
		"0 0 12 L * ?":    "on the last day of every month at 12:00 Europe/London",
		"0 0 12 ? * 5L":   "",
		"0 0 1 1 *":       "",
		"10 0 3 * * *":    "",
		"0 1-3 * * *":     "",
		"0 0 12 L-3W * ?": "",
	} {
		got, ok := cronWords(expr, "Europe/London")
		if got != want || ok != (want != "") {
			t.Errorf("cronWords(%q) = %q, %v; want %q", expr, got, ok, want)
		}
	}
	for secs, want := range map[int64]string{120: "every 2 minutes", 60: "every minute", 90: "every 90 seconds",
		3600: "every hour", 7200: "every 2 hours", 86400: "every day", 1: "every second"} {
		if got := intervalWords(secs); got != want {
			t.Errorf("intervalWords(%d) = %q; want %q", secs, got, want)
		}
	}
}
