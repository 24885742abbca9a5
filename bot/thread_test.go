package bot_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestParseThread(t *testing.T) {
	tests := []struct {
		key     string
		want    bot.Thread
		wantKey string
		wantErr string
	}{
		{key: "t1", want: bot.LocalThread("t1"), wantKey: "local:t1"},
		{key: "local:default", want: bot.LocalThread("default"), wantKey: "local:default"},
		{key: "github:acme/api#42", want: bot.GitHubThread("acme", "api", 42), wantKey: "github:acme/api#42"},
		{key: "slack:T1/C2/1700000000.000100", want: bot.SlackThread("T1", "C2", "1700000000.000100"), wantKey: "slack:T1/C2/1700000000.000100"},
		{key: "", wantErr: "empty thread"},
		{key: "local:", wantErr: `local thread name ""`},
		{key: "github:acme#1", wantErr: "want github:<owner>/<repo>#<number>"},
		{key: "github:acme/api#0", wantErr: "want github:<owner>/<repo>#<number>"},
		{key: "github:acme/api#x", wantErr: "want github:<owner>/<repo>#<number>"},
		{key: "slack:T1/C2", want: bot.SlackThread("T1", "C2", ""), wantKey: "slack:T1/C2"},
		{key: "slack:T1/C2/", wantErr: "want slack:<team>/<channel>/<thread_ts>"},
		{key: "slack:T1", wantErr: "want slack:<team>/<channel>/<thread_ts>"},
		{key: "slack:T1//1.2", wantErr: "want slack:<team>/<channel>/<thread_ts>"},
		{key: "irc:#go", wantErr: `unknown source "irc"`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := bot.ParseThread(tt.key)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.wantKey, got.Key())
			again, err := bot.ParseThread(got.Key())
			require.NoError(t, err)
			require.Equal(t, got, again, "a key parses back to the same thread")
		})
	}
}

func TestThreadJSONIsTheSessionKey(t *testing.T) {
	b, err := json.Marshal(struct{ T bot.Thread }{bot.GitHubThread("o", "r", 7)})
	require.NoError(t, err)
	require.JSONEq(t, `{"T":"github:o/r#7"}`, string(b))
	var back struct{ T bot.Thread }
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, bot.GitHubThread("o", "r", 7), back.T)
}

func FuzzParseThread(f *testing.F) {
	for _, s := range []string{"t1", "local:x", "github:a/b#1", "slack:T/C/1.2", "github:/#", "slack://", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		th, err := bot.ParseThread(key)
		if err != nil {
			return
		}
		again, err := bot.ParseThread(th.Key())
		if err != nil {
			t.Fatalf("key %q of parsed %q does not parse: %v", th.Key(), key, err)
		}
		if again != th {
			t.Fatalf("round trip of %q: %+v != %+v", key, again, th)
		}
	})
}
