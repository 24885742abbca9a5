package jsonwords_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/jsonwords"
)

func TestMismatchSpeaksJSON(t *testing.T) {
	type inner struct {
		Flag bool `json:"flag"`
	}
	var v struct {
		Count int            `json:"count"`
		Ratio float64        `json:"ratio"`
		Name  string         `json:"name"`
		Tags  []string       `json:"tags"`
		Raw   []byte         `json:"raw"`
		At    time.Time      `json:"at"`
		Inner inner          `json:"inner"`
		Ptr   *int           `json:"ptr"`
		Map   map[string]int `json:"map"`
		Small uint8          `json:"small"`
	}
	for body, want := range map[string]string{
		`{"count":"two"}`:        "want an integer, got a string",
		`{"count":1.5}`:          "want an integer, got the number 1.5",
		`{"small":300}`:          "want an integer, got the number 300",
		`{"ratio":true}`:         "want a number, got true or false",
		`{"name":["a"]}`:         "want a string, got a list",
		`{"tags":"a"}`:           "want a list, got a string",
		`{"raw":5}`:              "want a base64 string, got a number",
		`{"inner":{"flag":"y"}}`: "want true or false, got a string",
		`{"inner":[]}`:           "want an object, got a list",
		`{"ptr":{}}`:             "want an integer, got an object",
		`{"map":{"a":"b"}}`:      "want an integer, got a string",
		`[1]`:                    "want an object, got a list",
		`{"count":{"nested":1}}`: "want an integer, got an object",
	} {
		err := json.Unmarshal([]byte(body), &v)
		var typ *json.UnmarshalTypeError
		require.True(t, errors.As(err, &typ), "%s: %v", body, err)
		require.Equal(t, want, jsonwords.Mismatch(typ), body)
	}
	require.Equal(t, "a time such as 2026-01-02T15:04:05Z", jsonwords.Want(reflect.TypeFor[*time.Time]()))
	require.Equal(t, "another value", jsonwords.Got("something new"))
}
