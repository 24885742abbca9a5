package llm

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

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
		{"trailing text after the schema", []ToolDef{{Name: "a", Schema: json.RawMessage(`{"type":"object"} and more`)}}, false},
		{"empty schema", []ToolDef{{Name: "a", Schema: json.RawMessage{}}}, true},
		{"broken schema after a good one", []ToolDef{{Name: "a", Schema: json.RawMessage(`{"type":"object"}`)}, {Name: "b", Schema: json.RawMessage(`{"type":`)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, gotErr := wholeBodies(t, Request{System: "s", Messages: msgs, Tools: tc.tools})
			if tc.fails {
				require.ErrorContains(t, gotErr[0], "schema: not valid JSON")
				require.ErrorContains(t, gotErr[1], "schema: not valid JSON")
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
