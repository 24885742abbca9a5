package policy

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeToolInput checks that the policy reads a tool's input exactly
// as encoding/json does: the command it checks must be the one the tool
// runs.
func FuzzDecodeToolInput(f *testing.F) {
	for _, s := range []string{
		`{"command":"ls -la"}`,
		`{"command": "git status", "timeout": 30}`,
		` { "path" : "src/main.go" , "content" : "x\n" } `,
		`{"command":"a","Command":"b","COMMAND":"c"}`,
		`{"command":"a","comm\u0061nd":"b"}`,
		`{"\u212Aey":1,"command":"ls"}`,
		`{"command":null}`,
		`{"command":["rm","-rf","/"]}`,
		`{"command":{"x":"}"},"path":"]"}`,
		`{"command":"echo \"}\""}`,
		`{"command":"caf\u00e9","path":"é"}`,
		`{}`,
		`{"command":1e3,"path":true}`,
		`[]`,
		`"command"`,
		`{"command":"ls"}{"command":"rm"}`,
		`{"command":"ls",}`,
		`{"a":{"command":"rm -rf /"},"command":"ls"}`,
		`{"PATH":"/etc/passwd","pAtH":"x"}`,
		`{"command":"for f in *; do echo \"$f\"; done\n\tcat \\ \/ \b\f\r"}`,
		`{"command":"x\\u0041\\"}`,
		`{"command":"\u0041\ud800"}`,
		`{"command":"make \u0026\u0026 cat x \u003e y \u00e9\u0000\uFFFD"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want toolInput
		wantOK := len(in) > 0 && in[0] == '{' && json.Unmarshal(in, &want) == nil
		got, ok := decodeToolInput(in)
		if ok != wantOK {
			t.Fatalf("decodeToolInput(%q) ok = %v, encoding/json says %v", in, ok, wantOK)
		}
		if !bytes.Equal(got.Command, want.Command) || (got.Command == nil) != (want.Command == nil) ||
			!bytes.Equal(got.Path, want.Path) || (got.Path == nil) != (want.Path == nil) {
			t.Fatalf("decodeToolInput(%q) = command %q path %q, encoding/json reads command %q path %q",
				in, got.Command, got.Path, want.Command, want.Path)
		}
		for _, raw := range [][]byte{got.Command, got.Path} {
			s, ok := plainJSONString(raw)
			if !ok {
				continue
			}
			var w string
			if err := json.Unmarshal(raw, &w); err != nil || w != s {
				t.Fatalf("plainJSONString(%q) = %q, encoding/json reads %q (%v)", raw, s, w, err)
			}
		}
	})
}
