// Package jobtemplate renders the templates a job definition may hold
// (route keys, HTTP bodies) within bounds of output and time.
package jobtemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// Route keys and HTTP body templates are Go text/templates written by
// whoever may save a job, executed by the server. They are held to a
// subset whose cost is bounded by the template's length times the size of
// the data it reads: output of fields, if/with/else, the comparison and
// logic functions, len, index and slice, and (body templates) json of a
// field. There is no range (no loop), no template/define/block (no
// recursion), no variables (no reuse of a computed value), no printf or
// print (no padding or concatenation that grows a value), and json only of
// data, printed: so no value grows by being fed back into a function, and
// every costly value is written out, where the output cap stops it. A
// budget of CPU time, checked as output is written, bounds the rest.

// Kind is one kind of job template with its bounds.
type Kind struct {
	// what names the template in errors: "route key", "body template".
	what string
	// maxOutput caps the rendered bytes.
	maxOutput int
	// timeout caps the CPU time of one rendering.
	timeout time.Duration
	// funcs are the functions beyond the safe built-ins; each must be
	// called on data only (see templateChecker).
	funcs template.FuncMap
}

// safeBuiltins are text/template's built-in functions whose result is
// never larger than their arguments.
var safeBuiltins = map[string]bool{
	"and": true, "or": true, "not": true, "len": true, "index": true, "slice": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
}

// RouteKey bounds a route key: it is rendered for every task a fire makes,
// in the fire's transaction.
var RouteKey = &Kind{what: "route key", maxOutput: 4 << 10, timeout: 50 * time.Millisecond}

// ConcurrencyKey bounds a concurrency key: rendered for every task a fire
// makes, like a route key, and stored on the task, so at most 256 bytes
// (axtype.MaxConcurrencyKeyBytes).
var ConcurrencyKey = &Kind{what: "concurrency key", maxOutput: 256, timeout: 50 * time.Millisecond}

// Body bounds an HTTP job's body template, rendered for every attempt of
// every task: 2 MiB (a job's params are at most 256 KiB, and json escapes
// at most 6 bytes for one) within a second. json is its only function
// beyond the safe built-ins.
var Body = &Kind{what: "body template", maxOutput: 2 << 20, timeout: time.Second,
	funcs: template.FuncMap{"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}}}

// Param bounds a template in the params of a job of trigger kind after,
// rendered once per fire with its upstream runs: 64 KiB within 100 ms.
// json is its only function beyond the safe built-ins, as for Body.
var Param = &Kind{what: "param template", maxOutput: 64 << 10, timeout: 100 * time.Millisecond,
	funcs: Body.funcs}

// errTemplateOutput is returned when a rendering passes its output cap.
var errTemplateOutput = errors.New("output exceeds its limit")

// errTemplateDeadline is returned when a rendering spends its budget.
var errTemplateDeadline = errors.New("rendering took longer than its limit")

// Parse parses text and checks it keeps to the safe subset.
func (k *Kind) Parse(text string) (*template.Template, error) {
	t, err := template.New(k.what).Funcs(k.funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("is not a valid template: %s", strings.TrimPrefix(err.Error(), "template: "+k.what+":"))
	}
	if len(t.Templates()) > 1 {
		return nil, errors.New("must not define templates (define, block)")
	}
	if t.Tree == nil || t.Root == nil {
		return t, nil
	}
	c := &templateChecker{funcs: k.funcs}
	c.list(t.Root)
	if c.err != nil {
		return nil, c.err
	}
	return t, nil
}

// templateChecker walks a parsed template and records the first
// construct outside the safe subset.
type templateChecker struct {
	funcs template.FuncMap
	err   error
}

func (c *templateChecker) fail(n parse.Node, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s (at %q)", fmt.Sprintf(format, args...), truncateNode(n))
	}
}

func truncateNode(n parse.Node) string {
	s := n.String()
	if len(s) > 60 {
		s = strings.ToValidUTF8(s[:60], "") + "…"
	}
	return s
}

func (c *templateChecker) list(l *parse.ListNode) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.node(n)
	}
}

func (c *templateChecker) node(n parse.Node) {
	switch n := n.(type) {
	case *parse.TextNode, *parse.CommentNode:
	case *parse.ActionNode:
		c.pipe(n.Pipe, true)
	case *parse.IfNode:
		c.branch(&n.BranchNode)
	case *parse.WithNode:
		c.branch(&n.BranchNode)
	case *parse.RangeNode:
		c.fail(n, "must not use range: templates have no loops")
	case *parse.TemplateNode:
		c.fail(n, "must not call templates")
	case *parse.BreakNode, *parse.ContinueNode:
		c.fail(n, "must not use break or continue")
	default:
		c.fail(n, "must not use this construct")
	}
}

func (c *templateChecker) branch(b *parse.BranchNode) {
	c.pipe(b.Pipe, false)
	c.list(b.List)
	c.list(b.ElseList)
}

// pipe checks a pipeline; printed is true for an action's, whose value is
// written out (and so falls under the output cap).
func (c *templateChecker) pipe(p *parse.PipeNode, printed bool) {
	if p == nil {
		return
	}
	if len(p.Decl) > 0 || p.IsAssign {
		c.fail(p, "must not declare or assign variables")
		return
	}
	for i, cmd := range p.Cmds {
		if len(cmd.Args) == 0 {
			continue
		}
		id, ok := cmd.Args[0].(*parse.IdentifierNode)
		if !ok {
			if len(cmd.Args) > 1 {
				c.fail(cmd, "only functions take arguments")
			}
			c.operand(cmd.Args[0])
			continue
		}
		if c.funcs[id.Ident] != nil {
			// A data function (json): printed, applied to data only.
			switch {
			case !printed:
				c.fail(cmd, "may call %s only in an output action, not a condition", id.Ident)
			case i != len(p.Cmds)-1:
				c.fail(cmd, "may call %s only last in a pipeline", id.Ident)
			case i > 1 || (i == 1 && !isData(p.Cmds[0])):
				c.fail(cmd, "may call %s only on a field", id.Ident)
			}
			for _, a := range cmd.Args[1:] {
				if !isDataNode(a) {
					c.fail(cmd, "may call %s only on a field", id.Ident)
				}
			}
			continue
		}
		if !safeBuiltins[id.Ident] {
			c.fail(cmd, "must not call %s; allowed: %s", id.Ident, allowedFuncs(c.funcs))
			continue
		}
		for _, a := range cmd.Args[1:] {
			c.operand(a)
		}
	}
}

// operand checks an argument of a safe function: data, a constant, or a
// parenthesized pipeline of safe functions.
func (c *templateChecker) operand(n parse.Node) {
	switch n := n.(type) {
	case *parse.PipeNode:
		c.pipe(n, false)
	case *parse.ChainNode:
		c.fail(n, "must not use field chains on expressions")
	case *parse.IdentifierNode:
		c.fail(n, "must not use a function as a value")
	default:
		if !isDataNode(n) {
			c.fail(n, "must not use this construct")
		}
	}
}

// isData reports whether cmd is one field or constant, no call.
func isData(cmd *parse.CommandNode) bool {
	return len(cmd.Args) == 1 && isDataNode(cmd.Args[0])
}

func isDataNode(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.FieldNode, *parse.DotNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.NilNode:
		return true
	case *parse.VariableNode:
		return len(n.Ident) > 0 && n.Ident[0] == "$" // only the root: there are no other variables
	}
	return false
}

func allowedFuncs(extra template.FuncMap) string {
	names := []string{"and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len", "index", "slice"}
	for k := range extra {
		names = append(names, k)
	}
	return strings.Join(names, ", ")
}

// Execute renders t, parsed by k.Parse, over data within lim's bounds.
func (k *Kind) Execute(t *template.Template, data any) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("error rendering the %s: panic: %v", k.what, p)
		}
	}()
	w := &boundedWriter{max: k.maxOutput, budget: startBudget(k.timeout)}
	defer w.budget.stop()
	if err := t.Execute(w, data); err != nil {
		switch {
		case errors.Is(err, errTemplateOutput):
			return nil, fmt.Errorf("error rendering the %s: output exceeds %d bytes", k.what, k.maxOutput)
		case errors.Is(err, errTemplateDeadline):
			return nil, fmt.Errorf("error rendering the %s: took more than %s of CPU time", k.what, k.timeout)
		}
		return nil, fmt.Errorf("error rendering the %s: %w", k.what, err)
	}
	return w.buf, nil
}

// boundedWriter collects output up to max bytes and within its budget.
type boundedWriter struct {
	buf    []byte
	max    int
	budget cpuBudget
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if len(w.buf)+len(p) > w.max {
		return 0, errTemplateOutput
	}
	if w.budget.spent() {
		return 0, errTemplateDeadline
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}
