package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Job files are YAML or JSON. Both go through yaml.Node rather than Go
// values, so that a params number is copied digit for digit (decoding it
// into a float64 would round integers above 2^53) and keys keep their order.

// jsonNumber is the JSON number grammar: a YAML number that matches it is
// copied as it is written.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// maxYAMLDepth bounds the nesting of a file (params may nest 64 levels
// inside a job, which is two levels inside a list).
const maxYAMLDepth = 128

// yamlDocuments reads every document of a YAML (or JSON) stream as JSON.
func yamlDocuments(data []byte) ([]json.RawMessage, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []json.RawMessage
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if n.Kind == yaml.DocumentNode && len(n.Content) == 0 {
			continue // an empty document (a trailing ---)
		}
		var buf bytes.Buffer
		if err := writeJSON(&buf, &n, 0); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		docs = append(docs, buf.Bytes())
	}
}

// writeJSON writes the YAML node n as JSON.
func writeJSON(w *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxYAMLDepth {
		return fmt.Errorf("line %d: nested more than %d levels", n.Line, maxYAMLDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(w, n.Content[0], depth)
	case yaml.AliasNode:
		return writeJSON(w, n.Alias, depth+1)
	case yaml.MappingNode:
		w.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				w.WriteByte(',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a key must be a plain value", k.Line)
			}
			key, _ := json.Marshal(k.Value)
			w.Write(key)
			w.WriteByte(':')
			if err := writeJSON(w, n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		w.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeJSON(w, c, depth+1); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	}
	return writeScalar(w, n)
}

func writeScalar(w *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		w.WriteString("null")
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		w.WriteString(strconv.FormatBool(b))
		return nil
	case "!!int", "!!float":
		if jsonNumber.MatchString(n.Value) {
			w.WriteString(n.Value)
			return nil
		}
		var f float64 // 0x1F, 1_000, .5: YAML spellings JSON lacks
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("line %d: %v is not a JSON number", n.Line, n.Value)
		}
		w.Write(b)
		return nil
	}
	b, _ := json.Marshal(n.Value) // strings, timestamps (RFC 3339 text)
	w.Write(b)
	return nil
}

// printYAML writes a JSON document as YAML, keys in their order and
// numbers as written.
func printYAML(data []byte) error {
	return writeYAML(os.Stdout, data)
}

// writeYAML writes a JSON document to w as YAML.
func writeYAML(w io.Writer, data []byte) error {
	n, err := yamlNode(json.NewDecoder(bytes.NewReader(data)))
	if err != nil {
		return fmt.Errorf("error converting the answer to YAML: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	return enc.Close()
}

// yamlNode reads one JSON value from dec as a YAML node.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return yamlMapping(dec)
		}
		return yamlSequence(dec)
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		if strings.Contains(v, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func yamlMapping(dec *json.Decoder) (*yaml.Node, error) {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		v, err := yamlNode(dec)
		if err != nil {
			return nil, err
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	}
	_, err := dec.Token() // }
	return m, err
}

func yamlSequence(dec *json.Decoder) (*yaml.Node, error) {
	s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for dec.More() {
		v, err := yamlNode(dec)
		if err != nil {
			return nil, err
		}
		s.Content = append(s.Content, v)
	}
	_, err := dec.Token() // ]
	return s, err
}
