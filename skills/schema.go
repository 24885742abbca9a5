package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Settings schemas, tools' input schemas and output contracts are JSON
// schemas, compiled by santhosh-tekuri/jsonschema. A package's schema must
// be self-contained: a $ref to any other document is refused rather than
// fetched, so installing a package never reads a file or the network.

// schemaBase is where compiled schemas are said to live; nothing is ever
// fetched from it.
const schemaBase = "https://schemas.switchyard.invalid/"

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: a schema must be self-contained; references to other documents are not followed", url)
}

// compileSchema compiles a JSON schema.
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	url := schemaBase + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, errors.New(schemaMessage(err))
	}
	return sch, nil
}

var printer = message.NewPrinter(language.English)

// schemaMessage says what is wrong in words a person reads: each problem
// at the place of the document it is ("at /changelog: want string, got
// number"), without the schema's made-up URL.
func schemaMessage(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		err = sve.Err // the schema measured against the metaschema
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		msg := strings.ReplaceAll(err.Error(), schemaBase, "")
		return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n- ", "; ")), " ")
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := "/" + strings.Join(e.InstanceLocation, "/")
			msg := strings.Join(strings.Fields(e.ErrorKind.LocalizedString(printer)), " ")
			parts = append(parts, "at "+at+": "+msg)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

// checkSettings validates settings against a compiled schema.
func checkSettings(sch *jsonschema.Schema, settings map[string]any) error {
	if sch == nil {
		if len(settings) > 0 {
			return errors.New("the package declares no settings (no config schema)")
		}
		return nil
	}
	var v any = map[string]any{}
	if settings != nil {
		v = settings
	}
	if err := sch.Validate(v); err != nil {
		return errors.New(schemaMessage(err))
	}
	return nil
}

// Schema is a compiled JSON schema: a command tool's input schema, checked
// on every call.
type Schema struct{ s *jsonschema.Schema }

// CompileSchema compiles raw, a self-contained JSON schema; name names it
// in errors.
func CompileSchema(name string, raw json.RawMessage) (*Schema, error) {
	s, err := compileSchema(name, raw)
	if err != nil {
		return nil, err
	}
	return &Schema{s: s}, nil
}

// CheckJSON reports whether doc, a JSON document, is valid against s, each
// problem at the place of the document it is ("at /count: got string, want
// integer").
func (s *Schema) CheckJSON(doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.s.Validate(v); err != nil {
		return errors.New(schemaMessage(err))
	}
	return nil
}
