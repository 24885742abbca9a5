package llm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	sjson "github.com/segmentio/encoding/json"
	"github.com/stretchr/testify/require"
)

// wholeBodies are req's bodies as the encoder writes them with the tools
// as members of the request, and what each provider's body writes.
func wholeBodies(t *testing.T, req Request) (want, got [2][]byte, wantErr, gotErr [2]error) {
	t.Helper()
	oa := newOpenAI(Config{Model: "m", MaxTokens: 100}, http.DefaultClient)
	an := newAnthropic(Config{Model: "m", MaxTokens: 100}, http.DefaultClient)
	if r, err := oa.request(req); err == nil {
		want[0], wantErr[0] = encodeBody(withChatTools(r, req.Tools), req.Tools)
	}
	if r, err := an.request(req); err == nil {
		want[1], wantErr[1] = encodeBody(withAnthropicTools(r, req.Tools), req.Tools)
	}
	// Twice: the second time, the schemas are remembered.
	for range 2 {
		got[0], gotErr[0] = oa.body(req)
		got[1], _, gotErr[1] = an.body(req)
		for i := range 2 {
			if wantErr[i] != nil || gotErr[i] != nil {
				require.Error(t, gotErr[i], "provider %d", i)
				require.EqualError(t, wantErr[i], gotErr[i].Error(), "provider %d", i)
				continue
			}
			require.Equal(t, string(want[i]), string(got[i]), "provider %d", i)
		}
	}
	return want, got, wantErr, gotErr
}

// TestRequestBodyWritesToolsAsTheEncoderDoes: tools written one by one,
// their schemas remembered, make the body byte for byte as the encoder
// writes the request with its tools, for schemas written loosely, with
// characters the encoder escapes, or that it refuses.
func TestRequestBodyWritesToolsAsTheEncoderDoes(t *testing.T) {
	msgs := []Message{{Role: RoleUser, Content: "fix <it> & go"}}
	for _, tc := range []struct {
		name  string
		tools []ToolDef
		fails bool
	}{
		{"no tools", nil, false},
		{"compact", []ToolDef{{Name: "a", Description: "Does a.", Schema: json.RawMessage(`{"type":"object"}`)}}, false},
		{"loose, escaped characters, no description", []ToolDef{
			{Name: "a", Description: "x < y & \"z\"\u2028", Schema: json.RawMessage(" {\n\t\"type\" : \"object\",\r\n \"properties\": {\"p\": {\"description\": \"a <b> & c\u2028\u2029 \\\" \\u003c\", \"type\":[\"string\", 1.5e3, null, true]}}} ")},
			{Name: "b", Schema: json.RawMessage(`{"type":"object"}`)},
		}, false},
		{"nil schema", []ToolDef{{Name: "a", Description: "d"}}, false},
		{"trailing text after the schema", []ToolDef{{Name: "a", Schema: json.RawMessage(`{"type":"object"} and more`)}}, true},
		{"a brace too many", []ToolDef{{Name: "ok", Schema: json.RawMessage(`{}`)}, {Name: "extra", Schema: json.RawMessage(`{"type":"object"}}`)}}, true},
		{"two values", []ToolDef{{Name: "two", Schema: json.RawMessage(`{} {}`)}}, true},
		{"a number with a leading zero", []ToolDef{{Name: "zero", Schema: json.RawMessage(`{"minimum":01}`)}}, true},
		{"a huge schema with trailing text", []ToolDef{{Name: "big", Schema: json.RawMessage(`{"d":"` + strings.Repeat("x", 1<<17) + `"}]`)}}, true},
		{"empty schema", []ToolDef{{Name: "a", Schema: json.RawMessage{}}}, true},
		{"schemas of megabytes, the same text under two tools, duplicate keys", []ToolDef{
			{Name: "a", Schema: json.RawMessage(`{"type":"object","properties":{` + strings.Repeat(`"p" : {"type":"string","description":"<x> & y\u2028"}, `, 40000) + `"q":{}}}`)},
			{Name: "b", Schema: json.RawMessage(`{"type":"object","type":"array"}`)},
			{Name: "c", Schema: json.RawMessage(`{"type":"object","type":"array"}`)},
			{Name: "d", Schema: json.RawMessage(`{"d":"` + strings.Repeat("\u003c", 1<<18) + `"}`)},
		}, false},
		{"null schemas", []ToolDef{{Name: "a", Schema: json.RawMessage(`null`)}, {Name: "b", Schema: json.RawMessage(` null `)}}, false},
		{"a huge broken schema", []ToolDef{{Name: "big", Schema: json.RawMessage(`{"d":"` + strings.Repeat("x", 3<<20))}}, true},
		{"broken schema after a good one", []ToolDef{{Name: "a", Schema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", Schema: json.RawMessage(`{"type":`)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, gotErr := wholeBodies(t, Request{System: "s", Messages: msgs, Tools: tc.tools})
			if tc.fails {
				// The bad schema is the last tool's, and the error names it.
				bad := "tool " + tc.tools[len(tc.tools)-1].Name + ": schema: not valid JSON"
				require.ErrorContains(t, gotErr[0], bad)
				require.ErrorContains(t, gotErr[1], bad)
			} else {
				require.NoError(t, gotErr[0])
				require.NoError(t, gotErr[1])
			}
		})
	}
}

// FuzzRequestBodyTools: whatever a tool's name, description and schema,
// the body is what the encoder writes for the request with its tools, or
// the same error.
func FuzzRequestBodyTools(f *testing.F) {
	f.Add("read_file", "Reads a file.", `{"type":"object","properties":{"path":{"type":"string"}}}`)
	f.Add("x<y>", "a & b\u2028", " { \"a\" : [1, 2.5e-3, \"<\\u2028>\"] } ")
	f.Add("", "", ``)
	f.Add("t", "\xff\x00", `{"a":"\xff"}`)
	f.Add("t", "d", `[1,2`)
	f.Add("t", "d", `"s" tail`)
	f.Fuzz(func(t *testing.T, name, desc, schema string) {
		wholeBodies(t, Request{Messages: []Message{{Role: RoleUser, Content: "go"}},
			Tools: []ToolDef{{Name: "first", Description: "The first.", Schema: json.RawMessage(`{"type":"object"}`)},
				{Name: name, Description: desc, Schema: json.RawMessage(schema)}}})
	})
}

// TestRequestBodiesAtOnce: runs calling one model at once share what it
// remembers of their tools' schemas.
func TestRequestBodiesAtOnce(t *testing.T) {
	p := newOpenAI(Config{Model: "m", MaxTokens: 100}, http.DefaultClient)
	req := Request{Messages: []Message{{Role: RoleUser, Content: "go"}},
		Tools: []ToolDef{{Name: "a", Schema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", Schema: json.RawMessage(` {"type": "object"}`)}}}
	want, err := p.body(req)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := p.body(req)
				if err != nil || string(got) != string(want) {
					t.Errorf("body %s (%v), want %s", got, err, want)
				}
			}
		})
	}
	wg.Wait()
}

// TestSchemasStayBounded: whatever schemas a model is given, many small
// ones or ones whose answers the escapes make six times their text, what
// it remembers of them (texts, answers and what an entry costs besides)
// stays within its bound, and each answer is the encoder's, before and
// after it starts again.
func TestSchemasStayBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		schema func(i int) string
	}{
		{"small", 40000, func(i int) string { return fmt.Sprintf(`{"a":%d}`, i) }},
		{"HTML characters", 60, func(i int) string { return fmt.Sprintf(`{"d":"%d%s"}`, i, strings.Repeat("<", 60<<10)) }},
		{"invalid UTF-8", 60, func(i int) string { return fmt.Sprintf(`{"d":"%d%s"}`, i, strings.Repeat("\xff", 60<<10)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &schemas{}
			check := func(schema string) {
				t.Helper()
				want, err := sjson.Append(nil, json.RawMessage(schema), bodyFlags)
				require.NoError(t, err)
				got, ok := s.encoded(json.RawMessage(schema))
				require.True(t, ok)
				require.Equal(t, string(want), string(got))
			}
			for i := range tc.n {
				check(tc.schema(i))
				require.LessOrEqual(t, len(s.m)*schemaEntryBytes, maxSchemaBytes, "entries after %d schemas", i+1)
				if len(s.m) < 64 || i%64 == 0 {
					held := 0
					for k, v := range s.m {
						held += len(k) + len(v) + schemaEntryBytes
					}
					require.LessOrEqual(t, held, maxSchemaBytes, "bytes held after %d schemas", i+1)
				}
			}
			// Started again, it still answers as the encoder does, the
			// first schemas too.
			for i := range 3 {
				check(tc.schema(i))
				check(tc.schema(i))
			}
		})
	}
}

// FuzzRequestBody: a whole request, every member of the body set (system,
// each role, a tool call's input, temperature, reasoning effort, max
// tokens), is written with its tools as the encoder writes it, or refused
// with the encoder's error.
func FuzzRequestBody(f *testing.F) {
	f.Add("You help.", "fix <it>", "call_1", `{"path":"a.go"}`, "ok & done", "high", 0.5, 64, false)
	f.Add("", "", "", ``, "", "", 0.0, 0, true)
	f.Add("s\u2028", "\xff", "id\"", `{"a":1} tail`, "\u2029", "low", -1.0, 1<<20, true)
	f.Add("s", "u", "c", `[1,`, "r", "", 1e300, -5, false)
	f.Fuzz(func(t *testing.T, system, user, callID, input, result, effort string, temperature float64, maxTokens int, isError bool) {
		req := Request{System: system, ReasoningEffort: effort, MaxTokens: maxTokens, Temperature: &temperature,
			Messages: []Message{
				{Role: RoleUser, Content: user},
				{Role: RoleAssistant, Content: user, ToolCalls: []ToolCall{{ID: callID, Name: "read_file", Input: json.RawMessage(input)}}},
				{Role: RoleTool, ToolCallID: callID, Content: result, IsError: isError},
			},
			Tools: []ToolDef{{Name: "read_file", Description: "Reads a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
				{Name: "bash", Schema: json.RawMessage(` {"type" : "object"} `)}}}
		wholeBodies(t, req)
	})
}

// TestSchemasAtOnceWhileStartingAgain: runs with schemas enough to fill
// what a model remembers many times over, at once, each get the encoder's
// answer for theirs while it starts again under them.
func TestSchemasAtOnceWhileStartingAgain(t *testing.T) {
	s := &schemas{}
	pad := strings.Repeat("<a & b> ", 80)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 600 {
				schema := json.RawMessage(fmt.Sprintf(`{"description":"%d/%d %s","type":"object"}`, g, i%300, pad))
				want, err := sjson.Append(nil, schema, bodyFlags)
				if err != nil {
					t.Error(err)
					return
				}
				if got, ok := s.encoded(schema); !ok || string(got) != string(want) {
					t.Errorf("schema %d/%d: %s (%v), want %s", g, i, got, ok, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
