package local

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// FuzzDecodeMessage checks that the console's own reading of message bodies
// accepts and refuses exactly what httpapi.Decode does, with the same
// result and the same error.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"thread":"t1","text":"@coder please look","user":"alice","id":"m-1"}`,
		" \t\r\n{ \"text\" : \"hi\" , \"id\":\"\" } \n",
		`{}`, `{"text":"hi"}{}`, `{"text":"hi"} x`, `{"text":"hi",}`, `{"text":"hi"`, ``, `[]`, `null`,
		`{"text":"line\nbreak"}`, `{"text":"tab	inside"}`, `{"Text":"case"}`, `{"TEXT":"case"}`,
		`{"text":"a","text":"b"}`, `{"text":null}`, `{"text":1}`, `{"other":"x"}`, `{"text":"caf` + "\xc3\xa9" + `"}`,
		`{"text":"bad ` + "\xff" + ` utf8"}`, `{"text":"\u2028"}`, `{"id":"` + "\x7f" + `"}`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, withLength bool) {
		var want MessageRequest
		wantErr := httpapi.Decode(httptest.NewRecorder(), newRequest(body, withLength), &want)
		got, gotErr := decodeMessage(httptest.NewRecorder(), newRequest(body, withLength))
		if wantErr != nil {
			require.Error(t, gotErr)
			require.Equal(t, bot.ErrorCode(wantErr), bot.ErrorCode(gotErr))
			require.Equal(t, wantErr.Error(), gotErr.Error())
			return
		}
		require.NoError(t, gotErr)
		require.Equal(t, want, got)
	})
}

func TestDecodeMessageTooLarge(t *testing.T) {
	for _, body := range []string{
		`{"text":"` + strings.Repeat("a", httpapi.MaxBody) + `"}`,
		`{"text":"a"}` + strings.Repeat(" ", httpapi.MaxBody),
		`{"text":"` + strings.Repeat("a", httpapi.MaxBody-12) + `"}`,
	} {
		for _, withLength := range []bool{true, false} {
			var want MessageRequest
			wantErr := httpapi.Decode(httptest.NewRecorder(), newRequest([]byte(body), withLength), &want)
			got, gotErr := decodeMessage(httptest.NewRecorder(), newRequest([]byte(body), withLength))
			require.Equal(t, wantErr, gotErr)
			require.Equal(t, want, got)
		}
	}
}

// newRequest returns a POST of body, with a Content-Length or, like a
// chunked upload, without.
func newRequest(body []byte, withLength bool) *http.Request {
	r := httptest.NewRequest("POST", "/api/v1/messages", bytes.NewReader(body))
	if !withLength {
		r.ContentLength = -1
	}
	return r
}

func TestMessageNamesItsRequester(t *testing.T) {
	for _, tc := range []struct {
		user, want string
	}{
		{"alice", "alice"},
		{"", "local"},
	} {
		ev, err := MessageRequest{Thread: "t1", Text: "@coder hi", User: tc.user}.event()
		require.NoError(t, err)
		require.Equal(t, bot.Requester{Source: bot.SourceLocal, ID: tc.want}, ev.Requester)
	}
}

// A local thread's name takes no control character, as the message that
// refuses one says: none can carry an escape sequence to a terminal or a
// log. Names of any other kind of character are taken.
func TestMessageThreadNamesTakeNoControlCharacters(t *testing.T) {
	for _, tc := range []struct {
		thread, want string // want "" is accepted
	}{
		{"t1", ""},
		{"local:café ✅", ""},
		{"with spaces and / slashes", ""},
		{"a\nb", `thread: local thread name "a\nb": want 1-200 characters, no control characters`},
		{"x\x1b[31mred", `thread: local thread name "x\x1b[31mred": want 1-200 characters, no control characters`},
		{"local:bell\a", `thread: local thread name "bell\a": want 1-200 characters, no control characters`},
		{"tab\there", `thread: local thread name "tab\there": want 1-200 characters, no control characters`},
		{"c1\u009b31m", `thread: local thread name "c1\u009b31m": want 1-200 characters, no control characters`},
		{"del\x7f", `thread: local thread name "del\x7f": want 1-200 characters, no control characters`},
	} {
		_, err := MessageRequest{Thread: tc.thread, Text: "hi"}.event()
		if tc.want == "" {
			require.NoError(t, err, "%q", tc.thread)
			continue
		}
		require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "%q", tc.thread)
		require.Equal(t, tc.want, bot.ErrorMessage(err))
	}
}
