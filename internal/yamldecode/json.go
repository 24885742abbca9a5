package yamldecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"

	"gopkg.in/yaml.v3"
)

// parseJSON reads a JSON document into the node tree the decoder walks, with
// JSON's own syntax: YAML would read most JSON too, but refuses some valid
// documents ("\/" escapes) and reports JSON's mistakes in YAML's words.
// Every node carries the line its value starts on.
func (d *Decoder) parseJSON(data []byte) *yaml.Node {
	p := jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), lines: lineStarts(data)}
	p.dec.UseNumber()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	root, err := p.value()
	if err == nil {
		if _, extra := p.dec.Token(); !errors.Is(extra, io.EOF) {
			d.failNode(p.line(p.start()), "", "a file holds one JSON document; found more after it")
			return nil
		}
		return root
	}
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		line, col := p.position(int(syn.Offset))
		d.failNode(line, "", "%s (column %d)", syn.Error(), col)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		line, _ := p.position(len(data))
		d.failNode(line, "", "the JSON document ends too early")
	default:
		d.Fail(0, "", "%v", err)
	}
	return nil
}

type jsonParser struct {
	data  []byte
	dec   *json.Decoder
	lines []int // the offset each line starts at
}

func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// start is the offset of the next token: the decoder's offset is just
// after the previous one, before any separators.
func (p *jsonParser) start() int {
	off := int(p.dec.InputOffset())
	for off < len(p.data) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *jsonParser) line(off int) int {
	line, _ := p.position(off)
	return line
}

// position returns the 1-based line and column of an offset.
func (p *jsonParser) position(off int) (int, int) {
	off = max(0, min(off, len(p.data)))
	i := sort.Search(len(p.lines), func(i int) bool { return p.lines[i] > off }) - 1
	return i + 1, off - p.lines[i] + 1
}

func (p *jsonParser) value() (*yaml.Node, error) {
	line := p.line(p.start())
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	return p.node(tok, line)
}

func (p *jsonParser) node(tok json.Token, line int) (*yaml.Node, error) {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: line}
			for p.dec.More() {
				keyLine := p.line(p.start())
				k, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string) // the decoder allows only strings here
				val, err := p.value()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, Style: yaml.DoubleQuotedStyle, Line: keyLine}, val)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: line}
			for p.dec.More() {
				val, err := p.value()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, val)
			}
			if _, err := p.dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Style: yaml.DoubleQuotedStyle, Line: line}, nil
	case json.Number:
		tag := "!!float"
		if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t), Line: line}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t), Line: line}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}, nil
	}
	return nil, errors.New("unexpected JSON token")
}
