package ui

import (
	"reflect"
	"strings"

	"github.com/switchyard/switchyard/bot"
)

// masked returns a copy of v with every string it holds masked by r.
// html/template escapes what it writes ("&" becomes "&amp;", "+" becomes
// "&#43;"), and a secret escaped no longer reads as itself to the
// redactor, so a page's data is masked before it is escaped, and the page
// again after (for what the templates themselves write). What a template
// reaches through exported fields, elements, map keys and values is
// masked; bytes and functions are left as they are, and so are fields a
// type promotes from an unexported embedded struct (reflection cannot set
// them): page data embeds exported types only.
func masked(r *bot.Redactor, v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		if verbatim(v.String()) {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.SetString(r.Redact(v.String()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(masked(r, v.Elem()))
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(masked(r, v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if f := out.Field(i); f.CanSet() {
				f.Set(masked(r, v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(masked(r, v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(masked(r, v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(masked(r, it.Key()), masked(r, it.Value()))
		}
		return out
	}
	return v
}

// verbatim reports whether s is written as it is wherever a template puts
// it (text, attributes, URLs): letters, digits and "-_.:@/" only. Such a
// string is masked with the page, so it is not masked twice.
func verbatim(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:@/", c) >= 0) {
			return false
		}
	}
	return true
}
