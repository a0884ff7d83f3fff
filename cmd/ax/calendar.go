package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newCalendarCommand() *cobra.Command {
	return newGroupCommand("calendar", "Manage exclusion calendars: days the jobs that exclude them do not fire",
		newCalendarCreateCommand(), newCalendarApplyCommand(), newCalendarListCommand(),
		calendarByName("get", "Show a calendar and its entries"), calendarByName("delete", "Delete a calendar no job excludes"))
}

// calendarView is a calendar as the API answers it; the CLI reads the
// answer's bytes so -o json and -o yaml show them unchanged.
type calendarView struct {
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Timezone    string              `json:"timezone,omitempty"`
	Entries     []map[string]string `json:"entries"`
	Version     int64               `json:"version,omitempty"`
	UpdatedAt   string              `json:"updated_at,omitempty"`
}

// newCalendarCreateCommand: ax calendar create NAME --timezone TZ
// --date D --range FROM..TO --yearly MM-DD (each repeatable).
func newCalendarCreateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "create NAME [--timezone TZ] [--date YYYY-MM-DD] [--range FROM..TO] [--yearly MM-DD]",
		Short: "Create a calendar", Args: exactArgs(1),
		Example: "  ax calendar create cn-holidays --timezone Asia/Shanghai --date 2026-01-01 --range 2026-10-01..2026-10-07 --yearly 12-25"}
	af := addAPIFlags(cmd)
	fs := cmd.Flags()
	tz := fs.String("timezone", "UTC", "IANA timezone a tick's date is read in")
	desc := fs.String("description", "", "what the calendar holds")
	dates := fs.StringArray("date", nil, "an excluded date, YYYY-MM-DD (repeatable)")
	ranges := fs.StringArray("range", nil, "an excluded inclusive range, FROM..TO (repeatable)")
	yearly := fs.StringArray("yearly", nil, "a month-day excluded every year, MM-DD (repeatable)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		entries := []map[string]string{}
		for _, d := range *dates {
			entries = append(entries, map[string]string{"date": d})
		}
		for _, r := range *ranges {
			from, to, ok := strings.Cut(r, "..")
			if !ok {
				return usageErrorf("--range %q: give FROM..TO, such as 2026-10-01..2026-10-07", r)
			}
			entries = append(entries, map[string]string{"from": from, "to": to})
		}
		for _, y := range *yearly {
			entries = append(entries, map[string]string{"yearly": y})
		}
		body, err := json.Marshal(calendarView{Name: args[0], Description: *desc, Timezone: *tz, Entries: entries})
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.CreateCalendarWithBodyWithResponse(cmd.Context(), "application/json", bytes.NewReader(body))
		if err != nil {
			return unreachable(err)
		}
		if resp.StatusCode() != http.StatusCreated {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return showCalendar(af.output, resp.Body)
	}
	return cmd
}

// newCalendarApplyCommand: ax calendar apply -f FILE creates or replaces
// each calendar of a YAML or JSON file (one per document).
func newCalendarApplyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "apply -f FILE", Short: "Create or replace the calendars of a YAML or JSON file (one per document)", Args: noArgs}
	af := addAPIFlags(cmd)
	file := cmd.Flags().StringP("file", "f", "", "calendars as YAML or JSON, one per document (- for stdin)")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *file == "" {
			return usageErrorf("usage: ax calendar apply -f calendars.yaml")
		}
		data, err := readFileOrStdin(*file)
		if err != nil {
			return err
		}
		docs, err := yamlDocuments(data)
		if err != nil {
			return usageErrorf("%s: %v", *file, err)
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		for i, doc := range docs {
			var v calendarView
			if err := json.Unmarshal(doc, &v); err != nil || v.Name == "" {
				return usageErrorf("%s: document %d is not a calendar with a name", *file, i+1)
			}
			// Replace it; create it when there is none of that name.
			resp, err := c.UpdateCalendarWithBodyWithResponse(cmd.Context(), v.Name, "application/json", bytes.NewReader(doc))
			if err != nil {
				return unreachable(err)
			}
			status, body := resp.StatusCode(), resp.Body
			if status == http.StatusNotFound {
				created, err := c.CreateCalendarWithBodyWithResponse(cmd.Context(), "application/json", bytes.NewReader(doc))
				if err != nil {
					return unreachable(err)
				}
				status, body = created.StatusCode(), created.Body
			}
			if status != http.StatusOK && status != http.StatusCreated {
				return apiError(status, body)
			}
			if err := showCalendar(af.output, body); err != nil {
				return err
			}
		}
		return nil
	}
	return cmd
}

// readFileOrStdin reads a file, or stdin for "-".
func readFileOrStdin(file string) ([]byte, error) {
	r, err := readInput(file)
	if err != nil {
		return nil, usageErr(err)
	}
	if c, ok := r.(io.Closer); ok && file != "-" {
		defer c.Close()
	}
	return io.ReadAll(r)
}

func newCalendarListCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List calendars", Args: noArgs}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.ListCalendarsWithResponse(cmd.Context())
		if err != nil {
			return unreachable(err)
		}
		if resp.StatusCode() != http.StatusOK {
			return apiError(resp.StatusCode(), resp.Body)
		}
		var list struct {
			Calendars []calendarView `json:"calendars"`
		}
		if err := json.Unmarshal(resp.Body, &list); err != nil {
			return fmt.Errorf("error reading the server's answer: %w", err)
		}
		return renderBody(af.output, resp.Body, func() error { return calendarTable(list.Calendars) })
	}
	return cmd
}

// calendarByName makes get and delete, which take one calendar name.
func calendarByName(verb, short string) *cobra.Command {
	cmd := &cobra.Command{Use: verb + " NAME", Short: short, Args: exactArgs(1)}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		if verb == "delete" {
			resp, err := c.DeleteCalendarWithResponse(cmd.Context(), args[0])
			if err != nil {
				return unreachable(err)
			}
			if resp.StatusCode() != http.StatusNoContent {
				return apiError(resp.StatusCode(), resp.Body)
			}
			fmt.Println("deleted", args[0])
			return nil
		}
		resp, err := c.GetCalendarWithResponse(cmd.Context(), args[0])
		if err != nil {
			return unreachable(err)
		}
		if resp.StatusCode() != http.StatusOK {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return showCalendar(af.output, resp.Body)
	}
	return cmd
}

// showCalendar prints one calendar: its row, then its entries.
func showCalendar(output outputFormat, body []byte) error {
	var v calendarView
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("error reading the server's answer: %w", err)
	}
	return renderBody(output, body, func() error {
		if err := calendarTable([]calendarView{v}); err != nil {
			return err
		}
		for _, e := range v.Entries {
			fmt.Println("  " + entryText(e))
		}
		return nil
	})
}

func calendarTable(cals []calendarView) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tTIMEZONE\tENTRIES\tVERSION\tUPDATED")
	for _, c := range cals {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", c.Name, c.Timezone, len(c.Entries), c.Version, c.UpdatedAt)
	}
	return w.Flush()
}

// entryText shows an entry as the CLI takes it.
func entryText(e map[string]string) string {
	switch {
	case e["date"] != "":
		return e["date"]
	case e["yearly"] != "":
		return e["yearly"] + " (every year)"
	}
	return e["from"] + ".." + e["to"]
}
