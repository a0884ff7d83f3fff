package openapi

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// The guides are Markdown files in openapi/guide, read as they are on a
// code host and rendered by the server at /docs/guide/<page> (goldmark,
// raw HTML left out), so they are there offline and match the binary.
// Every .md file of the folder is a page; README.md is the code host's
// index of the folder, which the server makes itself.

//go:embed guide/*.md
var guideFiles embed.FS

//go:embed guide.html
var guideHTML string

var guideTemplate = template.Must(template.New("guide").Parse(guideHTML))

// guidePage is one rendered guide.
type guidePage struct {
	Name     string // the file name without .md: its URL under /docs/guide/
	Title    string // its first heading
	HTML     template.HTML
	Sections []guideSection
}

// guideSection is the text under one heading, what search matches.
type guideSection struct {
	Heading, Anchor, Text string
}

// guideBook is every guide, in file name order.
type guideBook struct {
	Pages  []*guidePage
	byName map[string]*guidePage
}

// guides renders the embedded guides once.
var guides = sync.OnceValues(func() (*guideBook, error) { return loadGuides(guideFiles, "guide") })

// loadGuides renders every .md file of dir in fsys but README.md.
func loadGuides(fsys fs.FS, dir string) (*guideBook, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithParserOptions(parser.WithAutoHeadingID(),
			parser.WithASTTransformers(util.Prioritized(guideLinks{}, 100))),
	)
	book := &guideBook{byName: map[string]*guidePage{}}
	for _, name := range names {
		if path.Base(name) == "README.md" {
			continue
		}
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		page, err := renderGuide(md, strings.TrimSuffix(path.Base(name), ".md"), src)
		if err != nil {
			return nil, fmt.Errorf("error rendering guide %s: %w", name, err)
		}
		book.Pages = append(book.Pages, page)
		book.byName[page.Name] = page
	}
	return book, nil
}

func renderGuide(md goldmark.Markdown, name string, src []byte) (*guidePage, error) {
	doc := md.Parser().Parse(text.NewReader(src))
	var buf bytes.Buffer
	if err := md.Renderer().Render(&buf, src, doc); err != nil {
		return nil, err
	}
	page := &guidePage{Name: name, Title: name, HTML: template.HTML(buf.String())} //nolint:gosec // goldmark's output, raw HTML omitted
	page.Sections = guideSections(doc, src)
	if len(page.Sections) > 0 && page.Sections[0].Heading != "" {
		page.Title = page.Sections[0].Heading
	}
	return page, nil
}

// guideSections splits a page at its headings: each section is the source
// from one heading to the next (the text before the first is a section
// without a heading).
func guideSections(doc ast.Node, src []byte) []guideSection {
	var sections []guideSection
	start, heading, anchor := 0, "", ""
	flush := func(end int) {
		body := string(src[start:end])
		if heading != "" {
			_, body, _ = strings.Cut(body, "\n") // the heading's own line
		}
		if body = strings.TrimSpace(body); body != "" || heading != "" {
			sections = append(sections, guideSection{Heading: heading, Anchor: anchor, Text: body})
		}
	}
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		h, ok := n.(*ast.Heading)
		if !ok || h.Lines().Len() == 0 {
			continue
		}
		at := lineStart(src, h.Lines().At(0).Start)
		flush(at)
		start = at
		heading = string(headingText(h, src))
		anchor = ""
		if id, ok := h.AttributeString("id"); ok {
			if b, ok := id.([]byte); ok {
				anchor = string(b)
			}
		}
	}
	flush(len(src))
	return sections
}

// headingText is a heading's words without Markdown marks.
func headingText(n ast.Node, src []byte) []byte {
	var out []byte
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *ast.Text:
			out = append(out, t.Segment.Value(src)...)
		case *ast.String:
			out = append(out, t.Value...)
		}
		return ast.WalkContinue, nil
	})
	return out
}

func lineStart(src []byte, i int) int {
	return bytes.LastIndexByte(src[:i], '\n') + 1
}

// guideLinks makes the links of a guide work where it is served: a link
// to another guide (agents.md#x) points at its page (agents#x), one to the
// folder's README.md at the index, and a link to a file of the repository
// outside the guides (../../queue/webhook), which the server does not
// serve, becomes its text.
type guideLinks struct{}

func (guideLinks) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	var unlink []*ast.Link
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		link, ok := n.(*ast.Link)
		if !ok || !entering {
			return ast.WalkContinue, nil
		}
		dest := string(link.Destination)
		file, fragment, _ := strings.Cut(dest, "#")
		switch {
		case strings.Contains(dest, "://") || strings.HasPrefix(dest, "#") || strings.HasPrefix(dest, "mailto:"):
		case file == "README.md":
			link.Destination = []byte("./" + withFragment(fragment))
		case strings.HasSuffix(file, ".md") && !strings.Contains(file, "/"):
			link.Destination = []byte(strings.TrimSuffix(file, ".md") + withFragment(fragment))
		default:
			unlink = append(unlink, link)
		}
		return ast.WalkContinue, nil
	})
	for _, link := range unlink {
		parent := link.Parent()
		for c := link.FirstChild(); c != nil; {
			next := c.NextSibling()
			parent.InsertBefore(parent, link, c)
			c = next
		}
		parent.RemoveChild(parent, link)
	}
}

func withFragment(f string) string {
	if f == "" {
		return ""
	}
	return "#" + f
}

// guideView is what guide.html shows: one page, the index or search
// results.
type guideView struct {
	Title   string
	Pages   []*guidePage
	Page    *guidePage
	Index   bool
	Query   string
	Search  *searchResults
	Problem string
}

func serveGuideView(w http.ResponseWriter, status int, v guideView) {
	var buf bytes.Buffer
	if err := guideTemplate.Execute(&buf, v); err != nil {
		http.Error(w, "error rendering the guide", http.StatusInternalServerError)
		return
	}
	setDocsHeaders(w)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// guideHandler serves /docs/guide/ (the index) and /docs/guide/{page}.
func guideHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		book, err := guides()
		if err != nil {
			http.Error(w, "error rendering the guides", http.StatusInternalServerError)
			return
		}
		name := r.PathValue("page")
		if name == "" {
			serveGuideView(w, http.StatusOK, guideView{Title: "Guides", Pages: book.Pages, Index: true})
			return
		}
		page, ok := book.byName[strings.TrimSuffix(name, ".md")]
		if !ok {
			serveGuideView(w, http.StatusNotFound, guideView{Title: "Not found", Pages: book.Pages,
				Problem: "There is no guide of that name; the guides are listed on the left."})
			return
		}
		serveGuideView(w, http.StatusOK, guideView{Title: page.Title, Pages: book.Pages, Page: page})
	})
}

// setDocsHeaders are the headers of /docs and its guides: HTML of our
// own, no scripts at all, not framed.
func setDocsHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
}
