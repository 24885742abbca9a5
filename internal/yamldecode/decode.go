// Package yamldecode is the one strict decoder of the files people write:
// the config file, agent frontmatter and package manifests (YAML or JSON).
// It walks the parsed node tree against the Go types itself instead of
// calling yaml.Unmarshal, so that every problem is reported with the file,
// the line and the path of the field as written ("file:3: tools[1]: ..."),
// all of them at once; unknown keys suggest the closest known one and
// duplicate keys are refused.
package yamldecode

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/switchyard/switchyard/bot"
)

// Error is one problem with a document, at a line and a path written as in
// the file ("routing.rules[2].agent"). Line is 0 when the problem has no
// place in the file; Path is empty for problems with the document as a
// whole, such as a syntax error.
type Error struct {
	File string
	Line int
	Path string
	Msg  string
}

// Error formats the problem as "<file>:<line>: <path>: <why>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// As lets errors.As see a problem with a document as a *bot.Error with code
// bot.EINVALID, so the edges (HTTP status, exit status 2) map it like any
// other bad input.
func (e *Error) As(target any) bool {
	if t, ok := target.(**bot.Error); ok {
		*t = &bot.Error{Code: bot.EINVALID, Message: e.Error()}
		return true
	}
	return false
}

// Errors is every problem found in a document, sorted by line.
type Errors []*Error

// Error joins the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes each *Error to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Sort orders the problems by line, then path.
func (es Errors) Sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path))
	})
}

// maxNodes bounds the nodes one decode visits, following aliases, so that a
// document of nested aliases ("billion laughs") fails fast instead of
// exhausting memory.
const maxNodes = 100_000

// Options configure a Decoder.
type Options struct {
	// Lookup, when set, expands ${VAR}, ${VAR:-default} and $$ in scalar
	// values after parsing, so a variable's value can never change the
	// document's structure. A value that expands to nothing counts as
	// unset. Messages quote the text of the file, never the expanded value.
	Lookup func(string) (string, bool)
	// NoAliases refuses YAML anchors' aliases and merge keys, for documents
	// that have no use for them.
	NoAliases bool
	// JSON reads the document as JSON, with JSON's own syntax and error
	// positions, rather than as YAML.
	JSON bool
	// FirstLine is the line of the file the document starts on, for a
	// document cut out of a larger file (frontmatter); 0 means 1.
	FirstLine int
}

// Decoder decodes one document and collects its problems.
type Decoder struct {
	file   string
	opts   Options
	lines  map[string]int
	errs   Errors
	failed map[string]bool // paths with a decoding error; checks skip them
	// unset maps paths whose value was only variables that expanded to
	// nothing to the text as written ("${SLACK_APP_TOKEN}"), so a check
	// can say a variable is unset rather than that a value is missing.
	unset   map[string]string
	visited int
	scalars map[*yaml.Node]scalar
	// expanding are the aliased nodes being decoded, to refuse an alias
	// inside the node it names.
	expanding map[*yaml.Node]bool
	// fromEnv maps the paths of scalars that took (part of) their value
	// from the environment to that value.
	fromEnv map[string]string
}

// scalar is a scalar node after ${ENV} expansion.
type scalar struct {
	value string
	tag   string // the tag the expanded value resolves to
	// expanded is set when the value came (in part) from the environment;
	// messages then quote the text of the file, never the value.
	expanded bool
	ok       bool // false when the expansion failed and was reported
}

// New returns a decoder for the file called file.
func New(file string, opts Options) *Decoder {
	if opts.FirstLine < 1 {
		opts.FirstLine = 1
	}
	return &Decoder{
		file:      file,
		opts:      opts,
		lines:     map[string]int{},
		failed:    map[string]bool{},
		unset:     map[string]string{},
		scalars:   map[*yaml.Node]scalar{},
		expanding: map[*yaml.Node]bool{},
		fromEnv:   map[string]string{},
	}
}

// FromEnvironment returns the values that came (in part) from ${VAR}
// references, by path, for the paths under prefix: values that may be
// secrets and must be masked wherever they could show.
func (d *Decoder) FromEnvironment(prefix string) map[string]string {
	out := map[string]string{}
	for p, v := range d.fromEnv {
		if p == prefix || strings.HasPrefix(p, prefix+".") || strings.HasPrefix(p, prefix+"[") {
			out[p] = v
		}
	}
	return out
}

// File is the name problems are reported under.
func (d *Decoder) File() string { return d.file }

// Fail reports a problem at a line of the file (0 for none) and a path.
func (d *Decoder) Fail(line int, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	d.failed[path] = true
}

// failNode reports a problem at a line of the document as parsed.
func (d *Decoder) failNode(line int, path, format string, args ...any) {
	d.Fail(d.fileLine(line), path, format, args...)
}

// FailAt reports a problem with the value at path, at the line it is
// written on (or that of its nearest enclosing section), unless decoding
// that path failed already: one problem per value is enough.
func (d *Decoder) FailAt(path, format string, args ...any) {
	if d.failed[path] {
		return
	}
	d.Fail(d.Positions().Line(path), path, format, args...)
}

func (d *Decoder) fileLine(line int) int {
	if line <= 0 {
		return 0
	}
	return line + d.opts.FirstLine - 1
}

// Failed reports whether a problem was reported at path.
func (d *Decoder) Failed(path string) bool { return d.failed[path] }

// FailedUnder reports whether a problem was reported at path or anywhere
// beneath it.
func (d *Decoder) FailedUnder(path string) bool {
	for p := range d.failed {
		if p == path || strings.HasPrefix(p, path+".") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}

// Unset returns the text of the file ("${SLACK_APP_TOKEN}") when the value
// at path was only variables that expanded to nothing.
func (d *Decoder) Unset(path string) (string, bool) {
	raw, ok := d.unset[path]
	return raw, ok
}

// Errors returns the problems found so far, sorted by line.
func (d *Decoder) Errors() Errors {
	d.errs.Sort()
	return d.errs
}

// Err returns the problems found so far as Errors, or nil when there were
// none.
func (d *Decoder) Err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return d.Errors()
}

// Positions returns the lines of the file every decoded path is written on.
func (d *Decoder) Positions() Positions {
	return Positions{lines: d.lines}
}

// Document decodes the single document in data into v, a pointer. An empty
// document leaves v as it is.
func (d *Decoder) Document(data []byte, v any) {
	root := d.Parse(data)
	if root == nil {
		return
	}
	d.Value(root, v, "")
}

// Parse parses the single document in data into its node tree, reporting a
// syntax error or a second document; nil means there is nothing to decode.
func (d *Decoder) Parse(data []byte) *yaml.Node {
	if d.opts.JSON {
		return d.parseJSON(data)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty document
		}
		d.syntaxError(err, data)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntaxError(err, data)
			return nil
		}
		d.failNode(extra.Line, "", "a file holds one YAML document; found another")
		return nil
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	return root
}

// syntaxError turns "yaml: line 3: did not find expected key" into a
// positioned Error.
//
// yaml.v3 leaves the line out of a problem on the first line (its lines
// count from 0 and 0 is not printed), and out of a problem with the bytes
// themselves (a control character, bad UTF-8), which is placed at the line
// of the first such byte.
func (d *Decoder) syntaxError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, why, ok := strings.Cut(rest, ": ")
		if line, err := strconv.Atoi(num); ok && err == nil {
			d.failNode(line, "", "%s", why)
			return
		}
	}
	d.failNode(1+bytes.Count(data[:unreadable(data)], []byte("\n")), "", "%s", msg)
}

// unreadable returns the offset of the first character YAML does not
// allow in a document (a control character other than tab, line feed and
// carriage return, or bytes that are not UTF-8), or 0 when there is none.
func unreadable(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1,
			r < 0x20 && r != '\t' && r != '\n' && r != '\r',
			r == 0x7f, r >= 0x80 && r < 0xa0 && r != 0x85, r == 0xfffe, r == 0xffff:
			return i
		}
		i += size
	}
	return 0
}

// Value decodes n into v, a pointer, at path ("" for the document's root).
func (d *Decoder) Value(n *yaml.Node, v any, path string) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		panic(fmt.Sprintf("yamldecode: Value needs a non-nil pointer, got %T", v))
	}
	d.decode(n, rv.Elem(), path)
}

// decode sets v from n. A null leaves v as it is: "workers:" with nothing
// after it keeps the default.
func (d *Decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.visited++; d.visited > maxNodes {
		if d.visited == maxNodes+1 {
			d.failNode(n.Line, "", "document too large (more than %d nodes with aliases expanded)", maxNodes)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		if d.alias(n, path) {
			d.decode(n.Alias, v, path)
			delete(d.expanding, n.Alias)
		}
		return
	}
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!null" {
			return
		}
		// A value that expands to nothing counts as not set, so
		// "listen: ${LISTEN}" keeps the default when LISTEN is unset.
		s, ok := d.scalar(n, path, "")
		if ok && s.expanded && s.value == "" {
			d.unset[path] = n.Value
		}
		if !ok || s.expanded && s.value == "" {
			return
		}
	}
	t := v.Type()
	switch {
	case t == reflect.TypeFor[time.Duration]():
		d.duration(n, v, path)
		return
	case t == reflect.TypeFor[json.RawMessage]():
		val, ok := d.generic(n, path)
		if !ok {
			return
		}
		raw, err := json.Marshal(val)
		if err != nil {
			d.failNode(n.Line, path, "cannot be written as JSON: %v", err)
			return
		}
		v.SetBytes(raw)
		return
	case reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()):
		s, ok := d.scalar(n, path, "a string")
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s.value)); err != nil {
			d.failNode(n.Line, path, "%v", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.String:
		if s, ok := d.scalar(n, path, "a string"); ok {
			v.SetString(s.value)
		}
	case reflect.Bool:
		s, ok := d.scalar(n, path, "true or false")
		if !ok {
			return
		}
		var b bool
		if s.tag != "!!bool" || decodeScalar(s, &b) != nil {
			d.failNode(n.Line, path, "want true or false, got %s", d.show(n, s))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		s, ok := d.scalar(n, path, "an integer")
		if !ok {
			return
		}
		var i int64
		if s.tag != "!!int" || decodeScalar(s, &i) != nil {
			d.failNode(n.Line, path, "want an integer, got %s", d.show(n, s))
			return
		}
		if t.Kind() == reflect.Int && (i < math.MinInt || i > math.MaxInt) {
			d.failNode(n.Line, path, "%d is out of range", i)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		s, ok := d.scalar(n, path, "a number")
		if !ok {
			return
		}
		var f float64
		if s.tag != "!!int" && s.tag != "!!float" || decodeScalar(s, &f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.failNode(n.Line, path, "want a number, got %s", d.show(n, s))
			return
		}
		v.SetFloat(f)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Interface:
		if t.NumMethod() != 0 {
			panic(fmt.Sprintf("yamldecode: cannot decode into %s at %s", t, path))
		}
		if val, ok := d.generic(n, path); ok {
			if val == nil {
				v.SetZero()
			} else {
				v.Set(reflect.ValueOf(val))
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.failNode(n.Line, path, "want a list, got %s", Describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = d.fileLine(item.Line)
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.failNode(n.Line, path, "want a mapping, got %s", Describe(n))
			return
		}
		if t.Key().Kind() != reflect.String {
			panic(fmt.Sprintf("yamldecode: cannot decode into %s at %s: keys must be strings", t, path))
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		d.mapping(n, path, func(key string, val *yaml.Node, p string) {
			k := reflect.ValueOf(key).Convert(t.Key())
			elem := reflect.New(t.Elem()).Elem()
			if old := m.MapIndex(k); old.IsValid() {
				elem.Set(old) // a key given by a merge, now overridden
			}
			d.decode(val, elem, p)
			m.SetMapIndex(k, elem)
		})
		v.Set(m)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.failNode(n.Line, path, "want a mapping, got %s", Describe(n))
			return
		}
		fields := structFields(t)
		d.mapping(n, path, func(key string, val *yaml.Node, p string) {
			idx, ok := fields[key]
			if !ok {
				d.Fail(d.lines[p], p, "%s", unknownKey(key, fields))
				return
			}
			d.decode(val, fieldByIndex(v, idx), p)
		})
	default:
		panic(fmt.Sprintf("yamldecode: cannot decode into %s at %s", t, path))
	}
}

// alias reports whether the alias n may be followed, and marks its node
// as being expanded; the caller unmarks it.
func (d *Decoder) alias(n *yaml.Node, path string) bool {
	switch {
	case d.opts.NoAliases:
		d.failNode(n.Line, path, "YAML aliases are not supported here")
	case n.Alias == nil:
		d.failNode(n.Line, path, "unknown YAML alias %q", n.Value)
	case d.expanding[n.Alias]:
		d.failNode(n.Line, path, "YAML alias *%s refers to the value it is in", n.Value)
	default:
		d.expanding[n.Alias] = true
		return true
	}
	return false
}

// fieldByIndex returns the field at idx, allocating embedded pointers on
// the way.
func fieldByIndex(v reflect.Value, idx []int) reflect.Value {
	for i, x := range idx {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// generic decodes n into plain values: map[string]any, []any, string,
// int64, float64, bool and nil, as a JSON document would hold them.
func (d *Decoder) generic(n *yaml.Node, path string) (any, bool) {
	if d.visited++; d.visited > maxNodes {
		if d.visited == maxNodes+1 {
			d.failNode(n.Line, "", "document too large (more than %d nodes with aliases expanded)", maxNodes)
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.AliasNode:
		if !d.alias(n, path) {
			return nil, false
		}
		defer delete(d.expanding, n.Alias)
		return d.generic(n.Alias, path)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		ok := true
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = d.fileLine(item.Line)
			val, good := d.generic(item, p)
			ok = ok && good
			out = append(out, val)
		}
		return out, ok
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		ok := true
		d.mapping(n, path, func(key string, val *yaml.Node, p string) {
			v, good := d.generic(val, p)
			ok = ok && good
			out[key] = v
		})
		return out, ok
	}
	s, ok := d.scalar(n, path, "a value")
	if !ok {
		return nil, false
	}
	switch s.tag {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		if decodeScalar(s, &b) == nil {
			return b, true
		}
	case "!!int":
		var i int64
		if decodeScalar(s, &i) == nil {
			return i, true
		}
		var f float64 // beyond int64
		if decodeScalar(s, &f) == nil {
			return f, true
		}
	case "!!float":
		var f float64
		if decodeScalar(s, &f) == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, true
		}
		d.failNode(n.Line, path, "want a finite number, got %s", d.show(n, s))
		return nil, false
	case "!!str", "!!timestamp", "!!binary":
		return s.value, true
	}
	return s.value, true
}

// mapping calls each for every key of n in the order it takes effect: keys
// merged in with "<<" first (the first merged mapping winning, as YAML
// says), then the keys written in n, which override them.
func (d *Decoder) mapping(n *yaml.Node, path string, each func(key string, val *yaml.Node, path string)) {
	seen := map[string]int{}
	var merges []*yaml.Node
	type pair struct {
		key  string
		node *yaml.Node
		val  *yaml.Node
	}
	pairs := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
			if d.opts.NoAliases {
				d.failNode(k.Line, path, "YAML merge keys (<<) are not supported here")
				continue
			}
			merges = append(merges, val)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.failNode(k.Line, path, "a key must be a plain value, got %s", Describe(k))
			continue
		}
		p := JoinPath(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			d.failNode(k.Line, p, "duplicate key (first on line %d)", d.fileLine(line))
			continue
		}
		seen[k.Value] = k.Line
		pairs = append(pairs, pair{k.Value, k, val})
	}
	for _, m := range merges {
		d.merge(m, path, each)
	}
	for _, p := range pairs {
		kp := JoinPath(path, p.key)
		d.lines[kp] = d.fileLine(p.node.Line)
		each(p.key, p.val, kp)
	}
}

// merge applies the value of a "<<" key: a mapping or a list of mappings,
// usually aliases.
func (d *Decoder) merge(m *yaml.Node, path string, each func(string, *yaml.Node, string)) {
	if d.visited++; d.visited > maxNodes {
		return
	}
	for m.Kind == yaml.AliasNode {
		m = m.Alias
	}
	switch m.Kind {
	case yaml.MappingNode:
		d.mapping(m, path, each)
	case yaml.SequenceNode:
		// Earlier mappings take precedence, so they are applied last.
		for _, item := range slices.Backward(m.Content) {
			for item.Kind == yaml.AliasNode {
				item = item.Alias
			}
			if item.Kind != yaml.MappingNode {
				d.failNode(item.Line, path, "<< merges mappings, got %s", Describe(item))
				continue
			}
			d.mapping(item, path, each)
		}
	default:
		d.failNode(m.Line, path, "<< merges mappings, got %s", Describe(m))
	}
}

// scalar returns n's value with ${ENV} expanded, or reports that a scalar
// (described by want) was expected.
func (d *Decoder) scalar(n *yaml.Node, path, want string) (scalar, bool) {
	if n.Kind != yaml.ScalarNode {
		d.failNode(n.Line, path, "want %s, got %s", want, Describe(n))
		return scalar{}, false
	}
	if s, seen := d.scalars[n]; seen {
		if !s.ok {
			d.failed[path] = true
		}
		if s.expanded && s.value != "" {
			d.fromEnv[path] = s.value
		}
		return s, s.ok
	}
	s := scalar{value: n.Value, tag: n.ShortTag(), ok: true}
	if d.opts.Lookup != nil {
		value, expanded, err := Expand(n.Value, d.opts.Lookup)
		switch {
		case err != nil:
			d.failNode(n.Line, path, "%v", err)
			s.ok = false
		case expanded:
			s.value, s.expanded = value, true
			if n.Style&yaml.TaggedStyle == 0 {
				// "${WORKERS}" is a string as written but an integer once
				// expanded, quoted or not, as people expect of a variable.
				s.tag = (&yaml.Node{Kind: yaml.ScalarNode, Value: value}).ShortTag()
			}
		}
	}
	d.scalars[n] = s
	if s.expanded && s.value != "" {
		d.fromEnv[path] = s.value
	}
	return s, s.ok
}

// show quotes a scalar for a message: the value, or for one that came from
// the environment the text of the file, since variables hold secrets.
func (d *Decoder) show(n *yaml.Node, s scalar) string {
	if s.expanded {
		return fmt.Sprintf("%q (as expanded)", n.Value)
	}
	return strconv.Quote(s.value)
}

func decodeScalar(s scalar, out any) error {
	return (&yaml.Node{Kind: yaml.ScalarNode, Tag: s.tag, Value: s.value}).Decode(out)
}

func (d *Decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, "a duration")
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s.value)
	if err != nil {
		d.failNode(n.Line, path, "bad duration %s: want a number and a unit, such as 30s, 5m or 168h", d.show(n, s))
		return
	}
	v.SetInt(int64(dur))
}

// Describe names what a node is, for "want X, got Y".
func Describe(n *yaml.Node) string {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "nothing"
		default:
			return "a string"
		}
	}
	return "nothing"
}

// structFields maps the yaml keys of a struct to field index paths. Fields
// of embedded structs (anonymous, or tagged ",inline") are keys of the
// struct itself.
func structFields(t reflect.Type) map[string][]int {
	out := make(map[string][]int, t.NumField())
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			idx := append(slices.Clone(prefix), i)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && (f.Anonymous && name == "" || opts == "inline") {
				walk(ft, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			out[name] = idx
		}
	}
	walk(t, nil)
	return out
}

// Keys returns the yaml keys of the struct v points to or holds, sorted.
func Keys(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return slices.Sorted(mapKeys(structFields(t)))
}

func mapKeys(m map[string][]int) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for name := range m {
			if !yield(name) {
				return
			}
		}
	}
}

func unknownKey(key string, fields map[string][]int) string {
	if best := Closest(key, slices.Collect(mapKeys(fields))); best != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", best)
	}
	return "unknown key; want one of " + strings.Join(slices.Sorted(mapKeys(fields)), ", ")
}

// Closest returns the name of names closest to s when it is close enough
// to be what was meant (an edit distance of at most a third of s, and at
// least 1), or "".
func Closest(s string, names []string) string {
	best, bestDist := "", 3
	for _, name := range names {
		if dist := editDistance(s, name); dist < bestDist || dist == bestDist && name < best {
			best, bestDist = name, dist
		}
	}
	if best != "" && bestDist <= max(1, len(s)/3) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// JoinPath appends a key to a path: "server.listen"; keys that are not
// plain words are quoted, `models["gpt-4.1"]`, as the router spells them.
func JoinPath(path, key string) string {
	if isPlainKey(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func isPlainKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Expand replaces ${VAR} and ${VAR:-default} in s with the environment's
// values (an unset variable is ""; the default applies when the variable is
// unset or empty) and $$ with $. Any other $ is kept as is, so regular
// expressions such as "deploy$" need no escaping. It reports whether s had
// any reference.
func Expand(s string, lookup func(string) (string, bool)) (string, bool, error) {
	if !strings.Contains(s, "$") {
		return s, false, nil
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) || s[i+1] != '$' && s[i+1] != '{' {
			b.WriteByte(c)
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i++
			changed = true
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", false, fmt.Errorf("unterminated variable reference %q", truncate(s[i:], 40))
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", false, fmt.Errorf("bad variable reference %q: want ${NAME} or ${NAME:-default}", s[i:i+end+1])
		}
		val, _ := lookup(name)
		if val == "" && hasDef {
			val = def
		}
		b.WriteString(val)
		changed = true
		i += end
	}
	return b.String(), changed, nil
}

func validVarName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Positions remembers the line of every path of a decoded file.
type Positions struct {
	lines map[string]int
}

// Has reports whether path was written in the file.
func (p Positions) Has(path string) bool {
	_, ok := p.lines[path]
	return ok
}

// Line returns the line of path or of its nearest recorded ancestor, or 0.
func (p Positions) Line(path string) int {
	for {
		if l, ok := p.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = ParentPath(path)
	}
}

// ParentPath drops the last element of a path: "a.b[2]" → "a.b" → "a" → "".
func ParentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}
