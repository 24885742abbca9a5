package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/internal/jsonwords"
)

// MaxBody is the largest request body the API accepts.
const MaxBody = 1 << 20

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Status maps a domain error code to an HTTP status.
func Status(code string) int {
	switch code {
	case bot.EINVALID:
		return http.StatusBadRequest
	case bot.ENOTFOUND:
		return http.StatusNotFound
	case bot.ECONFLICT:
		return http.StatusConflict
	case bot.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case bot.EFORBIDDEN:
		return http.StatusForbidden
	case bot.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case bot.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// CodeMethodNotAllowed is the code of a 405 answer.
const CodeMethodNotAllowed = "method_not_allowed"

// Endpoints wraps mux so that a request none of its endpoints takes is
// answered in JSON like every other error of the API, rather than with the
// mux's line of text: 404 for a path no endpoint has, and 405, with the
// Allow header, for a method the path's endpoints do not take (OPTIONS
// included: the API answers no cross-site preflight). HEAD is taken where
// GET is.
func Endpoints(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own answer says which of the two it is and what the
		// path allows; its body is not sent.
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status != http.StatusMethodNotAllowed {
			Error(w, r, nil, bot.Errorf(bot.ENOTFOUND, "no endpoint %s in this API", r.URL.Path))
			return
		}
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		JSON(w, http.StatusMethodNotAllowed, ErrorBody{
			Error: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, allowed(allow), r.Method),
			Code:  CodeMethodNotAllowed,
		})
	})
}

// allowed says an Allow header's methods in words: "GET or HEAD".
func allowed(allow string) string {
	methods := strings.Split(allow, ", ")
	if len(methods) < 2 {
		return allow
	}
	return strings.Join(methods[:len(methods)-1], ", ") + " or " + methods[len(methods)-1]
}

// statusProbe is a ResponseWriter that keeps the status and headers
// written to it and drops the body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header { return p.header }

func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

func (p *statusProbe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

// Error writes err as a JSON error answer. Internal errors are logged with
// their detail and answered with a generic message.
func Error(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	code := bot.ErrorCode(err)
	if code == bot.EINTERNAL && logger != nil {
		logger.LogAttrs(r.Context(), slog.LevelError, "api error",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	}
	JSON(w, Status(code), ErrorBody{Error: bot.ErrorMessage(err), Code: code})
}

// JSON writes v with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to tell it
}

// Decode reads a JSON body of at most MaxBody bytes into v, refusing unknown
// fields, a field named twice in one object and trailing data. Its errors
// are *bot.Error naming the problem.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		return decodeError(err)
	}
	return DecodeBytes(body, v)
}

// DecodeBytes reads a JSON document into v as Decode reads a body: a
// document given another way (pasted into a form) is held to what the
// API takes, with its errors.
func DecodeBytes(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return bot.Errorf(bot.EINVALID, "malformed JSON: unexpected data after the object")
		}
		return decodeError(err)
	}
	return repeatedName(body)
}

// repeatedName refuses a JSON document (already decoded, so well formed)
// in which an object names a member twice, in any case: encoding/json
// matches names regardless of case and keeps the last, so {"by":"ana",
// "By":"admin"} would act on a value other than the one a reader of the
// body (a proxy, a log, a person) takes for it.
func repeatedName(doc []byte) error {
	type object struct {
		names   map[string]bool
		wantKey bool
	}
	var stack []*object // nil entries are arrays
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF: the end; anything else, Decode has said
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.wantKey {
			if name, ok := tok.(string); ok {
				folded := strings.ToLower(name)
				if top.names[folded] {
					return bot.Errorf(bot.EINVALID, "malformed JSON: field %q is given twice", name)
				}
				top.names[folded], top.wantKey = true, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{names: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: its object wants the next name.
		if len(stack) > 0 && stack[len(stack)-1] != nil {
			stack[len(stack)-1].wantKey = true
		}
	}
}

func decodeError(err error) error {
	var (
		tooBig *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return bot.Errorf(bot.ETOOLARGE, "request body over %d bytes", tooBig.Limit)
	case errors.As(err, &syntax):
		return bot.Errorf(bot.EINVALID, "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ) && typ.Field == "":
		return bot.Errorf(bot.EINVALID, "malformed JSON: %s", jsonwords.Mismatch(typ))
	case errors.As(err, &typ):
		return bot.Errorf(bot.EINVALID, "malformed JSON: field %q: %s", typ.Field, jsonwords.Mismatch(typ))
	case errors.Is(err, io.EOF):
		return bot.Errorf(bot.EINVALID, "malformed JSON: empty body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bot.Errorf(bot.EINVALID, "malformed JSON: body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return bot.Errorf(bot.EINVALID, "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	default:
		return bot.Errorf(bot.EINVALID, "malformed JSON: %v", err)
	}
}

// Redact wraps next so that no answer shows a secret: the body is masked
// by r before it is sent, and a JSON body stays JSON. Answers are buffered,
// which the API's bounded JSON answers allow.
func Redact(r *bot.Redactor, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		buf := &bufferedWriter{header: w.Header(), status: http.StatusOK}
		next.ServeHTTP(buf, req)
		body := buf.body.Bytes()
		if mt, _, _ := mime.ParseMediaType(w.Header().Get("Content-Type")); mt == "application/json" {
			body = r.RedactJSON(body)
		} else {
			body = []byte(r.Redact(string(body)))
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(buf.status)
		_, _ = w.Write(body) // the client went away; nothing to tell it
	})
}

// bufferedWriter keeps an answer until it can be masked.
type bufferedWriter struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }

func (b *bufferedWriter) WriteHeader(status int) {
	if !b.wrote {
		b.status, b.wrote = status, true
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}

// Limit parses a "limit" query parameter in [1, max]; 0 when absent.
func Limit(r *http.Request, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, nil
	}
	// strconv, not fmt.Sscan: Sscan stops at the first non-digit, so "10abc"
	// or "1e3" would be taken as 10 or 1 instead of refused.
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, bot.Errorf(bot.EINVALID, "limit %q: want a number from 1 to %d", s, max)
	}
	return n, nil
}
