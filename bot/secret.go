package bot

import (
	"fmt"
	"log/slog"
)

// Secret holds a credential (token, key, signing secret). Every way of
// printing it — fmt verbs, JSON, YAML, slog — yields Redacted, so a config
// or an error that carries one cannot leak it by accident. Use Reveal at the
// single place the raw value is needed.
type Secret string

// Reveal returns the raw value.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret has a value.
func (s Secret) IsSet() bool { return s != "" }

func (s Secret) String() string { return Redacted }

// GoString covers %#v.
func (s Secret) GoString() string { return `"` + Redacted + `"` }

// MarshalText covers JSON, YAML map keys and anything else text-based.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// MarshalJSON makes json.Marshal print the placeholder even through
// reflection paths that do not consult MarshalText.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalYAML covers gopkg.in/yaml.v3.
func (s Secret) MarshalYAML() (any, error) { return Redacted, nil }

// LogValue covers log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// UnmarshalText accepts the raw value from config.
func (s *Secret) UnmarshalText(b []byte) error {
	*s = Secret(b)
	return nil
}

// Format covers every fmt verb, including those (%d, %x of a struct field)
// that would otherwise walk the underlying string without calling String.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", Redacted)
	case 'v':
		if f.Flag('#') {
			fmt.Fprint(f, s.GoString())
			return
		}
		fmt.Fprint(f, Redacted)
	default:
		fmt.Fprint(f, Redacted)
	}
}
