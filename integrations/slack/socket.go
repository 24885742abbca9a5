package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// maxInFlight bounds the Socket Mode envelopes handled at once.
const maxInFlight = 16

// runSocket holds the Socket Mode connection until ctx is cancelled. Events
// are handled in order, commands and interactions (which may call the Web
// API) on goroutines of their own; each envelope is acknowledged only after
// the intake returned, and one whose event could not be persisted is left
// unacknowledged, so Slack delivers it again.
func (a *Adapter) runSocket(ctx context.Context) error {
	opts := []socketmode.Option{socketmode.OptionLog(slog.NewLogLogger(a.opts.Logger.Handler(), slog.LevelDebug))}
	if a.opts.PingInterval > 0 {
		opts = append(opts, socketmode.OptionPingInterval(a.opts.PingInterval))
	}
	client := socketmode.New(a.api, opts...)

	errc := make(chan error, 1)
	go func() { errc <- client.RunContext(ctx) }()

	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxInFlight)
	for {
		select {
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case evt := <-client.Events:
			req, ok := a.socketRequest(evt)
			if !ok {
				continue
			}
			if req.Type == socketmode.RequestTypeEventsAPI {
				// In arrival order: two quick messages in one thread must
				// become work items in the order they were written. The
				// core makes no network calls for events, only store ones.
				a.handleEnvelope(ctx, client, req)
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				a.handleEnvelope(ctx, client, req)
			})
		}
	}
}

// socketRequest picks the envelopes that carry work out of the client's
// event stream and logs the connection's life.
func (a *Adapter) socketRequest(evt socketmode.Event) (*socketmode.Request, bool) {
	log := a.opts.Logger
	switch evt.Type {
	case socketmode.EventTypeEventsAPI, socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
		return evt.Request, evt.Request != nil
	case socketmode.EventTypeErrorBadMessage:
		// slack-go could not parse it, typically an event type it has no
		// struct for; the core reads the raw envelope itself.
		bad, ok := evt.Data.(*socketmode.ErrorBadMessage)
		if !ok {
			return nil, false
		}
		var req socketmode.Request
		if err := json.Unmarshal(bad.Message, &req); err != nil || req.EnvelopeID == "" {
			log.Warn("slack socket mode: unreadable message", slog.Any("err", bad.Cause))
			return nil, false
		}
		return &req, true
	case socketmode.EventTypeConnecting:
		log.Debug("slack socket mode connecting")
	case socketmode.EventTypeConnected:
		log.Info("slack socket mode connected")
	case socketmode.EventTypeHello:
		log.Debug("slack socket mode hello")
	case socketmode.EventTypeConnectionError:
		log.Warn("slack socket mode connection failed; retrying", slog.Any("err", evt.Data))
	case socketmode.EventTypeInvalidAuth:
		log.Error("slack socket mode: the app token was refused")
	case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorWriteFailed:
		log.Warn("slack socket mode error", slog.String("type", string(evt.Type)), slog.Any("err", evt.Data))
	}
	return nil, false
}

// handleEnvelope runs one envelope through the core and acknowledges it.
func (a *Adapter) handleEnvelope(ctx context.Context, client *socketmode.Client, req *socketmode.Request) {
	var (
		payload any
		err     error
	)
	switch req.Type {
	case socketmode.RequestTypeEventsAPI:
		_, err = a.handleEventsPayload(ctx, req.Payload)
	case socketmode.RequestTypeSlashCommands:
		var cmd slack.SlashCommand
		if err = json.Unmarshal(req.Payload, &cmd); err != nil {
			err = fmt.Errorf("%w: %v", errBadPayload, err)
			break
		}
		var resp commandResponse
		resp, err = a.handleCommand(ctx, cmd, req.Payload)
		if err == nil {
			payload = resp
		}
	case socketmode.RequestTypeInteractive:
		err = a.handleInteraction(ctx, req.Payload)
	default:
		err = fmt.Errorf("%w: envelope type %q", errBadPayload, req.Type)
	}
	switch {
	case errors.Is(err, errBadPayload):
		// Redelivery cannot fix it; acknowledge so Slack stops trying.
		a.opts.Logger.Warn("slack envelope refused", slog.String("envelope", req.EnvelopeID), slog.Any("err", err))
	case err != nil:
		a.opts.Logger.Error("slack envelope not persisted; Slack will redeliver it",
			slog.String("envelope", req.EnvelopeID), slog.Any("err", err))
		return
	}
	if err := client.AckCtx(ctx, req.EnvelopeID, payload); err != nil {
		a.opts.Logger.Warn("slack envelope not acknowledged", slog.String("envelope", req.EnvelopeID), slog.Any("err", err))
	}
}
