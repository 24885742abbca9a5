package config

import (
	"bytes"
	"encoding"
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
)

// The decoder walks the yaml.Node tree against the Go types itself instead
// of calling yaml.Unmarshal, for three reasons: every problem gets the line
// and the path as written in the file; ${ENV} references are expanded in
// scalars after parsing, so a variable's value can never change the
// document's structure; and a secret's value is never quoted in a message.

// maxNodes bounds the nodes one decode visits, following aliases, so that a
// document of nested aliases ("billion laughs") fails fast instead of
// exhausting memory.
const maxNodes = 100_000

type decoder struct {
	file   string
	lookup func(string) (string, bool)
	lines  map[string]int
	errs   Errors
	failed map[string]bool // paths with a decoding error; checks skip them
	// unset maps paths whose value was only variables that expanded to
	// nothing to the text as written ("${SLACK_APP_TOKEN}"), so a check
	// can say a variable is unset rather than that a value is missing.
	unset   map[string]string
	visited int
	scalars map[*yaml.Node]scalar
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

func newDecoder(file string, lookup func(string) (string, bool)) *decoder {
	return &decoder{
		file:    file,
		lookup:  lookup,
		lines:   map[string]int{},
		failed:  map[string]bool{},
		unset:   map[string]string{},
		scalars: map[*yaml.Node]scalar{},
	}
}

func (d *decoder) fail(line int, path, format string, args ...any) {
	d.errs = append(d.errs, errorf(d.file, line, path, format, args...))
	d.failed[path] = true
}

// decodeFile decodes the single YAML document in data into cfg.
func (d *decoder) decodeFile(data []byte, cfg *Config) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return // an empty file: the defaults stand
		}
		d.syntaxError(err)
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntaxError(err)
			return
		}
		d.fail(extra.Line, "", "a config file holds one YAML document; found another")
		return
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return
		}
		root = root.Content[0]
	}
	d.decode(root, reflect.ValueOf(cfg).Elem(), "")
}

// syntaxError turns "yaml: line 3: did not find expected key" into a
// positioned Error.
func (d *decoder) syntaxError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		num, why, ok := strings.Cut(rest, ": ")
		if line, err := strconv.Atoi(num); ok && err == nil {
			d.fail(line, "", "%s", why)
			return
		}
	}
	d.fail(0, "", "%s", msg)
}

// decode sets v from n. A null leaves v as it is: "workers:" with nothing
// after it keeps the default.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if d.visited++; d.visited > maxNodes {
		if d.visited == maxNodes+1 {
			d.fail(n.Line, "", "document too large (more than %d nodes with aliases expanded)", maxNodes)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		d.decode(n.Alias, v, path)
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
	case reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()):
		s, ok := d.scalar(n, path, "a string")
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s.value)); err != nil {
			d.fail(n.Line, path, "%v", err)
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
			d.fail(n.Line, path, "want true or false, got %s", d.show(n, s))
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
			d.fail(n.Line, path, "want an integer, got %s", d.show(n, s))
			return
		}
		if t.Kind() == reflect.Int && (i < math.MinInt || i > math.MaxInt) {
			d.fail(n.Line, path, "%d is out of range", i)
			return
		}
		v.SetInt(i)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n.Line, path, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = item.Line
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n.Line, path, "want a mapping, got %s", describe(n))
			return
		}
		m := reflect.MakeMapWithSize(t, len(n.Content)/2)
		d.mapping(n, path, func(key string, val *yaml.Node, p string) {
			elem := reflect.New(t.Elem()).Elem()
			if old := m.MapIndex(reflect.ValueOf(key)); old.IsValid() {
				elem.Set(old) // a key given by a merge, now overridden
			}
			d.decode(val, elem, p)
			m.SetMapIndex(reflect.ValueOf(key), elem)
		})
		v.Set(m)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.fail(n.Line, path, "want a mapping, got %s", describe(n))
			return
		}
		fields := yamlFields(t)
		d.mapping(n, path, func(key string, val *yaml.Node, p string) {
			i, ok := fields[key]
			if !ok {
				d.fail(d.lines[p], p, "%s", unknownKey(key, fields))
				return
			}
			d.decode(val, v.Field(i), p)
		})
	default:
		panic(fmt.Sprintf("config: cannot decode into %s at %s", t, path))
	}
}

// mapping calls each for every key of n in the order it takes effect: keys
// merged in with "<<" first (the first merged mapping winning, as YAML
// says), then the keys written in n, which override them.
func (d *decoder) mapping(n *yaml.Node, path string, each func(key string, val *yaml.Node, path string)) {
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
			merges = append(merges, val)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.fail(k.Line, path, "a key must be a plain value, got %s", describe(k))
			continue
		}
		p := joinPath(path, k.Value)
		if line, dup := seen[k.Value]; dup {
			d.fail(k.Line, p, "duplicate key (first on line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		pairs = append(pairs, pair{k.Value, k, val})
	}
	for _, m := range merges {
		d.merge(m, path, each)
	}
	for _, p := range pairs {
		kp := joinPath(path, p.key)
		d.lines[kp] = p.node.Line
		each(p.key, p.val, kp)
	}
}

// merge applies the value of a "<<" key: a mapping or a list of mappings,
// usually aliases.
func (d *decoder) merge(m *yaml.Node, path string, each func(string, *yaml.Node, string)) {
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
				d.fail(item.Line, path, "<< merges mappings, got %s", describe(item))
				continue
			}
			d.mapping(item, path, each)
		}
	default:
		d.fail(m.Line, path, "<< merges mappings, got %s", describe(m))
	}
}

// scalar returns n's value with ${ENV} expanded, or reports that a scalar
// (described by want) was expected.
func (d *decoder) scalar(n *yaml.Node, path, want string) (scalar, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n.Line, path, "want %s, got %s", want, describe(n))
		return scalar{}, false
	}
	if s, seen := d.scalars[n]; seen {
		if !s.ok {
			d.failed[path] = true
		}
		return s, s.ok
	}
	s := scalar{value: n.Value, tag: n.ShortTag(), ok: true}
	value, expanded, err := expand(n.Value, d.lookup)
	switch {
	case err != nil:
		d.fail(n.Line, path, "%v", err)
		s.ok = false
	case expanded:
		s.value, s.expanded = value, true
		if n.Style&yaml.TaggedStyle == 0 {
			// "${WORKERS}" is a string as written but an integer once
			// expanded, quoted or not, as people expect of a variable.
			s.tag = (&yaml.Node{Kind: yaml.ScalarNode, Value: value}).ShortTag()
		}
	}
	d.scalars[n] = s
	return s, s.ok
}

// show quotes a scalar for a message: the value, or for one that came from
// the environment the text of the file, since variables hold secrets.
func (d *decoder) show(n *yaml.Node, s scalar) string {
	if s.expanded {
		return fmt.Sprintf("%q (as expanded)", n.Value)
	}
	return strconv.Quote(s.value)
}

func decodeScalar(s scalar, out any) error {
	return (&yaml.Node{Kind: yaml.ScalarNode, Tag: s.tag, Value: s.value}).Decode(out)
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	s, ok := d.scalar(n, path, "a duration")
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s.value)
	if err != nil {
		d.fail(n.Line, path, "bad duration %s: want a number and a unit, such as 30s, 5m or 168h", d.show(n, s))
		return
	}
	v.SetInt(int64(dur))
}

// describe names what a node is, for "want X, got Y".
func describe(n *yaml.Node) string {
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

// yamlFields maps the yaml keys of a struct to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = i
	}
	return out
}

func unknownKey(key string, fields map[string]int) string {
	best, bestDist := "", 3
	for name := range fields {
		if dist := editDistance(key, name); dist < bestDist || dist == bestDist && name < best {
			best, bestDist = name, dist
		}
	}
	if best != "" && bestDist <= max(1, len(key)/3) {
		return fmt.Sprintf("unknown key; did you mean %q?", best)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range fields {
			if !yield(name) {
				return
			}
		}
	})
	return "unknown key; want one of " + strings.Join(names, ", ")
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

// joinPath appends a key to a path: "server.listen"; keys that are not
// plain words are quoted, `models["gpt-4.1"]`, as the router spells them.
func joinPath(path, key string) string {
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

// expand replaces ${VAR} and ${VAR:-default} in s with the environment's
// values (an unset variable is ""; the default applies when the variable is
// unset or empty) and $$ with $. Any other $ is kept as is, so regular
// expressions such as "deploy$" need no escaping. It reports whether s had
// any reference.
func expand(s string, lookup func(string) (string, bool)) (string, bool, error) {
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

// positions remembers the line of every path of a parsed file.
type positions struct {
	lines map[string]int
}

// line returns the line of path or of its nearest recorded ancestor.
func (p *positions) line(path string) int {
	for {
		if l, ok := p.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// parentPath drops the last element of a path: "a.b[2]" → "a.b" → "a" → "".
func parentPath(path string) string {
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
