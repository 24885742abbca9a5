package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// Ingester persists events; *bot.Intake implements it.
type Ingester interface {
	Ingest(ctx context.Context, ev *bot.Event) (bot.IngestResult, error)
}

// OutboxReader reads what the bot wrote in a thread; bot.OutboxStore has it.
type OutboxReader interface {
	ListOutbox(ctx context.Context, thread string) ([]bot.OutboxMessage, error)
}

// Console serves the local console endpoints.
type Console struct {
	intake Ingester
	outbox OutboxReader
	logger *slog.Logger
}

// New returns a Console.
func New(intake Ingester, outbox OutboxReader, logger *slog.Logger) *Console {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Console{intake: intake, outbox: outbox, logger: logger}
}

// Mount registers the console's routes on mux.
func (c *Console) Mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/messages", c.postMessage)
	mux.HandleFunc("GET /api/v1/threads/{thread}/messages", c.threadMessages)
}

// MessageRequest is the body of POST /api/v1/messages.
type MessageRequest struct {
	Thread string `json:"thread"` // a local name or "local:<name>"; default "default"
	Text   string `json:"text"`
	User   string `json:"user"` // shown as the author; default "local"
	ID     string `json:"id"`   // optional client id: the same id twice makes one work item
}

// MessageResponse is the answer to POST /api/v1/messages.
type MessageResponse struct {
	WorkItemID string    `json:"work_item_id"`
	Thread     string    `json:"thread"`
	Duplicate  bool      `json:"duplicate"`
	Route      bot.Route `json:"route"`
}

// Limits on what a console message may carry.
const (
	maxTextBytes = 64 << 10
	maxIDBytes   = 200
)

func (c *Console) postMessage(w http.ResponseWriter, r *http.Request) {
	req, err := decodeMessage(w, r)
	if err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
	}
	ev, err := req.event()
	if err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
	}
	// The requester, whose access bounds what the agents may do, is who
	// authenticated: the name of the API token. The request's "user" is
	// what the thread shows, and anyone holding a token can write any name
	// there, so it never decides rights.
	if id, ok := httpapi.IdentityFrom(r.Context()); ok {
		ev.Requester.ID, ev.Requester.Name = id.Name, ev.Actor
	}
	res, err := c.intake.Ingest(r.Context(), ev)
	if err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
	}
	if res.WorkItem == nil {
		// Local messages always route (at worst to the default agent); an
		// ingress record here means the store answered for another source.
		httpapi.Error(w, r, c.logger, bot.Errorf(bot.ECONFLICT, "message id %q was used by an ignored event", req.ID))
		return
	}
	httpapi.JSON(w, http.StatusAccepted, MessageResponse{
		WorkItemID: res.WorkItem.ID, Thread: res.WorkItem.Thread.Key(),
		Duplicate: res.Duplicate, Route: res.WorkItem.Route,
	})
}

// decodeMessage reads the body of POST /api/v1/messages. Messages are on
// the intake's hot path, where encoding/json's scanner, which looks at every
// byte of the text twice through a state machine, cost more than anything
// else before the store. A body that is one flat object of the request's
// members, each a string without escapes, exactly as encoding/json would
// read it, is parsed here; anything else (escapes, other spellings of the
// names, null, repeated members, invalid UTF-8, errors of any kind) goes
// through httpapi.Decode, so it is accepted or refused exactly as before.
func decodeMessage(w http.ResponseWriter, r *http.Request) (MessageRequest, error) {
	body, complete := readBody(r)
	if complete {
		if req, ok := parseMessage(body); ok {
			return req, nil
		}
	}
	// Give httpapi.Decode the stream it would have read.
	r.Body = replayBody{Reader: io.MultiReader(bytes.NewReader(body), r.Body), Closer: r.Body}
	var req MessageRequest
	err := httpapi.Decode(w, r, &req)
	return req, err
}

// readBody reads the body and reports whether it read all of it: false when
// reading failed or the body is longer than httpapi.MaxBody.
func readBody(r *http.Request) ([]byte, bool) {
	size := int64(512)
	if r.ContentLength >= 0 {
		// One byte more than announced, to read the end without growing.
		size = min(r.ContentLength, httpapi.MaxBody) + 1
	}
	body := make([]byte, 0, size)
	in := io.LimitReader(r.Body, httpapi.MaxBody+1)
	for {
		if len(body) == cap(body) {
			body = append(body, 0)[:len(body)]
		}
		n, err := in.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, len(body) <= httpapi.MaxBody
		}
		if err != nil {
			return body, false
		}
	}
}

type replayBody struct {
	io.Reader
	io.Closer
}

// parseMessage parses body when it is a plain MessageRequest object and
// reports whether it was.
func parseMessage(body []byte) (MessageRequest, bool) {
	var req MessageRequest
	p := jsonBytes(body)
	if !p.skip('{') {
		return req, false
	}
	var seen [4]bool
	if !p.skip('}') {
		for {
			name, ok := p.str()
			if !ok || !p.skip(':') {
				return req, false
			}
			value, ok := p.str()
			if !ok {
				return req, false
			}
			var i int
			switch string(name) {
			case "thread":
				i, req.Thread = 0, string(value)
			case "text":
				i, req.Text = 1, string(value)
			case "user":
				i, req.User = 2, string(value)
			case "id":
				i, req.ID = 3, string(value)
			default:
				return req, false
			}
			if seen[i] {
				return req, false
			}
			seen[i] = true
			if p.skip('}') {
				break
			}
			if !p.skip(',') {
				return req, false
			}
		}
	}
	p.space()
	return req, len(p) == 0
}

// jsonBytes is what is left of a JSON text to parse.
type jsonBytes []byte

// space skips JSON white space.
func (p *jsonBytes) space() {
	s := *p
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r') {
		s = s[1:]
	}
	*p = s
}

// skip skips white space and then c, and reports whether c was there.
func (p *jsonBytes) skip(c byte) bool {
	p.space()
	if len(*p) == 0 || (*p)[0] != c {
		return false
	}
	*p = (*p)[1:]
	return true
}

// str reads a string that needs no unescaping: valid UTF-8 without a
// backslash or a control character, which encoding/json reads as it is.
func (p *jsonBytes) str() ([]byte, bool) {
	if !p.skip('"') {
		return nil, false
	}
	s := *p
	ascii := true
	for i, c := range s {
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(s[:i]) {
				return nil, false
			}
			*p = s[i+1:]
			return s[:i], true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (req MessageRequest) event() (*bot.Event, error) {
	name := req.Thread
	if name == "" {
		name = "default"
	}
	th, err := bot.ParseThread(name)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "thread: %v", bot.ErrorMessage(err))
	}
	if th.Source != bot.SourceLocal {
		return nil, bot.Errorf(bot.EINVALID, "thread %q: the local console writes to local threads only", req.Thread)
	}
	// The session key keeps line breaks out of a thread's name; the
	// console keeps out every control character, as it says, so a name
	// cannot carry an escape sequence to wherever it is shown. Threads
	// stored before still read back.
	if strings.ContainsFunc(name, unicode.IsControl) {
		return nil, bot.Errorf(bot.EINVALID, "thread: local thread name %q: want 1-200 characters, no control characters", strings.TrimPrefix(name, bot.SourceLocal+":"))
	}
	if strings.TrimSpace(req.Text) == "" {
		return nil, bot.Errorf(bot.EINVALID, "text: required")
	}
	if len(req.Text) > maxTextBytes {
		return nil, bot.Errorf(bot.ETOOLARGE, "text: over %d bytes", maxTextBytes)
	}
	if len(req.ID) > maxIDBytes {
		return nil, bot.Errorf(bot.EINVALID, "id: over %d bytes", maxIDBytes)
	}
	user := req.User
	if user == "" {
		user = "local"
	}
	return &bot.Event{
		Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: req.ID, Addressed: true,
		Actor: user, Text: req.Text, Thread: th,
		Requester: bot.Requester{Source: bot.SourceLocal, ID: user},
	}, nil
}

// ThreadMessage is one message the bot wrote in a thread.
type ThreadMessage struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"` // status or reply
	Text      string    `json:"text"`
	Edits     int       `json:"edits"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (c *Console) threadMessages(w http.ResponseWriter, r *http.Request) {
	th, err := bot.ParseThread(r.PathValue("thread"))
	if err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
	}
	msgs, err := c.outbox.ListOutbox(r.Context(), th.Key())
	if err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
	}
	httpapi.JSON(w, http.StatusOK, Visible(msgs))
}

// Visible returns the status and reply messages a thread shows: those
// delivered at least once, with their latest text.
func Visible(msgs []bot.OutboxMessage) []ThreadMessage {
	out := []ThreadMessage{}
	for _, m := range msgs {
		if m.Kind == bot.OutboxReaction || m.DeliveredVersion == 0 {
			continue
		}
		updated := m.UpdatedAt
		if m.DeliveredAt != nil {
			updated = *m.DeliveredAt
		}
		out = append(out, ThreadMessage{
			ID: m.Key, Kind: string(m.Kind), Text: m.Text, Edits: m.Edits,
			CreatedAt: m.CreatedAt, UpdatedAt: updated,
		})
	}
	return out
}

// Sink delivers to local threads. The console has no remote platform: a
// message is shown once the outbox records it delivered, so delivery only
// assigns the message its id (its stable key), which also makes it
// idempotent.
type Sink struct{}

var (
	_ bot.Sink   = Sink{}
	_ bot.Finder = Sink{}
)

// Deliver implements bot.Sink.
func (Sink) Deliver(_ context.Context, msg bot.OutboxMessage) (string, error) {
	return msg.Key, nil
}

// Find implements bot.Finder. Nothing can exist beside the outbox record,
// so an interrupted attempt's message is the record itself, known by its
// key.
func (Sink) Find(_ context.Context, msg bot.OutboxMessage) (string, bool, error) {
	return msg.Key, true, nil
}
