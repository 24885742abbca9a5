package agents

import (
	"regexp"
	"sort"
	"strings"
)

// Redacted replaces a secret in stored text.
const Redacted = "[REDACTED]"

// minSecretLen keeps short configured values (a "1", a "dev") from masking
// ordinary words everywhere.
const minSecretLen = 8

// tokenShapes are credentials recognisable by their form, whoever they
// belong to: GitHub tokens, Slack tokens, OpenAI/Anthropic-style keys, AWS
// access key ids and PEM private keys.
var tokenShapes = regexp.MustCompile(strings.Join([]string{
	`\bgh[pousr]_[A-Za-z0-9]{20,}`,
	`\bgithub_pat_[A-Za-z0-9_]{20,}`,
	`\bxox[abposr]-[A-Za-z0-9-]{10,}`,
	`\bxapp-[A-Za-z0-9-]{10,}`,
	`\bsk-[A-Za-z0-9_-]{16,}`,
	`\bAKIA[0-9A-Z]{16}\b`,
	`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`,
}, "|"))

// bearer finds an Authorization bearer credential; the scheme word stays so
// a reader still sees what was there.
var bearer = regexp.MustCompile(`(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]{8,})`)

// Redactor masks secrets in text that is stored or shown: the configured
// secret values, and anything shaped like a common token.
type Redactor struct {
	values *strings.Replacer
}

// NewRedactor returns a redactor for the given secret values.
func NewRedactor(secrets ...string) *Redactor {
	var vals []string
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			vals = append(vals, s)
		}
	}
	// Longer values first, so a secret that contains another is masked
	// whole.
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	r := &Redactor{}
	if len(vals) > 0 {
		pairs := make([]string, 0, 2*len(vals))
		for _, v := range vals {
			pairs = append(pairs, v, Redacted)
		}
		r.values = strings.NewReplacer(pairs...)
	}
	return r
}

// Redact returns s with every secret masked.
func (r *Redactor) Redact(s string) string {
	if s == "" {
		return s
	}
	if r != nil && r.values != nil {
		s = r.values.Replace(s)
	}
	s = tokenShapes.ReplaceAllString(s, Redacted)
	return bearer.ReplaceAllStringFunc(s, func(m string) string {
		sub := bearer.FindStringSubmatch(m)
		prefix, tok := sub[1], sub[2]
		// Prose ("bearer authentication") has no digits and is short; a
		// credential has one or the other.
		if len(tok) < 16 && !strings.ContainsAny(tok, "0123456789") {
			return m
		}
		return prefix + Redacted
	})
}
