package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// toolResult is 32 KiB (a tool result's cap) of the project's own Go
// source with a few credentials planted in it, as a file an agent reads.
func toolResult(b *testing.B) string {
	b.Helper()
	files, err := filepath.Glob("../bot/*.go")
	if err != nil || len(files) == 0 {
		b.Fatalf("source files: %v", err)
	}
	var sb strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
		if sb.Len() > 32<<10 {
			break
		}
	}
	s := sb.String()[:32<<10]
	third := len(s) / 3
	return s[:third] + "\ntoken = \"glpat-Zq3xR8vK2mN7pL4wT9yB\"\n" + s[third:2*third] +
		"\nDB_PASSWORD=configured-db-password-0\n" + s[2*third:]
}

func benchRedactor() *bot.Redactor {
	secrets := []bot.Secret{"configured-db-password-0", bot.Secret("-----BEGIN RSA PRIVATE KEY-----\n" +
		strings.Repeat("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi7LZ4cX6QPvUr8hQx0mQ7t1BqW\n", 25) + "-----END RSA PRIVATE KEY-----")}
	for i := range 10 {
		secrets = append(secrets, bot.Secret(fmt.Sprintf("configured-secret-%02d-abcdef", i)))
	}
	return bot.NewRedactor(secrets...)
}

// BenchmarkRedactToolResult measures masking a 32 KiB tool result — every
// configured secret and every credential shape — against JSON-encoding the
// same text, which every tool result costs anyway on its way to the model.
// No target: the figure says what masking adds to a tool call.
func BenchmarkRedactToolResult(b *testing.B) {
	text := toolResult(b)
	r := benchRedactor()
	if !strings.Contains(r.Redact(text), bot.Redacted) {
		b.Fatal("setup: nothing masked")
	}
	const runs = 300
	for range b.N {
		t0 := time.Now()
		for range runs {
			if _, err := json.Marshal(text); err != nil {
				b.Fatal(err)
			}
		}
		encode := time.Since(t0) / runs
		t0 = time.Now()
		for range runs {
			_ = r.Redact(text)
		}
		redact := time.Since(t0) / runs
		b.ReportMetric(float64(redact.Nanoseconds()), "redact-ns/result")
		report(b, "redaction of a 32 KiB tool result (12 configured secrets, every shape)",
			fmt.Sprintf("masking: %s per result", redact),
			fmt.Sprintf("baseline, JSON-encoding the same text: %s per result", encode),
			fmt.Sprintf("ratio %.1f× the encoding (no target; it runs once per tool call)", float64(redact)/float64(encode)),
		)
	}
}

// BenchmarkRedactLogLine measures a log line through the redacting handler
// against the same line through the JSON handler alone.
func BenchmarkRedactLogLine(b *testing.B) {
	r := benchRedactor()
	plain := slog.New(slog.NewJSONHandler(io.Discard, nil))
	masked := slog.New(r.Handler(slog.NewJSONHandler(io.Discard, nil)))
	line := func(l *slog.Logger) {
		l.LogAttrs(context.Background(), slog.LevelInfo, "job finished",
			slog.String("job", "job_7"), slog.String("agent", "coder"), slog.String("thread", "slack:T1/C2/1700000000.000100"),
			slog.String("outcome", "succeeded"), slog.String("error", ""), slog.Int("tokens", 1234), slog.Int("turns", 3))
	}
	const runs = 20000
	for range b.N {
		t0 := time.Now()
		for range runs {
			line(plain)
		}
		base := time.Since(t0) / runs
		t0 = time.Now()
		for range runs {
			line(masked)
		}
		full := time.Since(t0) / runs
		b.ReportMetric(float64((full - base).Nanoseconds()), "overhead-ns/line")
		report(b, "redacting log handler",
			fmt.Sprintf("a 7-attribute line, masked: %s", full),
			fmt.Sprintf("baseline, the JSON handler alone: %s", base),
			fmt.Sprintf("overhead %s per line (ratio %.2f; no target)", full-base, float64(full)/float64(base)),
		)
	}
}
