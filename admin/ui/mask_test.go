package ui

import (
	"bytes"
	"html/template"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

type MaskInner struct {
	Text   string
	hidden string
}

type maskOuter struct {
	MaskInner
	Name  string
	Ptr   *MaskInner
	List  []string
	Map   map[string]string
	Any   any
	Array [2]string
	Raw   []byte
	Num   int
}

func TestEveryStringATemplateCanReachIsMasked(t *testing.T) {
	const secret = "s3cret+value&more<x>"
	r := bot.NewRedactor(bot.Secret(secret))
	data := maskOuter{
		MaskInner: MaskInner{Text: "a " + secret, hidden: "kept"},
		Name:      secret, Ptr: &MaskInner{Text: secret}, List: []string{"ok", secret},
		Map: map[string]string{secret: secret}, Any: []any{secret, 7}, Array: [2]string{secret, "b"},
		Raw: []byte("bytes"), Num: 7,
	}
	tmpl := template.Must(template.New("").Parse(
		`{{.Text}} {{.Name}} {{.Ptr.Text}} {{range .List}}{{.}}{{end}} {{range $k, $v := .Map}}{{$k}}={{$v}}{{end}} {{.Any}} {{index .Array 0}}`))

	// Escaped for HTML, the secret no longer reads as itself, so masking
	// the page alone would let it through.
	var plain bytes.Buffer
	require.NoError(t, tmpl.Execute(&plain, data))
	require.Contains(t, r.Redact(plain.String()), "s3cret&#43;value&amp;more")

	got := masked(r, reflect.ValueOf(data)).Interface().(maskOuter)
	var out bytes.Buffer
	require.NoError(t, tmpl.Execute(&out, got))
	require.NotContains(t, out.String(), "s3cret")
	require.Equal(t, 8, strings.Count(out.String(), bot.Redacted))
	require.Equal(t, "kept", got.hidden)
	require.Equal(t, 7, got.Num)
	require.Equal(t, []byte("bytes"), got.Raw)
	// The original is left as it was.
	require.Equal(t, secret, data.Name)
	require.Equal(t, secret, data.Ptr.Text)
	require.Equal(t, secret, data.List[1])
}
