package openapi_test

import (
	"html/template"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func getPage(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode < 300 {
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	}
	return resp.StatusCode, string(raw)
}

// Every .md file of openapi/guide but README.md is a page at
// /docs/guide/<name>, listed on the index, on every guide page and on
// /docs; their links to each other work on the server as on a code host.
func TestGuidesServed(t *testing.T) {
	t.Parallel()
	env := setup(t)
	files, err := filepath.Glob("guide/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	_, index := getPage(t, env.url+"/docs/guide/")
	_, docs := getPage(t, env.url+"/docs")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".md")
		if name == "README" {
			continue
		}
		require.Contains(t, index, `href="/docs/guide/`+name+`"`)
		require.Contains(t, docs, `href="/docs/guide/`+name+`"`)
		status, page := getPage(t, env.url+"/docs/guide/"+name)
		require.Equal(t, http.StatusOK, status, name)
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		if title, ok := strings.CutPrefix(string(src), "# "); ok {
			title, _, _ = strings.Cut(title, "\n")
			if !strings.ContainsAny(title, "`*_[") { // a heading of plain words is the page's title as written
				require.Contains(t, page, "<title>"+template.HTMLEscapeString(title)+" · ax</title>", name)
			}
		}
		require.NotRegexp(t, `href="[^":]*\.md(#[^"]*)?"`, page, "%s: links to other guides point at their pages", name)
		require.NotContains(t, page, `href="../`, "%s: links to repository files are text on the server", name)
		require.NotContains(t, page, "<script")
	}
	status, page := getPage(t, env.url+"/docs/guide/callbacks")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `<h1 id="receiving-callbacks">`, "headings carry ids to link to")
	_, page = getPage(t, env.url+"/docs/guide/production")
	require.Contains(t, page, "<table>", "GFM tables render (the configuration table)")
	require.Contains(t, page, `<a href="agents">Agents</a>`, "a link to another guide points at its page")
	status, _ = getPage(t, env.url+"/docs/guide/no-such-guide")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = getPage(t, env.url+"/docs/guide/..%2fapi.go")
	require.Equal(t, http.StatusNotFound, status)
}

// The search box of /docs finds guide sections and operations, and
// refuses queries past its bounds.
func TestDocsSearch(t *testing.T) {
	t.Parallel()
	env := setup(t)
	status, page := getPage(t, env.url+"/docs/search?q="+url.QueryEscape("circuit breaker"))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `href="/docs/guide/callbacks`)
	require.Contains(t, page, "breaker")
	_, page = getPage(t, env.url+"/docs/search?q="+url.QueryEscape("retention partition"))
	require.Contains(t, page, `href="/docs/guide/history-and-retention#history-and-retention"`)
	require.NotContains(t, page, "<p># ", "snippets are text, not the heading's Markdown")
	status, page = getPage(t, env.url+"/docs/search?q="+url.QueryEscape("trigger job"))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `href="/docs#op-trigger-job"`)
	status, page = getPage(t, env.url+"/docs/search?q=zzqqxxnothing")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, "No guide section has every word.")
	status, _ = getPage(t, env.url+"/docs/search?q="+strings.Repeat("a", 201))
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = getPage(t, env.url+"/docs/search?q="+url.QueryEscape(strings.Repeat("a ", 9)))
	require.Equal(t, http.StatusBadRequest, status)
	status, page = getPage(t, env.url+"/docs/search?q="+url.QueryEscape(`<script>alert(1)</script>`))
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, page, "<script>", "the query is escaped")
}

// /docs shows each operation's request and response examples.
func TestDocsShowExamples(t *testing.T) {
	t.Parallel()
	env := setup(t)
	_, page := getPage(t, env.url+"/docs")
	start := strings.Index(page, `id="op-create-job"`)
	require.Positive(t, start)
	op := page[start:]
	op = op[:strings.Index(op, "</section>")]
	require.Contains(t, op, "Request example:")
	require.Contains(t, op, "&#34;kind&#34;: &#34;shell&#34;")
	require.Contains(t, op, "<summary>Example</summary>")
}
