package github

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireAgree checks that the acknowledgement path's reader reads payload
// as go-github's normalisation does: the same delivery when normalize
// reads it, a refusal only of what normalize refuses too. The reader may
// read what normalize refuses only for the type of a member it skips,
// never for JSON that is not JSON.
func requireAgree(t *testing.T, event string, payload []byte) {
	t.Helper()
	typed, typedErr := normalize(event, "d-1", payload)
	fast, fastErr := readDelivery(event, "d-1", payload)
	if fastErr != nil {
		require.ErrorIs(t, fastErr, errMalformed)
		require.Error(t, typedErr, "the reader refused what go-github reads: %v", fastErr)
		return
	}
	if typedErr != nil {
		require.True(t, json.Valid(payload), "the reader read JSON go-github calls invalid: %v", typedErr)
		return
	}
	require.Equal(t, typed, fast)
}

func TestReadDeliveryAgreesOnEveryFixture(t *testing.T) {
	for _, f := range fixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			_, err := readDelivery(f.event, "d-1", f.payload)
			require.NoError(t, err)
			requireAgree(t, f.event, f.payload)
		})
	}
}

// readCases are payloads where encoding/json's rules decide: names in any
// case, repeated members, null, escapes, numbers that are not integers,
// members of the wrong type.
var readCases = []struct {
	event, payload string
}{
	{"issue_comment", `{"ACTION":"created","Issue":{"NUMBER":3,"labels":[{"NAME":"bug"}]},"comment":{"Id":9,"BODY":"@coder hi"},"repository":{"name":"r","owner":{"login":"o"}},"sender":{"login":"a"}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"issue":{"labels":[{"name":"x"}]},"comment":{"id":9,"body":"a"},"comment":{"body":null},"repository":{"name":"r","owner":{"login":"o"}},"sender":{"login":"a"},"sender":null}`},
	{"issues", `{"action":"edited","issue":{"number":1,"body":"@triage \u0041 \ud800 x","labels":[{"name":"a"},null,{"name":""}],"labels":[{},{"name":"b"}]},"changes":{"body":{"from":"old"}},"repository":{"name":"r","owner":{"login":"o"}},"sender":{"login":"ſender"}}`},
	{"issues", `{"action":"edited","issue":{"number":1,"body":"@triage"},"changes":{"body":{"from":null}},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"edited","issue":{"number":1,"body":"@triage"},"changes":{"body":{}},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":1,"pull_request":{}},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":1,"pull_request":{},"pull_request":null},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":1.0},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":"1"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":1e2},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":99999999999999999999},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":1,"labels":{}},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":{"number":1,"labels":[5]},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", `{"action":"opened","issue":null,"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"pull_request", `{"action":"opened","number":0,"pull_request":{"number":4,"body":"/deploy now"},"repository":{"name":"r","owner":{"login":"o"}},"installation":{"id":5},"installation":null}`},
	{"pull_request", `{"action":"opened","number":7,"pull_request":{"number":4},"repository":{"name":"r","owner":{"login":"o"},"owner":{"id":"x"}}}`},
	{"pull_request", `{"action":"opened","number":7,"pull_request":{"number":4,"head":{"sha":5}},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"pull_request_review", `{"action":"submitted","review":{"body":"@reviewer"},"review":null,"pull_request":{"number":2},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"pull_request_review_comment", `{"action":"edited","comment":{"id":-3,"body":"@coder"},"pull_request":{"number":2},"changes":{"body":{"from":"@docs"}},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"push", `{"action":null,"number":null,"repository":{"name":"r","owner":{"login":"o"},"owner":null},"installation":{"id":3},"installation":null,"issue":{"number":2},"pull_request":{"number":null}}`},
	{"push", `{"repository":{"name":"r","owner":{"login":"o"}},"repository":null,"sender":{"login":"x","type":"Bot"}}`},
	{"star", `{"action":"created","installation":"x"}`},
	{"star", `{"action":"created","sender":{"login":"a"}} x`},
	{"star", `{"action":"created","sender":{"login":"a\x01"}}`},
	{"star", `[1]`},
	// What someone trying to break the bot would send, by class: the same
	// member twice, in two cases; text that is not UTF-8, a NUL raw or
	// escaped, lone surrogates; numbers as strings and strings as numbers,
	// past int64, fractional, negative; what every event has left out; a
	// byte-order mark; trailing garbage.
	{"issue_comment", `{"action":"created","action":"deleted","issue":{"number":3},"comment":{"id":9,"body":"@coder"},"repository":{"name":"r","owner":{"login":"o"}},"sender":{"login":"a"}}`},
	{"issue_comment", `{"action":"created","Action":"deleted","issue":{"number":3},"comment":{"id":9,"body":"@coder"},"repository":{"name":"r","owner":{"login":"o"}},"sender":{"login":"a"}}`},
	{"pull_request", `{"action":"opened","action":"closed","number":4,"pull_request":{"number":4,"body":"/deploy"},"repository":{"name":"r","owner":{"login":"o"}},"repository":{"name":"s","owner":{"login":"p"}}}`},
	{"issue_comment", "{\"action\":\"created\",\"issue\":{\"number\":3},\"comment\":{\"id\":9,\"body\":\"@coder \xff\xfe \xc0\xaf hi\"},\"repository\":{\"name\":\"r\",\"owner\":{\"login\":\"o\"}},\"sender\":{\"login\":\"a\xff\"}}"},
	{"issue_comment", "{\"action\":\"created\",\"issue\":{\"number\":3},\"comment\":{\"id\":9,\"body\":\"@coder \x00 hi\"},\"repository\":{\"name\":\"r\",\"owner\":{\"login\":\"o\"}}}"},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"@coder \u0000 \udc00 \ud83d\ude00 \ude00\ud83d"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issues", "{\"action\":\"labeled\",\"label\":{\"name\":\"b\xffug\"},\"issue\":{\"number\":3},\"repository\":{\"name\":\"r\",\"owner\":{\"login\":\"o\"}}}"},
	{"issues", "{\"action\":\"crea\xffted\",\"issue\":{\"number\":3},\"repository\":{\"name\":\"r\",\"owner\":{\"login\":\"o\"}}}"},
	{"push", "{\"repository\":{\"name\":\"r\xff\",\"owner\":{\"login\":\"o\"}},\"sender\":{\"login\":\"a\x7f\"}}"},
	{"issue_comment", `{"action":5,"issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":"9","body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":7},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":5,"owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3e0},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":-3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","installation":{"id":9223372036854775808},"issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","installation":{"id":-1},"issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","installation":{"id":1.5},"issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","installation":{"id":"5"},"issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"@coder"}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"@coder"},"repository":{"name":"r"}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"@coder"},"repository":{"owner":{"login":"o"}}}`},
	{"issue_comment", `{"issue":{"number":3},"comment":{"id":9,"body":"@coder"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", "\xef\xbb\xbf" + `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}}}{}`},
	{"issue_comment", `{"action":"created","issue":{"number":3},"comment":{"id":9,"body":"x"},"repository":{"name":"r","owner":{"login":"o"}},}`},
}

func TestReadDeliveryAgreesWhereEncodingJSONDecides(t *testing.T) {
	for _, tc := range readCases {
		t.Run(tc.event+" "+tc.payload, func(t *testing.T) {
			requireAgree(t, tc.event, []byte(tc.payload))
		})
	}
	deep := []byte(`{"action":"created","x":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`)
	requireAgree(t, "star", deep)
	_, err := readDelivery("star", "d", deep)
	require.ErrorIs(t, err, errMalformed, "nesting deeper than encoding/json allows")
}

// FuzzReadDelivery holds the acknowledgement path's reader to go-github's
// normalisation on every fixture of the events Switchyard reads and on
// whatever the fuzzer makes of them.
func FuzzReadDelivery(f *testing.F) {
	events := []string{"issue_comment", "issues", "pull_request", "pull_request_review", "pull_request_review_comment", "push", "star", "installation"}
	index := map[string]uint8{}
	for i, e := range events {
		index[e] = uint8(i)
	}
	for _, fx := range fixtures(f) {
		if i, ok := index[fx.event]; ok {
			f.Add(i, fx.payload)
		}
	}
	for _, tc := range readCases {
		f.Add(index[tc.event], []byte(tc.payload))
	}
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		requireAgree(t, events[int(which)%len(events)], payload)
	})
}
