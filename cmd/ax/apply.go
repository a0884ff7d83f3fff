package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

// maxApplyFileBytes bounds a file given to ax apply; the server takes at
// most 8 MiB of declaration.
const maxApplyFileBytes = 8 << 20

// runApply declares the jobs of a file (POST /v1/declarations): the file
// is the truth for its set of jobs, as a manifest is for kubectl apply.
func newApplyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "apply -f FILE", Short: "Declare the jobs of a YAML or JSON file: the file is the truth for its set of jobs",
		Long: "Declare the jobs of a YAML or JSON file (POST /v1/declarations): the file is the truth for its set of\n" +
			"jobs, as a manifest is for kubectl apply. A job that exists already and no set manages (made with\n" +
			"`ax job create` or the console) is only taken over with --adopt.",
		Args: noArgs,
	}
	af := addAPIFlags(cmd)
	fs := cmd.Flags()
	file := fs.StringP("file", "f", "", "jobs as YAML or JSON: one job, a list (jobs: [...] or [...]), or several YAML documents (- for stdin)")
	dryRun := fs.Bool("dry-run", false, "show what would change, change nothing")
	prune := fs.Bool("prune", false, "pause the jobs of this set that the file no longer has")
	manager := fs.String("manager", "", "name of the declaration set (default: the documents' managed_by, else file:<file name>)")
	version := fs.String("version", "", "version of this declaration: an older one than the set's is refused")
	force := fs.Bool("force", false, "apply an older version, and take over jobs that another set manages")
	adopt := fs.Bool("adopt", false, "take over jobs of the file that exist already and no set manages")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *file == "" {
			return usageErrorf("usage: ax apply -f jobs.yaml [--dry-run] [--prune] [--adopt] [--manager NAME] [--version V] [--force]")
		}
		jobs, managedBy, err := readJobFile(*file)
		if err != nil {
			return err
		}
		if *manager != "" {
			managedBy = *manager
		}
		if managedBy == "" {
			if *file == "-" {
				return usageErrorf("jobs from stdin: name their set with --manager (or give managed_by in the documents)")
			}
			managedBy = "file:" + filepath.Base(*file)
		}
		body, err := json.Marshal(map[string]any{"managed_by": managedBy, "version": *version, "source": source(*file),
			"jobs": jobs, "prune": *prune, "dry_run": *dryRun, "force": *force, "adopt": *adopt})
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.DeclareJobsWithBodyWithResponse(cmd.Context(), "application/json", bytes.NewReader(body))
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return render(af.output, resp.JSON200, func() error { return showReport(os.Stdout, resp.JSON200) })
	}
	return cmd
}

// source says where a file's jobs are declared: its absolute path.
func source(file string) string {
	if file == "-" {
		return "stdin of ax apply"
	}
	if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	host, _ := os.Hostname()
	if host != "" {
		return file + " on " + host
	}
	return file
}

// readJobFile reads the jobs of file and the managed_by they share (what
// `ax job get -o yaml` writes), if any.
func readJobFile(file string) ([]json.RawMessage, string, error) {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", fmt.Errorf("error reading %s: %w", file, err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxApplyFileBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("error reading %s: %w", file, err)
	}
	if len(data) > maxApplyFileBytes {
		return nil, "", fmt.Errorf("%s is larger than %d bytes", file, maxApplyFileBytes)
	}
	docs, err := yamlDocuments(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s is not YAML or JSON: %w", file, err)
	}
	var jobs []json.RawMessage
	for i, doc := range docs {
		more, err := jobsOf(doc)
		if err != nil {
			return nil, "", fmt.Errorf("%s, document %d: %w", file, i+1, err)
		}
		jobs = append(jobs, more...)
	}
	if len(jobs) == 0 {
		return nil, "", fmt.Errorf("%s holds no job", file)
	}
	return jobs, sharedManager(jobs), nil
}

// jobsOf reads one document: a job, a list {"jobs": [...]}, or an array.
func jobsOf(doc json.RawMessage) ([]json.RawMessage, error) {
	trimmed := bytes.TrimSpace(doc)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var jobs []json.RawMessage
		return jobs, json.Unmarshal(doc, &jobs)
	}
	var probe struct {
		Name *string          `json:"name"`
		Jobs *json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(doc, &probe); err != nil {
		return nil, errors.New("a document must be a job, a list (jobs: [...]) or an array of jobs")
	}
	if probe.Name == nil && probe.Jobs != nil {
		var jobs []json.RawMessage
		return jobs, json.Unmarshal(*probe.Jobs, &jobs)
	}
	return []json.RawMessage{doc}, nil
}

// sharedManager returns the managed_by every job names, or "".
func sharedManager(jobs []json.RawMessage) string {
	var shared string
	for i, j := range jobs {
		var m struct {
			ManagedBy string `json:"managed_by"`
		}
		if json.Unmarshal(j, &m) != nil || m.ManagedBy == "" || (i > 0 && m.ManagedBy != shared) {
			return ""
		}
		shared = m.ManagedBy
	}
	return shared
}

// showReport prints a declaration's outcome job by job, with the changes.
func showReport(out io.Writer, r *client.DeclarationReport) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, j := range deref(r.Jobs) {
		fmt.Fprintf(w, "%s\t%s/%s\t%s\n", j.Action, j.Group, j.Name, deref(j.Reason))
		for _, c := range deref(j.Changes) {
			fmt.Fprintf(w, "\t  %s\t\n", c)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var counts []string
	for _, a := range []string{"created", "updated", "paused", "unchanged"} {
		if n := r.Counts[a]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, a))
		}
	}
	summary := strings.Join(counts, ", ")
	switch {
	case r.DryRun:
		summary += " (dry run: nothing changed)"
	case !r.Changed:
		summary += " (nothing to change)"
	}
	_, err := fmt.Fprintf(out, "%s: %s\n", r.ManagedBy, summary)
	return err
}
