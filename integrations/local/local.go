package local

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

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
	User   string `json:"user"` // default "local"
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
	var req MessageRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
	}
	ev, err := req.event()
	if err != nil {
		httpapi.Error(w, r, c.logger, err)
		return
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
		Source: bot.SourceLocal, Kind: bot.KindLocalMessage, DeliveryID: req.ID,
		Actor: user, Text: req.Text, Thread: th,
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

var _ bot.Sink = Sink{}

// Deliver implements bot.Sink.
func (Sink) Deliver(_ context.Context, msg bot.OutboxMessage) (string, error) {
	return msg.Key, nil
}
