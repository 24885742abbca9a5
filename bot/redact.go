package bot

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redacted replaces a secret wherever Switchyard shows or stores text: tool
// results before the model reads them, conversations, transcripts, replies,
// status messages, the audit log, approvals, API answers and logs. A Secret
// prints as Redacted too.
const Redacted = "[REDACTED]"

// minSecretLen keeps short configured values (a "1", a "dev") from masking
// ordinary words everywhere.
const minSecretLen = 8

// minMatch is the shortest text that can hold a secret: "token=x".
const minMatch = 7

// minKeyLine is the shortest body line of a configured PEM key that is
// masked on its own: the last line of a key may be short, and a short line
// is no secret.
const minKeyLine = 16

// Redactor masks secrets in text: every value configured as a secret, and
// anything shaped like a common credential (GitHub, GitLab, npm, Slack,
// OpenAI, Anthropic, AWS and Google keys, JWTs, PEM private keys, bearer and
// basic credentials, passwords in URLs, password=/secret=/token=/api_key=
// pairs). It is the one redactor of the daemon: every path that shows or
// stores text goes through it. A nil *Redactor masks the shapes alone. It is
// safe for concurrent use.
type Redactor struct {
	masks atomic.Pointer[masks]
	// mu serialises Add; readers load masks without it.
	mu sync.Mutex
}

// masks are the configured values a Redactor replaces, with what it made
// of long texts it was given more than once.
type masks struct {
	values  []string // longest first
	replace *strings.Replacer
	seen    *seenTexts
}

// seenTexts remembers what Redact returned for long texts, which come back
// unchanged again and again (an agent's system prompt is redacted into the
// transcript of each of its runs), against the masks it belongs to: adding
// a secret makes new masks, and so forgets every answer. It holds at most
// seenLimit bytes of texts and answers, and starts again when full.
type seenTexts struct {
	mu    sync.Mutex
	m     map[string]string
	bytes int
}

const (
	// seenMin is the shortest text remembered: shorter ones cost little
	// to redact again, and are seldom repeated whole.
	seenMin   = 1 << 10
	seenLimit = 4 << 20
)

func (st *seenTexts) get(s string) (string, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	out, ok := st.m[s]
	return out, ok
}

// put remembers out as the answer for s. Both are copied: s may be cut
// from a much larger text (a line of a long tool output), which would
// otherwise stay in memory with it, beyond seenLimit.
func (st *seenTexts) put(s, out string) {
	n := len(s) + len(out)
	if out == s {
		n = len(s)
	}
	if n > seenLimit/8 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.m == nil || st.bytes+n > seenLimit {
		st.m, st.bytes = map[string]string{}, 0
	}
	if _, ok := st.m[s]; ok {
		return
	}
	key := strings.Clone(s)
	if out == s {
		out = key
	} else {
		out = strings.Clone(out)
	}
	st.m[key] = out
	st.bytes += n
}

// NewRedactor returns a redactor for the given secrets; unset ones and
// values shorter than 8 bytes are skipped. A value is also masked in its
// JSON-escaped, URL-escaped, hex and base64 forms, and one with several
// lines (a PEM key) line by line.
func NewRedactor(secrets ...Secret) *Redactor {
	r := &Redactor{}
	r.masks.Store(newMasks(nil, secrets))
	return r
}

// With returns a redactor that masks r's secrets and these, such as a
// short-lived token one tool holds. Secrets added to r later are not in it.
func (r *Redactor) With(secrets ...Secret) *Redactor {
	out := &Redactor{}
	out.masks.Store(newMasks(r.current(), secrets))
	return out
}

// Add masks these secrets too, from now on, everywhere r is used: a
// reloaded config may bring new ones. Nothing is ever unmasked: a secret
// replaced in the config is still a secret.
func (r *Redactor) Add(secrets ...Secret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.masks.Store(newMasks(r.current(), secrets))
}

func (r *Redactor) current() *masks {
	if r == nil {
		return nil
	}
	return r.masks.Load()
}

func newMasks(base *masks, secrets []Secret) *masks {
	var vals []string
	if base != nil {
		vals = slices.Clone(base.values)
	}
	for _, s := range secrets {
		vals = append(vals, secretForms(s.Reveal())...)
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(vals, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	vals = slices.Compact(vals)
	out := &masks{values: vals, seen: &seenTexts{}}
	if len(vals) > 0 {
		pairs := make([]string, 0, 2*len(vals))
		for _, v := range vals {
			pairs = append(pairs, v, Redacted)
		}
		out.replace = strings.NewReplacer(pairs...)
	}
	return out
}

// secretForms returns the strings that reveal value: the value itself, and
// for a value of several lines each long line and the JSON-escaped whole.
func secretForms(value string) []string {
	value = strings.TrimSpace(value)
	if len(value) < minSecretLen || strings.Contains(Redacted, value) {
		// Too short to mask without masking words, or part of the
		// placeholder itself, which would then never go away.
		return nil
	}
	out := []string{value}
	if esc, err := json.Marshal(value); err == nil && string(esc[1:len(esc)-1]) != value {
		out = append(out, string(esc[1:len(esc)-1]))
	}
	if strings.ContainsAny(value, "\r\n") {
		for line := range strings.Lines(value) {
			if line = strings.TrimSpace(line); len(line) >= minKeyLine && !strings.HasPrefix(line, "-----") {
				out = append(out, line, reverseRunes(line))
			}
		}
	} else if rev := reverseRunes(value); rev != value {
		// Written backwards, as rev prints it.
		out = append(out, rev)
	}
	return append(out, encodedForms(value)...)
}

// reverseRunes returns s with its characters in reverse order, as rev
// prints a line.
func reverseRunes(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// reverseLines returns s with each line's characters in reverse order and
// the lines in their order, as rev prints a file.
func reverseLines(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for line := range strings.Lines(s) {
		body := strings.TrimRight(line, "\r\n")
		b.WriteString(reverseRunes(body))
		b.WriteString(line[len(body):])
	}
	return b.String()
}

// minEncodedLen is the shortest encoded form of a secret that is masked:
// shorter runs of base64 or hex occur in ordinary text.
const minEncodedLen = 12

// encodedForms returns value as a command's output may spell it encoded:
// URL-escaped, in hex (xxd -p, od), and in base64 with either alphabet,
// where the value may sit at any offset of a longer encoded text (base64
// of a whole file that holds it), so each of the three alignments is given
// by the characters that depend on the value alone.
func encodedForms(value string) []string {
	var out []string
	add := func(f string) {
		if len(f) >= minEncodedLen && f != value {
			out = append(out, f)
		}
	}
	// Percent-encoding with either case of hex digit: net/url writes
	// upper case, html/template's URL escaper lower case and more bytes
	// (everything but letters, digits and -._~).
	for _, f := range []string{url.QueryEscape(value), url.PathEscape(value), escapeUnreserved(value)} {
		add(f)
		add(lowerEscapes(f))
	}
	add(hex.EncodeToString([]byte(value)))
	add(strings.ToUpper(hex.EncodeToString([]byte(value))))
	buf := make([]byte, 0, len(value)+2)
	for k := range 3 {
		buf = append(buf[:0], make([]byte, k)...)
		buf = append(buf, value...)
		// Characters from the first that holds no bit of the k bytes
		// before the value to the last that holds only bits of it.
		from, to := (8*k+5)/6, 8*(k+len(value))/6
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			add(enc.EncodeToString(buf)[from:to])
		}
	}
	return out
}

// escapeUnreserved percent-encodes every byte of s but letters, digits and
// -._~, in upper-case hex.
func escapeUnreserved(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// lowerEscapes returns s with the hex digits of its percent-escapes in
// lower case.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if 'A' <= b[j] && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
		}
	}
	return string(b)
}

// Redact returns s with every secret masked.
func (r *Redactor) Redact(s string) string {
	if len(s) < minMatch {
		return s
	}
	m := r.current()
	if m != nil && len(s) >= seenMin {
		if out, ok := m.seen.get(s); ok {
			return out
		}
		out := m.redact(s)
		m.seen.put(s, out)
		return out
	}
	return m.redact(s)
}

// redact masks s with these masks alone, so that what is remembered
// against them is what they make of it; nil masks the shapes alone.
func (m *masks) redact(s string) string {
	in := s
	s = maskShapes(m.replaceValues(s))
	if reversedHint(s) {
		// Credentials written backwards (rev): the lines turned round
		// again, masked, and turned back.
		if back := maskShapes(reverseLines(s)); strings.Contains(back, Redacted) {
			s = strings.ReplaceAll(reverseLines(back), reversedPlaceholder, Redacted)
		}
	}
	s = maskEncodedShapes(s)
	if s == in {
		return s // nothing masked, so nothing joined
	}
	// Masking can join text around a placeholder; should that spell a
	// configured value, mask it again, and give up on the text if it keeps
	// doing so.
	for range 4 {
		out := m.replaceValues(s)
		if out == s {
			return s
		}
		s = out
	}
	return Redacted
}

// maskShapes masks in s every credential recognised by its shape.
func maskShapes(s string) string {
	var lower string // s with ASCII lower-cased, computed when a shape needs it
	for i := range shapes {
		sh := &shapes[i]
		text := s
		if sh.fold {
			if lower == "" {
				lower = asciiLower(s)
			}
			text = lower
		}
		if out := sh.apply(s, sh.windows(text)); out != s {
			s, lower = out, ""
		}
	}
	return s
}

// minEncodedRun is the shortest run of base64 that is decoded to look for
// a credential in it: the base64 of the shortest shape.
const minEncodedRun = 24

// maskEncodedShapes masks each run of base64 or hex in s (base64 or xxd -p
// of a file, also wrapped in lines as they write it) whose decoding holds a
// credential
// recognised by its shape: a token planted in a file is not shown by
// base64 of the file either. Runs without one, ordinary base64, are left
// alone.
func maskEncodedShapes(s string) string {
	if len(s) < minEncodedRun {
		return s
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		if !isBase64Byte(s[i]) {
			i++
			continue
		}
		start, lineStart := i, i
		for i < len(s) {
			if isBase64Byte(s[i]) {
				i++
				continue
			}
			// A line of wrapped base64 (76 characters from base64, 64
			// from openssl) goes on on the next.
			if n := i - lineStart; s[i] == '\n' && n >= 60 && n%4 == 0 && i+1 < len(s) && isBase64Byte(s[i+1]) {
				i++
				lineStart = i
				continue
			}
			break
		}
		end := i
		for end < len(s) && s[end] == '=' {
			end++ // padding
		}
		if i-start >= minEncodedRun && encodesCredential(s[start:i]) {
			b.WriteString(s[last:start])
			b.WriteString(Redacted)
			last = end
		}
		i = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isBase64Byte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
}

// encodesCredential reports whether run, hex or base64 of either
// alphabet, decodes to text holding a credential's shape. Runs that decode to
// anything but text (words, paths, hashes) are ruled out by a look at
// the bytes, before any shape is tried.
func encodesCredential(run string) bool {
	run = strings.ReplaceAll(run, "\n", "")
	if len(run)%2 == 0 && strings.Trim(run, "0123456789abcdefABCDEF") == "" {
		// Hex, as xxd -p and od print a file.
		if dec, err := hex.DecodeString(run); err == nil && mostlyText(dec) {
			if text := string(dec); maskShapes(text) != text {
				return true
			}
		}
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(run, "-_") {
		if strings.ContainsAny(run, "+/") {
			return false // no alphabet has both
		}
		enc = base64.RawURLEncoding
	}
	dec, err := enc.DecodeString(run[:len(run)-len(run)%4])
	if err != nil || !mostlyText(dec) {
		return false
	}
	text := string(dec)
	return maskShapes(text) != text
}

// mostlyText reports whether b is text: printable ASCII, tabs, line ends
// and UTF-8 bytes, with at most one byte in 20 anything else.
func mostlyText(b []byte) bool {
	other := 0
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			other++
		}
	}
	return other*20 <= len(b)
}

// reversedPlaceholder is the placeholder as reverseLines turns it.
var reversedPlaceholder = reverseRunes(Redacted)

// reversedHints are the hints of every shape written backwards, and
// whether they are compared with the text lower-cased.
var reversedHints = func() (out []shape) {
	for _, sh := range shapes {
		r := shape{fold: sh.fold}
		for _, h := range sh.hints {
			r.hints = append(r.hints, reverseRunes(h))
		}
		out = append(out, r)
	}
	return out
}()

// reversedHint reports whether s holds a hint of a shape written
// backwards, so that reversing its lines may show a credential.
func reversedHint(s string) bool {
	var lower string
	for _, sh := range reversedHints {
		text := s
		if sh.fold {
			if lower == "" {
				lower = asciiLower(s)
			}
			text = lower
		}
		for _, h := range sh.hints {
			if strings.Contains(text, h) {
				return true
			}
		}
	}
	return false
}

func (m *masks) replaceValues(s string) string {
	if m == nil || m.replace == nil {
		return s
	}
	return m.replace.Replace(s)
}

// RedactJSON masks secrets in a JSON document and keeps it valid JSON.
// Masking replaces text inside strings with the placeholder, which is
// almost always still JSON; when it is not (a match spanning an escape),
// every string of the document is masked on its own instead.
func (r *Redactor) RedactJSON(doc []byte) []byte {
	out := r.Redact(string(doc))
	if out == string(doc) {
		return doc
	}
	if json.Valid([]byte(out)) {
		return []byte(out)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// Not JSON to begin with: the masked text is the best there is,
		// as one JSON string.
		b, _ := json.Marshal(out)
		return b
	}
	b, err := json.Marshal(r.redactValue(v))
	if err != nil {
		b, _ = json.Marshal(Redacted)
	}
	return b
}

func (r *Redactor) redactValue(v any) any {
	switch v := v.(type) {
	case string:
		return r.Redact(v)
	case []any:
		for i := range v {
			v[i] = r.redactValue(v[i])
		}
	case map[string]any:
		for k, x := range v {
			v[k] = r.redactValue(x)
		}
	}
	return v
}

// Handler wraps next so that no secret reaches the log: the message, every
// string attribute, and the text of errors and other values are masked.
func (r *Redactor) Handler(next slog.Handler) slog.Handler {
	return &redactingHandler{next: next, r: r}
}

type redactingHandler struct {
	next slog.Handler
	r    *Redactor
}

func (h *redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.r.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.r.attr(a)
	}
	return &redactingHandler{next: h.next.WithAttrs(masked), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{next: h.next.WithGroup(name), r: h.r}
}

// attr masks one attribute. Values other than strings and groups keep their
// type unless their text shows a secret, in which case the masked text
// replaces them.
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.Redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]slog.Attr, len(group))
		for i, g := range group {
			masked[i] = r.attr(g)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(masked...)}
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case []byte:
			text = string(x)
		default:
			text = fmt.Sprint(x)
		}
		if masked := r.Redact(text); masked != text {
			return slog.String(a.Key, masked)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// shape is one kind of credential recognised by its form.
type shape struct {
	re *regexp.Regexp
	// hints are substrings one of which every match contains; fold
	// compares them with the text's ASCII lower-cased. re runs only on the
	// lines that hold a hint, or, for a shape of several lines, on the
	// whole text when it holds one.
	hints     []string
	fold      bool
	multiline bool
	// key marks a key=value shape: re is anchored (^) and runs from the
	// start of the name that holds each hint, which is cheaper than
	// searching the line.
	key bool
	// keep is the submatch kept in front of the placeholder (a scheme
	// word, a key name); 0 masks the whole match.
	keep int
	// after is put after the placeholder ("@" of a URL's user info).
	after string
	// valid, when set, says whether a match is a credential rather than
	// ordinary text that happens to look like one; kept is the text of
	// keep, m the rest.
	valid func(kept, m string) bool
}

// window is a span of the text, [start, end).
type window struct{ start, end int }

// windows returns the spans of text re must search: the lines that hold a
// hint, in order, or the whole text for a shape of several lines; none when
// no hint occurs. text has the offsets of the text masked.
func (sh *shape) windows(text string) []window {
	var out []window
	for _, h := range sh.hints {
		for from := 0; from < len(text); {
			i := strings.Index(text[from:], h)
			if i < 0 {
				break
			}
			if sh.multiline {
				return []window{{0, len(text)}}
			}
			at := from + i
			start := strings.LastIndexByte(text[:at], '\n') + 1
			end := len(text)
			if j := strings.IndexByte(text[at:], '\n'); j >= 0 {
				end = at + j
			}
			from = end
			if sh.key {
				// The name holding the hint, to the end of its line; the
				// line may hold more names.
				start = at
				for start > 0 && isNameByte(text[start-1]) {
					start--
				}
				from = at + len(h)
			}
			out = append(out, window{start, end})
		}
	}
	if len(out) < 2 {
		return out
	}
	// Several hints may find one line: each line is searched once.
	slices.SortFunc(out, func(a, b window) int { return a.start - b.start })
	return slices.Compact(out)
}

// apply masks the matches of re within the windows of s.
func (sh *shape) apply(s string, windows []window) string {
	var b strings.Builder
	last := 0
	for _, w := range windows {
		if w.start < last {
			continue // inside what was masked already
		}
		var locs [][]int
		if sh.key {
			if loc := sh.re.FindStringSubmatchIndex(s[w.start:w.end]); loc != nil {
				locs = [][]int{loc}
			}
		} else {
			locs = sh.re.FindAllStringSubmatchIndex(s[w.start:w.end], -1)
		}
		for _, loc := range locs {
			start, end := w.start+loc[0], w.start+loc[1]
			keepEnd := start
			if sh.keep > 0 && loc[2*sh.keep] >= 0 {
				keepEnd = w.start + loc[2*sh.keep+1]
			}
			if sh.valid != nil && !sh.valid(s[start:keepEnd], s[keepEnd:end]) {
				continue
			}
			b.WriteString(s[last:keepEnd])
			b.WriteString(Redacted)
			b.WriteString(sh.after)
			last = end
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// asciiLower lower-cases the ASCII letters of s and nothing else, so every
// byte keeps its offset.
func asciiLower(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	if i < 0 {
		return s
	}
	b := []byte(s)
	for j := i; j < len(b); j++ {
		if c := b[j]; c >= 'A' && c <= 'Z' {
			b[j] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// secretKeys are the key names whose values are secrets in key=value,
// key: value and JSON pairs: the name may have a prefix (DB_PASSWORD,
// client_secret, GITHUB_TOKEN) but must end with one of these.
const secretKeys = `password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key`

// pairValue says whether the value of a key=value pair is a secret: not a
// reference to one (${VAR}, $VAR), not a word YAML reads as a constant, not
// the key's own name (a keyword argument passed on) and not masked already.
func pairValue(kept, v string) bool {
	v = strings.Trim(v, `\"'`)
	switch strings.ToLower(v) {
	case "", "true", "false", "null", "none", "nil", "yes", "no", "~":
		return false
	}
	key := strings.TrimRight(kept, "\\\"' \t:=")
	return !strings.HasPrefix(v, "$") && !strings.HasPrefix(v, "{{") && !strings.HasPrefix(v, Redacted) &&
		!strings.EqualFold(v, key)
}

// shapes are applied in order; a PEM key goes before the pairs so that a
// "private_key: -----BEGIN" line is masked whole.
var shapes = []shape{
	{ // a PEM private key block, also inside JSON strings (\n escapes)
		re:        regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\s:,.\\-]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`),
		hints:     []string{"PRIVATE KEY"},
		multiline: true,
	},
	{ // the start of a PEM private key whose end was cut off
		re:        regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:(?:\r?\n|\\r?\\n)(?:[A-Za-z-]+: [^\r\n\\]*|[A-Za-z0-9+/=]{16,}))+`),
		hints:     []string{"PRIVATE KEY"},
		multiline: true,
	},
	{ // JSON Web Tokens: a header and a payload, both JSON objects
		re:    regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`),
		hints: []string{"eyJ"},
	},
	{ // GitHub: personal, OAuth, user-to-server, server-to-server, refresh; fine-grained
		re:    regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`),
		hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
	},
	{ // GitLab: personal, OAuth, deploy, runner, CI job, trigger, feed, mail, agent, SCIM, feature flag tokens
		re:    regexp.MustCompile(`\bgl(?:pat|oas|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct)-[A-Za-z0-9_-][A-Za-z0-9_.-]{18,}[A-Za-z0-9_-]`),
		hints: []string{"glpat-", "gloas-", "gldt-", "glrt-", "glrtr-", "glcbt-", "glptt-", "glft-", "glimt-", "glagent-", "glsoat-", "glffct-"},
	},
	{ // npm access tokens
		re:    regexp.MustCompile(`\bnpm_[A-Za-z0-9]{30,}`),
		hints: []string{"npm_"},
	},
	{ // Slack bot, user, workspace, refresh and app-level tokens
		re:    regexp.MustCompile(`\b(?:xox[a-z]\.)?x(?:ox[abposrce]|app)-[0-9A-Za-z-]+`),
		hints: []string{"xox", "xapp-"},
	},
	{ // Anthropic (sk-ant-…) and OpenAI (sk-…, sk-proj-…) keys: random, so with letters and digits
		re:    regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`),
		hints: []string{"sk-"},
		valid: func(_, m string) bool {
			return strings.ContainsAny(m, "0123456789") && strings.IndexFunc(m[3:], isLetter) >= 0
		},
	},
	{ // AWS access key ids, long-lived and temporary
		re:    regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),
		hints: []string{"AKIA", "ASIA"},
	},
	{ // Google API keys
		re:    regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`),
		hints: []string{"AIza"},
	},
	{ // a password in a URL: https://user:password@host
		re:    regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"'<>]+:)[^/\s@"'<>]+@`),
		hints: []string{"://"},
		keep:  1,
		after: "@",
	},
	{ // Authorization: Bearer …; prose ("bearer authentication") has no digits and is short
		re:    regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`),
		hints: []string{"bearer"},
		fold:  true,
		keep:  1,
		valid: func(_, m string) bool { return len(m) >= 16 || strings.ContainsAny(m, "0123456789") },
	},
	{ // Authorization: Basic base64(user:password)
		re:    regexp.MustCompile(`(?i)\b(authorization:\s*basic\s+)[A-Za-z0-9+/=]{8,}`),
		hints: []string{"basic"},
		fold:  true,
		keep:  1,
	},
	{ // quoted values, in any case: "password": "…", api_key = '…', TOKEN="…", also JSON-escaped
		re:    regexp.MustCompile(`(?i)^([A-Za-z0-9_.-]*(?:` + secretKeys + `)\\?["']?\s*[:=]\s*\\?["'])(?:[^"'\\\r\n]|\\[^"'\\])+`),
		hints: []string{"pass", "secret", "token", "key"},
		fold:  true,
		key:   true,
		keep:  1,
		valid: pairValue,
	},
	{ // key=value without spaces, in any case: env files, query strings, flags
		re:    regexp.MustCompile(`(?i)^([A-Za-z0-9_.-]*(?:` + secretKeys + `)=)[^\s"'&;,<>=()\\][^\s"'&;,<>()\\]*`),
		hints: []string{"pass", "secret", "token", "key"},
		fold:  true,
		key:   true,
		keep:  1,
		valid: pairValue,
	},
	{ // key: value as YAML and HTTP headers write it; lower or upper case
		// only, so a Go field (Password: cfg.Password) is left alone
		re: regexp.MustCompile(`^((?:[a-z0-9_.-]*(?:` + secretKeys + `)|[A-Z0-9_.-]*(?:` + strings.ToUpper(secretKeys) +
			`)|(?i:x-api-key|x-auth-token|private-token|x-gitlab-token|x-vault-token)):[ \t]+)[^\s"'#,][^\s"',]*`),
		hints: []string{"pass", "secret", "token", "key"},
		fold:  true,
		key:   true,
		keep:  1,
		valid: pairValue,
	},
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// Base64Secret returns the standard base64 encoding of s as a Secret, for
// credentials that travel encoded (an HTTP basic Authorization header).
func Base64Secret(s string) Secret {
	return Secret(base64.StdEncoding.EncodeToString([]byte(s)))
}

// RedactingOutbox wraps next so that every message a thread will read —
// status messages, replies, approval requests — is masked before it is
// stored and sent.
func RedactingOutbox(next Outboxer, r *Redactor) Outboxer {
	return redactingOutbox{next: next, r: r}
}

type redactingOutbox struct {
	next Outboxer
	r    *Redactor
}

func (o redactingOutbox) Enqueue(ctx context.Context, msg OutboxMessage) (OutboxMessage, error) {
	return o.next.Enqueue(ctx, o.redact(msg))
}

func (o redactingOutbox) EnqueueNew(ctx context.Context, msg OutboxMessage) (OutboxMessage, bool, error) {
	return o.next.EnqueueNew(ctx, o.redact(msg))
}

func (o redactingOutbox) EnqueueAll(ctx context.Context, msgs []OutboxMessage) error {
	masked := make([]OutboxMessage, len(msgs))
	for i, m := range msgs {
		masked[i] = o.redact(m)
	}
	return o.next.EnqueueAll(ctx, masked)
}

func (o redactingOutbox) redact(msg OutboxMessage) OutboxMessage {
	msg.Text = o.r.Redact(msg.Text)
	if s := msg.Status; s != nil {
		v := *s
		v.Activity = o.r.Redact(v.Activity)
		v.Children = slices.Clone(v.Children)
		for i, c := range v.Children {
			v.Children[i] = o.r.Redact(c)
		}
		msg.Status = &v
	}
	if a := msg.Approval; a != nil {
		v := *a
		v.Arguments, v.Reason = o.r.Redact(v.Arguments), o.r.Redact(v.Reason)
		msg.Approval = &v
	}
	return msg
}
