package e2ekit

// Manual is the trigger of jobs run by hand.
var Manual = map[string]any{"kind": "manual"}

// Shell is a shell executor running command.
func Shell(command string) map[string]any { return map[string]any{"kind": "shell", "command": command} }

// EverySecond is a healthy job that fires each second.
func EverySecond(name string) map[string]any {
	return map[string]any{"name": name, "trigger": map[string]any{"kind": "cron", "cron": "* * * * * *"},
		"executor": Shell("true")}
}
