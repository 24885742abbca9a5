package bot_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

// A made-up RSA key: the shape of one, not a key anyone uses.
const testPEM = `-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun
VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK
LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo
9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvre
dZBFkAXQ7rbOgcPrM9R8h1X6Rxo7bATKl5xk7zZmNRrdwkwdmLb0W7kpx6BdKpRR
dcb0GF/Lq2QiMW+XGhXiw==
-----END RSA PRIVATE KEY-----`

func TestRedactShapes(t *testing.T) {
	r := bot.NewRedactor()
	tests := []struct {
		name, in, want string
	}{
		// GitHub
		{"github classic", "token ghp_0123456789abcdefghijABCDEFGHIJ012345 ok", "token [REDACTED] ok"},
		{"github oauth", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "[REDACTED]"},
		{"github server-to-server", "x-access-token:ghs_abcdefghijklmnopqrstuvwxyz0123456789@", "x-access-token:[REDACTED]@"},
		{"github user-to-server", "ghu_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"},
		{"github refresh", "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498", "[REDACTED]"},
		{"github fine-grained", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[REDACTED]"},
		{"github prefix in a name", "the ghp_ prefix and gh_pages branch", "the ghp_ prefix and gh_pages branch"},
		// GitLab
		{"gitlab personal", "PRIVATE-TOKEN glpat-xxxxxxxxxxxxxxxxxxxx", "PRIVATE-TOKEN [REDACTED]"},
		{"gitlab routable", "glpat-AbCdEf0123456789_-xyzAB.01.0w0abcd1e, next", "[REDACTED], next"},
		{"gitlab deploy", "gldt-ABCDEFGHIJ0123456789abc", "[REDACTED]"},
		{"gitlab runner", "glrt-t1_ABCDEFGHIJ0123456789ab.", "[REDACTED]."},
		{"gitlab words", "glpat-short and glrt-x", "glpat-short and glrt-x"},
		// npm
		{"npm", "//registry.npmjs.org/:_authToken=npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "//registry.npmjs.org/:_authToken=[REDACTED]"},
		{"npm package name", "npm_config_cache and npm_lifecycle_event", "npm_config_cache and npm_lifecycle_event"},
		// JWT
		{"jwt", "id eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
			"id [REDACTED] end"},
		{"jwt alg none", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbmEifQ.", "[REDACTED]"},
		{"base64 json, not a jwt", "eyJhbGciOiJIUzI1NiJ9 alone", "eyJhbGciOiJIUzI1NiJ9 alone"},
		// PEM
		{"pem", "key:\n" + testPEM + "\nafter", "key:\n[REDACTED]\nafter"},
		{"pem in json", `{"private_key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"}`,
			`{"private_key":"[REDACTED]\n"}`},
		{"pem cut off", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz\nc2gtZWQy", "[REDACTED]\nc2gtZWQy"},
		{"pem encrypted", "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF\n\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----", "[REDACTED]"},
		{"pgp", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: 1\n\nlQOYBF0\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----", "[REDACTED]"},
		{"pem marker in code", `if strings.HasPrefix(s, "-----BEGIN RSA PRIVATE KEY-----") {`, `if strings.HasPrefix(s, "-----BEGIN RSA PRIVATE KEY-----") {`},
		{"public key", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----"},
		// Model providers
		{"anthropic", "key sk-ant-api03-abcdefghijklmnop-QRSTUV01", "key [REDACTED]"},
		{"openai project", "OPENAI_API_KEY=sk-proj-AbCdEf0123456789_xyz", "OPENAI_API_KEY=[REDACTED]"},
		{"openai legacy", "sk-T3BlbkFJ0123456789abcdefghijklmnopqrstuvwx", "[REDACTED]"},
		{"sk- words", "skeleton sk-short sk-spinner-double-bounce-effect", "skeleton sk-short sk-spinner-double-bounce-effect"},
		// Slack
		{"slack bot", "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "[REDACTED]"},
		{"slack app", "xapp-1-A0B1C2D3E4-5678901234-abcdef", "[REDACTED]"},
		{"slack rotating", "xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTA", "[REDACTED]"},
		// AWS and Google
		{"aws", "aws AKIAIOSFODNN7EXAMPLE done", "aws [REDACTED] done"},
		{"aws temporary", "ASIAY34FZKBOKMUTVV7A", "[REDACTED]"},
		{"aws lookalike", "AKIAtoo-short", "AKIAtoo-short"},
		{"google", "k=AIzaSyA1234567890abcdefghijklmnopqrstuv&q=1", "k=[REDACTED]&q=1"},
		// URLs and headers
		{"url password", "git clone https://ana:hunter2secret@git.example.com/x.git", "git clone https://ana:[REDACTED]@git.example.com/x.git"},
		{"postgres url", `"postgres://app:pw-1234@db:5432/app"`, `"postgres://app:[REDACTED]@db:5432/app"`},
		{"url without password", "ssh://git@github.com/a/b and https://example.com:8443/x", "ssh://git@github.com/a/b and https://example.com:8443/x"},
		{"bearer", "Authorization: Bearer abcdef0123456789", "Authorization: Bearer [REDACTED]"},
		{"bearer prose", "use bearer authentication here", "use bearer authentication here"},
		{"basic", "authorization: Basic YW5hOmh1bnRlcjI=", "authorization: Basic [REDACTED]"},
		// Pairs
		{"password=", "connect password=hunter2 user=ana", "connect password=[REDACTED] user=ana"},
		{"env", "export DB_PASSWORD=s3cr3t\nGITHUB_TOKEN=abc123def", "export DB_PASSWORD=[REDACTED]\nGITHUB_TOKEN=[REDACTED]"},
		{"query", "https://h/x?access_token=abc123&page=2", "https://h/x?access_token=[REDACTED]&page=2"},
		{"two pairs on a line", "a_token=x1 b_password=y2 c=3", "a_token=[REDACTED] b_password=[REDACTED] c=3"},
		{"two hints in one name", "secret_token=abc123 api_key_secret: zz", "secret_token=[REDACTED] api_key_secret: [REDACTED]"},
		{"flag", "--api-key=k-123456 --verbose", "--api-key=[REDACTED] --verbose"},
		{"yaml", "db:\n  password: hunter2\n  user: ana", "db:\n  password: [REDACTED]\n  user: ana"},
		{"yaml upper", "API_KEY: 0123abcd", "API_KEY: [REDACTED]"},
		{"header", "X-Api-Key: 0123abcd\nPRIVATE-TOKEN: abcdefgh", "X-Api-Key: [REDACTED]\nPRIVATE-TOKEN: [REDACTED]"},
		{"json", `{"client_secret": "s3cr3t-value", "name": "x"}`, `{"client_secret": "[REDACTED]", "name": "x"}`},
		{"json escaped", `"{\"api_key\":\"abc123\"}"`, `"{\"api_key\":\"[REDACTED]\"}"`},
		{"quoted assignment", `password = 'hunter2'`, `password = '[REDACTED]'`},
		{"env reference", "webhook_secret: ${GITHUB_WEBHOOK_SECRET}\ntoken=$TOKEN", "webhook_secret: ${GITHUB_WEBHOOK_SECRET}\ntoken=$TOKEN"},
		{"go field", "Password: cfg.Password,\ntoken := r.Header.Get(\"x\")\nif token == \"\" {", "Password: cfg.Password,\ntoken := r.Header.Get(\"x\")\nif token == \"\" {"},
		{"counts", `"max_tokens": 400, "tokens_used": 12, "secret_name": "db"`, `"max_tokens": 400, "tokens_used": 12, "secret_name": "db"`},
		{"yaml constant", "secret: true", "secret: true"},
		{"keyword argument", "login(user=user, password=password)", "login(user=user, password=password)"},
		// No false positives on ordinary identifiers.
		{"git sha", "commit 3f786850e387550fdab836ed7e6dc881de23001b", "commit 3f786850e387550fdab836ed7e6dc881de23001b"},
		{"uuid", "id 123e4567-e89b-12d3-a456-426614174000", "id 123e4567-e89b-12d3-a456-426614174000"},
		{"base64 in code", `data := "SGVsbG8sIFdvcmxkIQ==" // aGVsbG8gd29ybGQgZnJvbSBhIHRlc3Q=`, `data := "SGVsbG8sIFdvcmxkIQ==" // aGVsbG8gd29ybGQgZnJvbSBhIHRlc3Q=`},
		{"sha256", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, r.Redact(tt.in))
		})
	}
}

func TestRedactConfiguredValues(t *testing.T) {
	r := bot.NewRedactor("hunter2-configured-secret", "short", "", bot.Secret(testPEM+"\n"))
	require.Equal(t, "token is [REDACTED], ok", r.Redact("token is hunter2-configured-secret, ok"))
	require.Equal(t, "short words stay short", r.Redact("short words stay short"))

	// A configured key is masked whole and line by line, as grep or head
	// would show it.
	lines := strings.Split(testPEM, "\n")
	out := r.Redact("matched: " + lines[2] + "\n" + lines[3])
	require.Equal(t, "matched: [REDACTED]\n[REDACTED]", out)
	esc, _ := json.Marshal(testPEM)
	require.NotContains(t, r.Redact(string(esc)), lines[1])

	// A nil redactor still masks shapes.
	var none *bot.Redactor
	require.Equal(t, "x [REDACTED]", none.Redact("x ghp_0123456789abcdefghijABCDEFGHIJ"))

	// With adds a secret for one use and leaves the original alone.
	tok := "v1.0123456789abcdef0123456789abcdef"
	with := r.With(bot.Secret(tok), bot.Base64Secret("x-access-token:"+tok))
	require.Equal(t, "[REDACTED] and [REDACTED]", with.Redact(tok+" and "+bot.Base64Secret("x-access-token:"+tok).Reveal()))
	require.Equal(t, tok, r.Redact(tok))
}

// A secret written backwards, as rev prints a file that holds it, is
// masked as it is forwards: a configured value, each line of a configured
// key, and every shape of credential (a token, a PEM block whose lines are
// each turned round, a password= pair). Text that merely holds a hint
// backwards stays as it was.
func TestRedactReversedSecrets(t *testing.T) {
	const configured = "plain-configured-value-8f3a9c2e71"
	r := bot.NewRedactor(configured, bot.Secret(testPEM+"\n"))
	rev := func(s string) string {
		var b strings.Builder
		for i, line := range strings.Split(s, "\n") {
			if i > 0 {
				b.WriteByte('\n')
			}
			runes := []rune(line)
			for j := len(runes) - 1; j >= 0; j-- {
				b.WriteRune(runes[j])
			}
		}
		return b.String()
	}
	for _, tc := range []struct{ name, in, secret string }{
		{"configured", "ANA_TOKEN_COPY=" + configured + "\n", configured},
		{"configured key line", testPEM, strings.Split(testPEM, "\n")[2]},
		{"GitLab token", "registry glpat-Zq3xR8vK2mN7pL4wT9yB\n", "glpat-Zq3xR8vK2mN7pL4wT9yB"},
		{"GitHub token", "TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ", "ghp_0123456789abcdefghijABCDEFGHIJ"},
		{"npm token", "//registry.npmjs.org/:_authToken=npm_0123456789abcdefghijABCDEFGHIJ01", "npm_0123456789abcdefghijABCDEFGHIJ01"},
		{"password pair", "db password=Hunter2Hunter2x9 ok", "Hunter2Hunter2x9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := r.Redact(rev(tc.in))
			require.Contains(t, out, bot.Redacted)
			require.NotContains(t, out, rev(tc.secret))
			require.NotContains(t, out, tc.secret)
		})
	}
	unknown := "-----YEK ETAVIRP ASR NIGEB-----\n" + rev("MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi7LZ4cX6QPvUr8hQx0mQ7t1BqW") +
		"\n-----YEK ETAVIRP ASR DNE-----\n"
	require.NotContains(t, bot.NewRedactor().Redact(unknown), "ETAVIRP", "an unknown key written backwards is masked whole")
	for _, plain := range []string{"the key of a map: yek", "ks- is no key", "a normal line of text"} {
		require.Equal(t, plain, r.Redact(plain))
	}
}

// hexWrap is s in hex as xxd -p prints it, 60 digits a line.
func hexWrap(s string) string {
	h := hex.EncodeToString([]byte(s))
	var b strings.Builder
	for len(h) > 60 {
		b.WriteString(h[:60] + "\n")
		h = h[60:]
	}
	return b.String() + h + "\n"
}

// A credential recognised by its shape is masked in the base64 of a file
// that holds it, as base64 prints it (wrapped at 76 characters, or on one
// line with -w0), in either alphabet, and in hex as xxd -p prints it; base64
// of anything else, words and paths stay as they were.
func TestRedactBase64OfCredentials(t *testing.T) {
	file := "DEPLOY_USER=ci\nregistry glpat-Zq3xR8vK2mN7pL4wT9yB\nnothing else here, only words to make it long\n" +
		"TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ\n"
	wrap := func(s string) string {
		var b strings.Builder
		for len(s) > 76 {
			b.WriteString(s[:76] + "\n")
			s = s[76:]
		}
		return b.String() + s + "\n"
	}
	std := base64.StdEncoding.EncodeToString([]byte(file))
	for name, in := range map[string]string{
		"wrapped":      wrap(std),
		"one line":     std,
		"URL alphabet": base64.URLEncoding.EncodeToString([]byte(file)),
		"in JSON":      `{"data":"` + std + `"}`,
		"hex":          hexWrap(file),
	} {
		t.Run(name, func(t *testing.T) {
			out := bot.NewRedactor().Redact(in)
			require.Contains(t, out, bot.Redacted)
			for i := 0; i+24 <= len(std); i += 4 {
				require.NotContains(t, out, std[i:i+24], "no piece of the encoded file is left")
			}
			require.NotContains(t, out, hex.EncodeToString([]byte("glpat-Zq3xR8vK2mN7pL4wT9yB")))
		})
	}
	for _, plain := range []string{
		base64.StdEncoding.EncodeToString([]byte("an ordinary file with words and no credential in it at all\n")),
		hex.EncodeToString([]byte("an ordinary file with words and no credential in it at all\n")),
		"/work/src/github.com/switchyard/switchyard/cmd/switchyard/confine_e2e_test.go",
		"TestPlantedSecretsNeverLeaveWrittenOtherwise and 0123456789abcdef0123456789abcdef01234567",
	} {
		require.Equal(t, plain, bot.NewRedactor().Redact(plain))
	}
}

// A configured value is masked however a command's output spells it: the
// base64 of a file that holds it at any offset (base64 .env, with either
// alphabet), hex (xxd -p), URL-escaped, JSON-escaped.
func TestRedactEncodedConfiguredValues(t *testing.T) {
	secret := `sk-proj-Zq8"Xw3/Ab+9?&=Lm0`
	r := bot.NewRedactor(bot.Secret(secret))
	for pad := range 6 {
		file := strings.Repeat("#", pad) + "OPENAI_API_KEY=" + secret + "\nDEBUG=1\n"
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			encoded := enc.EncodeToString([]byte(file))
			out := r.Redact(encoded)
			require.Contains(t, out, bot.Redacted, "offset %d", pad)
			decoded, _ := enc.DecodeString(strings.ReplaceAll(out, bot.Redacted, ""))
			require.NotContains(t, string(decoded), secret)
		}
	}
	esc, _ := json.Marshal(secret)
	for _, shown := range []string{
		hex.EncodeToString([]byte(secret)),
		strings.ToUpper(hex.EncodeToString([]byte(secret))),
		url.QueryEscape(secret),
		url.PathEscape(secret),
		string(esc),
	} {
		require.NotContains(t, r.Redact("value: "+shown+" end"), shown)
		require.Contains(t, r.Redact("value: "+shown+" end"), bot.Redacted)
	}
	// Ordinary text that happens to be base64 stays.
	require.Equal(t, "aGVsbG8gd29ybGQ=", r.Redact("aGVsbG8gd29ybGQ="))

	// A link html/template writes escapes a query's value with lower-case
	// hex, and more bytes than net/url does; a path keeps the characters a
	// path may hold.
	link := htmltemplate.Must(htmltemplate.New("").Parse(`<a href="/admin/workitems?thread=local:{{.}}">x</a>`))
	path := htmltemplate.Must(htmltemplate.New("").Parse(`<a href="/t/{{.}}">y</a>`))
	for _, tt := range []struct {
		secret string
		tmpl   *htmltemplate.Template
	}{
		{secret, link},
		{"sk/Zq9Secret@Key:987654321", link},
		{"sk/Zq9Secret@Key:987654321", path},
		{"tok~en:with(parens)*and!bangs", link},
	} {
		r := bot.NewRedactor(bot.Secret(tt.secret))
		var page strings.Builder
		require.NoError(t, tt.tmpl.Execute(&page, tt.secret))
		out := r.Redact(page.String())
		require.Equal(t, 1, strings.Count(out, bot.Redacted), "%s\n%s", page.String(), out)
	}
}

// Masking can join text around the placeholder; a configured value spelt
// by the join is masked too.
func TestRedactNeverLeavesAConfiguredValue(t *testing.T) {
	r := bot.NewRedactor("x[REDACTED]y", "D]zzzzzz", "abcdefgh")
	for _, in := range []string{
		"x" + "ghp_0123456789abcdefghijABCDEFGHIJ" + "y",
		"abcdefghzzzzzz",
		"REDACTED",
	} {
		out := r.Redact(in)
		for _, s := range []string{"x[REDACTED]y", "D]zzzzzz", "abcdefgh"} {
			require.NotContains(t, out, s, in)
		}
	}
}

func TestRedactJSONStaysJSON(t *testing.T) {
	r := bot.NewRedactor("configured-secret-value")
	for _, doc := range []string{
		`{"text":"my key is configured-secret-value","n":1}`,
		`{"url":"http://u:p","y":"a@b"}`,
		`["password=\"abc\"", {"k": "ghp_0123456789abcdefghijABCDEFGHIJ"}]`,
		`{"a":"x\"password: hunter2\" y"}`,
	} {
		out := r.RedactJSON([]byte(doc))
		require.True(t, json.Valid(out), "%s -> %s", doc, out)
		require.NotContains(t, string(out), "configured-secret-value")
		require.NotContains(t, string(out), "ghp_0123")
	}
	same := []byte(`{"plain":"text"}`)
	require.Equal(t, same, r.RedactJSON(same))
}

func TestRedactingLogHandler(t *testing.T) {
	const secret = "configured-secret-value"
	r := bot.NewRedactor(secret)
	for _, newHandler := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(r.Handler(newHandler(&buf))).With("ctx", "with "+secret)
		log.Info("failed with "+secret,
			"err", errors.New("dial: Bearer "+secret),
			slog.Group("req", slog.String("auth", "token="+secret), slog.Int("n", 3)),
			"list", []string{"a", secret},
			"raw", []byte("glpat-xxxxxxxxxxxxxxxxxxxx"),
			"typed", bot.Secret(secret),
			"count", 7)
		log.WithGroup("g").Warn("x", "v", secret)
		out := buf.String()
		require.NotContains(t, out, secret)
		require.NotContains(t, out, "glpat-x")
		require.Contains(t, out, "[REDACTED]")
		require.Contains(t, out, "7", "other values keep their type")
	}
}

// A secret a reloaded config brings is masked from then on by everything
// that holds the redactor, its log handler included.
func TestRedactorAddsSecretsInPlace(t *testing.T) {
	const first, added = "first-configured-secret", "reloaded-model-key-0123"
	r := bot.NewRedactor(first)
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, nil)))
	require.Equal(t, "key "+added, r.Redact("key "+added))
	r.Add(added)
	log.Info("using " + added + " and " + first)
	require.Equal(t, "key [REDACTED] [REDACTED]", r.Redact("key "+added+" "+first), "the ones before stay masked")
	require.NotContains(t, buf.String(), added)
	require.NotContains(t, buf.String(), first)
}

// A long text redacted again (an agent's system prompt, in each of its
// runs' transcripts) gets the same answer, and a secret added since is
// masked in it even though the text was seen before.
func TestRedactLongTextsAgain(t *testing.T) {
	const first, added = "first-configured-secret", "reloaded-model-key-0123"
	prompt := strings.Repeat("You are the helper. Keep answers short and exact.\n", 40)
	text := prompt + "deploy with " + first + " and " + added + " and ghp_0123456789abcdefghijABCDEFGHIJ\n"
	r := bot.NewRedactor(first)
	once := r.Redact(text)
	require.NotContains(t, once, first)
	require.NotContains(t, once, "ghp_0123456789")
	require.Contains(t, once, added)
	require.Equal(t, once, r.Redact(text), "the same text, the same answer")
	require.Equal(t, prompt, r.Redact(prompt), "nothing to mask")
	require.Equal(t, prompt, r.Redact(prompt))

	r.Add(added)
	again := r.Redact(text)
	require.NotContains(t, again, added, "a secret added after the text was seen")
	require.NotContains(t, again, first)
	with := bot.NewRedactor(first).With("helper. Keep answers")
	require.NotContains(t, with.Redact(prompt), "helper. Keep answers", "a redactor made With more secrets")
}

// A remembered answer is the one a redactor that never saw the text
// gives: for texts either side of the length from which answers are kept,
// with a secret across that length, before and after secrets are added,
// and from a redactor made With more.
func TestRedactRememberedAnswersStayMasked(t *testing.T) {
	const first, added, extra = "first-configured-secret", "reloaded-model-key-0123", "tool-scoped-token-456789"
	for _, n := range []int{1000, 1023, 1024, 1025, 1100, 4096} {
		for _, secret := range []string{first, added, extra} {
			// The secret ends at n-1, n and n+1 bytes: across the length
			// from which answers are kept, or just inside it.
			for _, end := range []int{n - 1, n, n + 1} {
				pad := strings.Repeat("x", end-len(secret)-1)
				text := pad + " " + secret + strings.Repeat(" y", (n-end+1)/2)
				r := bot.NewRedactor(first)
				for range 2 {
					require.Equal(t, bot.NewRedactor(first).Redact(text), r.Redact(text))
				}
				r.Add(added)
				for range 2 {
					require.Equal(t, bot.NewRedactor(first, added).Redact(text), r.Redact(text))
				}
				w := r.With(extra)
				for range 2 {
					got := w.Redact(text)
					require.Equal(t, bot.NewRedactor(first, added, extra).Redact(text), got)
					require.NotContains(t, got, secret)
				}
			}
		}
	}
}

// Redacting long texts while secrets are added never gives an answer that
// shows a secret added before the call began.
func TestRedactRememberedAnswersWhileAdding(t *testing.T) {
	secrets := make([]string, 16)
	for i := range secrets {
		secrets[i] = fmt.Sprintf("added-secret-%02d-abcdefgh", i)
	}
	text := strings.Repeat("a long prompt line. ", 60) + strings.Join(secrets, " ")
	r := bot.NewRedactor()
	var added atomic.Int32 // how many secrets Add has returned for
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				n := int(added.Load())
				got := r.Redact(text)
				for _, s := range secrets[:n] {
					if strings.Contains(got, s) {
						t.Errorf("secret %s added before the call is in its answer", s)
						return
					}
				}
				if n == len(secrets) {
					return
				}
			}
		})
	}
	for _, s := range secrets {
		r.Add(bot.Secret(s))
		added.Add(1)
	}
	wg.Wait()
}

// The answers a redactor keeps are its own copies: a short text cut from a
// large one (a line of a big log) does not keep the large one in memory.
func TestRedactRemembersCopies(t *testing.T) {
	r := bot.NewRedactor("first-configured-secret")
	big := strings.Repeat("a large tool output, of which one kilobyte is redacted. ", 1<<14)
	alive := weak.Make(unsafe.StringData(big))
	for i := range 4 {
		r.Redact(big[i : i+2048])
	}
	big = ""
	runtime.GC()
	runtime.GC()
	require.Nil(t, alive.Value(), "the large text is still held")
	runtime.KeepAlive(r)
}

// FuzzRedact holds the redactor to its promise: it never panics and what it
// returns never contains a configured secret, whatever surrounds it.
func FuzzRedact(f *testing.F) {
	f.Add("hunter2-configured-secret", "token is hunter2-configured-secret, ok")
	f.Add("x[REDACTED]y", "xghp_0123456789abcdefghijABCDEFGHIJy")
	f.Add("D]zzzzzz", "abcdefghzzzzzz")
	f.Add(testPEM, "cat key.pem\n"+testPEM+"\n")
	f.Add("p@ss:w0rd/x", "https://ana:p@ss:w0rd/x@host")
	f.Add("secret-value", `{"password": "secret-value", "k": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbmEifQ."}`)
	f.Fuzz(func(t *testing.T, secret, text string) {
		r := bot.NewRedactor(bot.Secret(secret), "abcdefgh")
		out := r.Redact(text)
		_ = r.RedactJSON([]byte(text))
		s := strings.TrimSpace(secret)
		if len(s) >= 8 && !strings.Contains(bot.Redacted, s) && strings.Contains(out, s) {
			t.Fatalf("secret %q survives in %q", s, out)
		}
		if strings.Contains(out, "abcdefgh") {
			t.Fatalf("secret %q survives in %q", "abcdefgh", out)
		}
	})
}
