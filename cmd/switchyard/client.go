package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/internal/jsonwords"
)

// clientFlags reach the running daemon.
type clientFlags struct {
	server string
	config string // the daemon's config file, for its data directory
}

// client talks to the daemon's API with its bearer token.
type client struct {
	base  string
	token string
	// tokenErr says why no token was found, for a 401.
	tokenErr error
	// baseErr says what is wrong with the daemon's address, which is then
	// not asked anything.
	baseErr error
	http    *http.Client
}

func (f *clientFlags) client() *client {
	c := &client{base: strings.TrimRight(f.server, "/"), http: &http.Client{Timeout: 30 * time.Second}}
	if u, err := url.Parse(f.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		c.baseErr = fmt.Errorf("--server (or $SWITCHYARD_SERVER) %q: want the daemon's http or https URL, such as http://127.0.0.1:8080", f.server)
		return c
	}
	c.token, c.tokenErr = f.apiToken()
	return c
}

// apiToken finds the token the daemon expects, as the daemon does:
// $SWITCHYARD_API_TOKEN, else server.api_token of the config file (--config,
// else ./config.yaml when present), else the token file the daemon made in
// its data directory (data_dir, default ./data).
func (f *clientFlags) apiToken() (string, error) {
	if tok := os.Getenv("SWITCHYARD_API_TOKEN"); tok != "" {
		return tok, nil
	}
	// Only the token and the data directory are read: a config with
	// problems elsewhere is one the daemon may be asked to reload.
	acc, err := config.LoadAccess(configPath(f.config))
	if err != nil {
		if config.IsInvalid(err) {
			return "", withCode(exitUsage, fmt.Errorf("the API token is looked for in a config with problems:\n%w", err))
		}
		return "", err
	}
	if acc.APIToken.IsSet() {
		return acc.APIToken.Reveal(), nil
	}
	tok, err := daemon.ReadAPIToken(acc.DataDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no API token: the daemon makes %s at its first start; run this where `switchyard serve` keeps its data "+
				"(or pass its --config), or set $SWITCHYARD_API_TOKEN", filepath.Join(acc.DataDir, daemon.APITokenFile))
		}
		return "", err
	}
	return tok.Reveal(), nil
}

// apiError is an error answer of the daemon.
type apiError struct {
	Status  int
	Message string
	Code    string
	// Hint says what the CLI can tell about the failure, such as where it
	// looked for a token.
	Hint string
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// do sends a request and decodes a JSON answer into out (when not nil).
// An answer that is not JSON, not of out's shape, or without a value for
// each key named in required (an object's top-level keys) is an error
// saying so: a command never prints a success made of nothing.
func (c *client) do(ctx context.Context, method, path string, body, out any, required ...string) error {
	if c.baseErr != nil {
		return withCode(exitUsage, c.baseErr)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			// The command stopped waiting (its own timeout, Ctrl-C),
			// not the daemon.
			why := "interrupted"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "the command's time ran out"
			}
			return &stopped{msg: fmt.Sprintf("%s %s: %s", method, strings.TrimSuffix(path, "?"), why), err: ctx.Err()}
		}
		return fmt.Errorf("cannot reach the daemon at %s: %s (is `switchyard serve` running?)", c.base, httpapi.Unreachable(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			e.Error = excerpt(data, resp.Status)
		}
		ae := &apiError{Status: resp.StatusCode, Message: e.Error, Code: e.Code}
		if resp.StatusCode == http.StatusUnauthorized && c.tokenErr != nil {
			ae.Hint = c.tokenErr.Error()
			// No token for a config with problems: the config is at
			// fault, as when it is checked.
			var ee *exitError
			if errors.As(c.tokenErr, &ee) {
				return withCode(ee.code, ae)
			}
		}
		// What the daemon refuses as invalid (a status no list has, a
		// forged cursor, a setting a package does not take) is bad input,
		// as it is when the command itself finds it.
		if ae.Code == bot.EINVALID {
			return withCode(exitUsage, ae)
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := readAnswer(data, out, required...); err != nil {
		why := err.Error()
		if errors.Is(err, errNotJSON) {
			why += " (" + cmp.Or(resp.Header.Get("Content-Type"), "no Content-Type") + ")"
		}
		return fmt.Errorf("the answer of %s to %s %s is not one Switchyard gives: %s; is it a Switchyard daemon of this version?",
			c.base, method, strings.TrimSuffix(path, "?"), why)
	}
	return nil
}

var errNotJSON = errors.New("it is not JSON")

// stopped is a request the command gave up on, said in words; it wraps
// its context's error.
type stopped struct {
	msg string
	err error
}

func (e *stopped) Error() string { return e.msg }
func (e *stopped) Unwrap() error { return e.err }

// excerpt is what an error answer that is not the daemon's JSON says, for
// a person: its first line, cut at 200 characters (a proxy's page of HTML
// is not printed whole), or the status when the body is empty.
func excerpt(body []byte, status string) string {
	const most = 200
	text := strings.TrimSpace(string(body))
	line, rest, _ := strings.Cut(text, "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return status
	}
	cut := rest != ""
	if n := 0; utf8.RuneCountInString(line) > most {
		for i := range line {
			if n == most {
				line, cut = line[:i], true
				break
			}
			n++
		}
	}
	if cut {
		line += " …"
	}
	return line
}

// readAnswer decodes an answer of the daemon into out and checks that each
// key in required has a value. What does not fit is said in words, never
// with Go's types.
func readAnswer(data []byte, out any, required ...string) error {
	if !json.Valid(data) {
		return errNotJSON
	}
	if err := json.Unmarshal(data, out); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return errors.New("it does not fit what was asked")
		}
		where := "it"
		if te.Field != "" {
			where = te.Field
		}
		return fmt.Errorf("%s is %s where %s belongs", where, jsonwords.Got(te.Value), jsonwords.Want(te.Type))
	}
	if len(required) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil || fields == nil {
		return errors.New("it is not an object")
	}
	for _, k := range required {
		switch v := string(bytes.TrimSpace(fields[k])); v {
		case "", "null", `""`:
			return fmt.Errorf("it has no %s", k)
		}
	}
	return nil
}

// threadPath returns the URL path segment of a thread: a session key,
// escaped, or a bare local name.
func threadPath(thread string) string { return url.PathEscape(thread) }

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
