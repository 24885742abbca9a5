package yamldecode

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "alpha", "EMPTY": "", "B_2": "b"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in, want string
		expanded bool
		err      string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha", expanded: true},
		{in: "x-${A}-${B_2}", want: "x-alpha-b", expanded: true},
		{in: "${UNSET}", want: "", expanded: true},
		{in: "${UNSET:-dflt}", want: "dflt", expanded: true},
		{in: "${EMPTY:-dflt}", want: "dflt", expanded: true},
		{in: "${A:-dflt}", want: "alpha", expanded: true},
		{in: "${UNSET:-}", want: "", expanded: true},
		{in: "${UNSET:-a:-b}", want: "a:-b", expanded: true},
		{in: "$$", want: "$", expanded: true},
		{in: "$${A}", want: "${A}", expanded: true},
		{in: "cost: $5", want: "cost: $5"},
		{in: "end$", want: "end$"},
		{in: "$A", want: "$A"},
		{in: "${", err: `unterminated variable reference "${"`},
		{in: "${A", err: `unterminated variable reference "${A"`},
		{in: "${}", err: `bad variable reference "${}": want ${NAME} or ${NAME:-default}`},
		{in: "${A B}", err: `bad variable reference "${A B}": want ${NAME} or ${NAME:-default}`},
		{in: "${A-x}", err: `bad variable reference "${A-x}": want ${NAME} or ${NAME:-default}`},
	}
	for _, tt := range tests {
		got, expanded, err := Expand(tt.in, lookup)
		if tt.err != "" {
			require.EqualError(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
		require.Equal(t, tt.expanded, expanded, tt.in)
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"${A}", "$$", "${A:-b}", "a$", "${", "$${A}", "${A:-${B}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, expanded, err := Expand(s, func(string) (string, bool) { return "V", true })
		if err != nil {
			return
		}
		if !strings.Contains(s, "$") {
			require.Equal(t, s, got)
			require.False(t, expanded)
		}
		if !expanded {
			require.Equal(t, s, got)
		}
	})
}

func TestJoinPath(t *testing.T) {
	require.Equal(t, "server", JoinPath("", "server"))
	require.Equal(t, "routing.commands.deploy", JoinPath("routing.commands", "deploy"))
	require.Equal(t, `models["gpt-4.1"]`, JoinPath("models", "gpt-4.1"))
	require.Equal(t, `["a b"]`, JoinPath("", "a b"))
	require.Equal(t, "models", ParentPath(`models["gpt-4.1"]`))
	require.Equal(t, "routing.rules", ParentPath("routing.rules[2]"))
	require.Equal(t, "", ParentPath("workers"))
}

type inner struct {
	Model string  `yaml:"model"`
	Temp  float64 `yaml:"temp"`
}

type doc struct {
	inner   `yaml:",inline"`
	Name    string            `yaml:"name"`
	Count   int               `yaml:"count"`
	Tags    []string          `yaml:"tags"`
	Schema  json.RawMessage   `yaml:"schema"`
	Extra   any               `yaml:"extra"`
	Deps    map[string]string `yaml:"deps"`
	Timeout time.Duration     `yaml:"timeout"`
}

func TestDocumentYAMLAndJSONDecodeAlike(t *testing.T) {
	yamlDoc := "name: x\ncount: 3\nmodel: fast\ntemp: 0.5\ntags: [a, b]\nschema:\n  type: object\n  properties: {n: {type: integer}}\nextra: [1, 2.5, true, null, s]\ndeps: {q: ^1.2}\ntimeout: 90s\n"
	jsonDoc := "{\n\t\"name\": \"x\",\n\t\"count\": 3,\n\t\"model\": \"fast\",\n\t\"temp\": 0.5,\n\t\"tags\": [\"a\", \"b\"],\n" +
		"\t\"schema\": {\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\"}}},\n\t\"extra\": [1, 2.5, true, null, \"s\"],\n" +
		"\t\"deps\": {\"q\": \"^1.2\"},\n\t\"timeout\": \"90s\"\n}\n"
	var fromYAML, fromJSON doc
	dy := New("m.yaml", Options{})
	dy.Document([]byte(yamlDoc), &fromYAML)
	require.NoError(t, dy.Err())
	dj := New("m.json", Options{JSON: true})
	dj.Document([]byte(jsonDoc), &fromJSON)
	require.NoError(t, dj.Err())
	require.Equal(t, fromYAML, fromJSON)
	require.Equal(t, "fast", fromJSON.Model)
	require.JSONEq(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`, string(fromJSON.Schema))
	require.Equal(t, []any{int64(1), 2.5, true, nil, "s"}, fromJSON.Extra)
	require.Equal(t, 90*time.Second, fromJSON.Timeout)
	require.Equal(t, 7, dj.Positions().Line("schema"))
	require.Equal(t, 8, dy.Positions().Line("schema.properties.n.type"))
}

func TestDocumentErrors(t *testing.T) {
	cases := []struct {
		name, file, src string
		opts            Options
		want            string
	}{
		{"unknown key suggests", "m.yaml", "nme: x\n", Options{}, `m.yaml:1: nme: unknown key; did you mean "name"?`},
		{"unknown key lists", "m.yaml", "colour: x\n", Options{}, "m.yaml:1: colour: unknown key; want one of count, deps, extra, model, name, schema, tags, temp, timeout"},
		{"duplicate key", "m.yaml", "name: x\ncount: 1\nname: y\n", Options{}, "m.yaml:3: name: duplicate key (first on line 1)"},
		{"duplicate key in JSON", "m.json", "{\n  \"name\": \"x\",\n  \"name\": \"y\"\n}", Options{JSON: true}, "m.json:3: name: duplicate key (first on line 2)"},
		{"duplicate key in a schema", "m.yaml", "schema:\n  type: object\n  type: string\n", Options{}, "m.yaml:3: schema.type: duplicate key (first on line 2)"},
		{"wrong type", "m.yaml", "count: many\n", Options{}, `m.yaml:1: count: want an integer, got "many"`},
		{"wrong type in JSON", "m.json", "{\n\"tags\": \"a\"\n}", Options{JSON: true}, "m.json:2: tags: want a list, got a string"},
		{"float", "m.yaml", "temp: warm\n", Options{}, `m.yaml:1: temp: want a number, got "warm"`},
		{"JSON syntax", "m.json", "{\n  \"name\": \"x\"\n  \"count\": 1\n}", Options{JSON: true}, "m.json:3: invalid character '\"' after object key:value pair (column 3)"},
		{"JSON cut short", "m.json", "{\n  \"name\": \"x\",\n", Options{JSON: true}, "m.json:3: the JSON document ends too early"},
		{"JSON trailing data", "m.json", "{}\n{}\n", Options{JSON: true}, "m.json:2: a file holds one JSON document; found more after it"},
		{"YAML syntax", "m.yaml", "name: x\n  count: 1\n", Options{}, "m.yaml:2: mapping values are not allowed in this context"},
		{"YAML syntax on the first line", "m.yaml", "name: {model: ${X}}\ncount: 1\n", Options{}, "m.yaml:1: did not find expected ',' or '}'"},
		{"YAML syntax on the first line, alone", "m.yaml", "name: a: b\n", Options{}, "m.yaml:1: mapping values are not allowed in this context"},
		{"a tab that starts the first line", "m.yaml", "\tname: x\n", Options{}, "m.yaml:1: found character that cannot start any token"},
		{"YAML syntax on the first line of frontmatter", "a.md", "name: {x: ${X}}\n", Options{FirstLine: 2}, "a.md:2: did not find expected ',' or '}'"},
		{"control character", "m.yaml", "name: x\ncount: 1\nmodel: a\x01b\n", Options{}, "m.yaml:3: control characters are not allowed"},
		{"bytes that are not UTF-8", "m.yaml", "name: x\nmodel: a\xffb\n", Options{}, "m.yaml:2: invalid leading UTF-8 octet"},
		{"control character on the first line", "m.yaml", "name: \x7f\n", Options{}, "m.yaml:1: control characters are not allowed"},
		{"two YAML documents", "m.yaml", "name: x\n---\nname: y\n", Options{}, "m.yaml:2: a file holds one YAML document; found another"},
		{"aliases refused", "m.yaml", "name: &a x\nmodel: *a\n", Options{NoAliases: true}, "m.yaml:2: model: YAML aliases are not supported here"},
		{"merges refused", "m.yaml", "base: &b {name: x}\n<<: *b\n", Options{NoAliases: true}, "m.yaml:1: base: unknown key"},
		{"first line", "a.md", "name: x\ncount: zero\n", Options{FirstLine: 2}, `a.md:3: count: want an integer, got "zero"`},
		{"NaN", "m.yaml", "extra: .nan\n", Options{}, `m.yaml:1: extra: want a finite number, got ".nan"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v doc
			d := New(tc.file, tc.opts)
			d.Document([]byte(tc.src), &v)
			err := d.Err()
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), tc.want), "got  %s\nwant %s", err, tc.want)
		})
	}
}

func TestEveryProblemAtOnceInLineOrder(t *testing.T) {
	var v doc
	d := New("m.yaml", Options{})
	d.Document([]byte("count: x\nname: [a]\ntags: b\n"), &v)
	require.EqualError(t, d.Err(), `m.yaml:1: count: want an integer, got "x"
m.yaml:2: name: want a string, got a list
m.yaml:3: tags: want a list, got a string`)
	var es Errors
	require.ErrorAs(t, d.Err(), &es)
	require.Len(t, es, 3)
}

func TestAliasBombStops(t *testing.T) {
	src := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nextra: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
	var v struct {
		A, B, C, D, E any
		Extra         any `yaml:"extra"`
	}
	d := New("bomb.yaml", Options{})
	d.Document([]byte(src), &v)
	require.ErrorContains(t, d.Err(), "document too large")
}

func TestClosest(t *testing.T) {
	require.Equal(t, "keywords", Closest("keyword", []string{"name", "keywords"}))
	require.Equal(t, "", Closest("colour", []string{"name", "keywords"}))
}

func FuzzDocument(f *testing.F) {
	for _, s := range []string{"name: x\ncount: 2\n", "{\"name\": \"x\", \"extra\": {\"a\": [1, {}]}}", "extra: &a [*a]", "{\"a\":", "tags: [a, b]\n"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		var v doc
		d := New("f", Options{JSON: isJSON})
		d.Document(data, &v)
		for _, e := range d.Errors() {
			require.Equal(t, "f", e.File)
			require.GreaterOrEqual(t, e.Line, 0)
		}
		if d.Err() == nil && v.Schema != nil {
			require.True(t, json.Valid(v.Schema))
		}
	})
}
