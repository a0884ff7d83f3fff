package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// outputFormats are the values of -o.
var outputFormats = []string{"table", "json", "yaml"}

// outputFormat is the value of -o, checked when the flag is parsed.
type outputFormat string

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }

func (o *outputFormat) Set(v string) error {
	if !slices.Contains(outputFormats, v) {
		return fmt.Errorf("must be table, json or yaml, not %q", v)
	}
	*o = outputFormat(v)
	return nil
}

// render prints v as JSON or YAML, or calls table.
func render(o outputFormat, v any, table func() error) error {
	switch o {
	case "json":
		return printJSON(v)
	case "yaml":
		body, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return printYAML(body)
	}
	return table()
}

// renderBody prints the server's answer itself as JSON or YAML (params
// keep every digit, and ax apply takes the YAML back), or calls table.
func renderBody(o outputFormat, body []byte, table func() error) error {
	switch o {
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := buf.WriteTo(os.Stdout)
		return err
	case "yaml":
		return printYAML(body)
	}
	return table()
}
