package openapi

import (
	"net/http"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
)

// Search over the guides and the API's operations, answered by the server
// (the docs pages run no script): every word of the query must occur in a
// guide's section or in an operation's id, path, summary or description,
// ignoring case.
const (
	// maxSearchQuery bounds the query, in bytes.
	maxSearchQuery = 200
	// maxSearchWords bounds the words of a query.
	maxSearchWords = 8
	// maxSearchHits bounds the hits of each kind shown.
	maxSearchHits = 50
	// snippetRadius is how much text around the first match a hit shows.
	snippetRadius = 90
)

type searchResults struct {
	Guides     []guideHit
	Operations []docsOperation
	More       bool // hits past maxSearchHits were left out
}

type guideHit struct {
	Page, Title, Heading, Anchor, Snippet string
}

// docsSearchHandler serves GET /docs/search?q=….
func docsSearchHandler(api huma.API) http.Handler {
	ops := sync.OnceValue(func() []docsOperation {
		page := docsPageOf(api.OpenAPI())
		var out []docsOperation
		for _, t := range page.Tags {
			out = append(out, t.Operations...)
		}
		return append(out, page.Webhooks...)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		book, err := guides()
		if err != nil {
			http.Error(w, "error rendering the guides", http.StatusInternalServerError)
			return
		}
		q := strings.TrimSpace(r.URL.Query().Get("q"))
		view := guideView{Title: "Search", Pages: book.Pages, Query: q}
		words := strings.Fields(strings.ToLower(q))
		switch {
		case len(q) > maxSearchQuery || !utf8.ValidString(q):
			view.Problem = "The query q must be valid UTF-8 of at most 200 bytes."
			serveGuideView(w, http.StatusBadRequest, view)
			return
		case len(words) > maxSearchWords:
			view.Problem = "The query q may have at most 8 words."
			serveGuideView(w, http.StatusBadRequest, view)
			return
		case len(words) == 0:
			view.Problem = "Type a few words to find in the guides and the API reference."
			serveGuideView(w, http.StatusOK, view)
			return
		}
		view.Search = search(book, ops(), words)
		serveGuideView(w, http.StatusOK, view)
	})
}

func search(book *guideBook, ops []docsOperation, words []string) *searchResults {
	res := &searchResults{}
	for _, page := range book.Pages {
		for _, s := range page.Sections {
			lower := strings.ToLower(s.Heading + "\n" + s.Text)
			if !containsAll(lower, words) {
				continue
			}
			if len(res.Guides) == maxSearchHits {
				res.More = true
				break
			}
			res.Guides = append(res.Guides, guideHit{Page: page.Name, Title: page.Title, Heading: s.Heading,
				Anchor: s.Anchor, Snippet: snippet(s.Text, words[0])})
		}
	}
	for _, op := range ops {
		if !containsAll(strings.ToLower(strings.Join([]string{op.ID, op.Method, op.Path, op.Summary, op.Description}, "\n")), words) {
			continue
		}
		if len(res.Operations) == maxSearchHits {
			res.More = true
			break
		}
		res.Operations = append(res.Operations, op)
	}
	return res
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// snippet is the text around the first occurrence of word (lower case)
// in s, on one line, cut at character boundaries.
func snippet(s, word string) string {
	i := strings.Index(strings.ToLower(s), word)
	if i < 0 {
		i = 0
	}
	start, end := max(0, i-snippetRadius), min(len(s), i+len(word)+snippetRadius)
	for start > 0 && !utf8.RuneStart(s[start]) {
		start--
	}
	for end < len(s) && !utf8.RuneStart(s[end]) {
		end++
	}
	out := strings.Join(strings.Fields(s[start:end]), " ")
	if start > 0 {
		out = "…" + out
	}
	if end < len(s) {
		out += "…"
	}
	return out
}
