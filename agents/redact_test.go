package agents_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/agents"
)

func TestRedactor(t *testing.T) {
	r := agents.NewRedactor("hunter2-configured-secret", "short", "")
	cases := []struct{ in, want string }{
		{"token is hunter2-configured-secret, ok", "token is [REDACTED], ok"},
		{"short words stay short", "short words stay short"},
		{"gh: ghp_0123456789abcdefghijABCDEFGHIJ012345", "gh: [REDACTED]"},
		{"fine-grained github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "fine-grained [REDACTED]"},
		{"slack xoxb-1234567890-0987654321-AbCdEfGhIjKl and xapp-1-A0B1C2D3E4-5678", "slack [REDACTED] and [REDACTED]"},
		{"OPENAI_API_KEY=sk-proj-AbCdEf0123456789_xyz", "OPENAI_API_KEY=[REDACTED]"},
		{"key sk-ant-api03-abcdefghijklmnop-QRSTUV", "key [REDACTED]"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8", "Authorization: Bearer [REDACTED]"},
		{"authorization: bearer 0123456789", "authorization: bearer [REDACTED]"},
		{"use bearer authentication here", "use bearer authentication here"},
		{"aws AKIAIOSFODNN7EXAMPLE done", "aws [REDACTED] done"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter", "[REDACTED]\nafter"},
		{"skeleton sk-short", "skeleton sk-short"},
		{"", ""},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, r.Redact(tc.in), tc.in)
	}
	var none *agents.Redactor
	require.Equal(t, "x [REDACTED]", none.Redact("x ghp_0123456789abcdefghijABCDEFGHIJ"), "token shapes need no configuration")
}
