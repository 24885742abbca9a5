// Package jsonwords says in JSON's words what a value of the wrong shape
// was and what belonged there, for the errors people read: "want an
// integer, got a string" rather than encoding/json's "cannot unmarshal
// string into Go struct field .count of type int64".
package jsonwords

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// Want says what a value of Go type t is written as in JSON.
func Want(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "a time such as 2026-01-02T15:04:05Z"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a list"
	case reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another value"
}

// Got names the JSON value the decoder found, from its description of it
// (json.UnmarshalTypeError.Value: "string", "number 1.5", "array", ...).
func Got(value string) string {
	kind, rest, _ := strings.Cut(value, " ")
	switch kind {
	case "string":
		return "a string"
	case "number":
		if rest != "" {
			return "the number " + rest
		}
		return "a number"
	case "bool":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "null":
		return "null"
	}
	return "another value"
}

// Mismatch is "want …, got …" for err.
func Mismatch(err *json.UnmarshalTypeError) string {
	return "want " + Want(err.Type) + ", got " + Got(err.Value)
}
