package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// runSocket holds a Socket Mode connection until ctx is cancelled. Whatever
// ends a connection (apps.connections.open answering 404 or invalid_auth at
// start or on one of Slack's routine refreshes, the network, a dropped
// websocket), a new one is opened after a capped, jittered backoff; while
// there is none the adapter reports Slack down.
//
// Envelopes are handled one at a time, in arrival order, and each is
// acknowledged as soon as the intake has persisted what it carries. No
// handler calls the Web API (a command's thread is opened through the
// outbox), so a slow Slack never delays an acknowledgement. An envelope
// whose event could not be persisted is left unacknowledged, so Slack
// delivers it again.
func (a *Adapter) runSocket(ctx context.Context) error {
	b := newBackoff(a.opts.ReconnectDelay, a.opts.MaxReconnectDelay)
	for {
		err := a.socketOnce(ctx, b)
		if ctx.Err() != nil {
			return nil
		}
		a.health.setDown(connectionTrouble(err))
		t := time.NewTimer(b.next())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// connectionTrouble says in words why a Socket Mode connection ended.
func connectionTrouble(err error) string {
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	switch {
	case err == nil:
		return "socket mode connection closed"
	case errors.As(err, &sc):
		return fmt.Sprintf("apps.connections.open answered HTTP %d", sc.Code)
	case errors.As(err, &se), err.Error() == "invalid_auth":
		return "the app token was refused (" + err.Error() + ")"
	}
	return "socket mode: " + err.Error()
}

// socketOnce runs one socketmode client until it gives up or ctx ends.
func (a *Adapter) socketOnce(ctx context.Context, b *backoff) error {
	opts := []socketmode.Option{socketmode.OptionLog(slog.NewLogLogger(a.opts.Logger.Handler(), slog.LevelDebug))}
	if a.opts.PingInterval > 0 {
		opts = append(opts, socketmode.OptionPingInterval(a.opts.PingInterval))
	}
	client := socketmode.New(a.api, opts...)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- client.RunContext(runCtx) }()
	for {
		select {
		case err := <-errc:
			return err
		case evt := <-client.Events:
			if evt.Type == socketmode.EventTypeConnected {
				b.reset()
			}
			if req, ok := a.socketRequest(evt); ok {
				a.handleEnvelope(ctx, client, req)
			}
		}
	}
}

// socketRequest picks the envelopes that carry work out of the client's
// event stream and follows the connection's life.
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
	case socketmode.EventTypeConnected:
		a.health.setUp(slog.String("mode", ModeSocket))
	case socketmode.EventTypeConnectionError:
		reason := "socket mode connection failed"
		if ce, ok := evt.Data.(*slack.ConnectionErrorEvent); ok && ce.ErrorObj != nil {
			reason = connectionTrouble(ce.ErrorObj)
		}
		a.health.setDown(reason)
	case socketmode.EventTypeConnecting:
		// The client opens a new connection by itself after losing one
		// (Slack's refresh, a dropped websocket): no events flow until it
		// is open, however long apps.connections.open takes. A first
		// connection is already reported down ("connecting").
		if ce, ok := evt.Data.(*slack.ConnectingEvent); ok && ce.ConnectionCount > 0 {
			a.health.setReconnecting("socket mode connection lost; reconnecting")
		}
		log.Debug("slack socket mode", slog.String("event", string(evt.Type)))
	case socketmode.EventTypeHello, socketmode.EventTypeInvalidAuth:
		// A refused open ends the client's run, which says why.
		log.Debug("slack socket mode", slog.String("event", string(evt.Type)))
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
		_, err = a.handleEventsPayload(ctx, req.Payload, requestSig{})
	case socketmode.RequestTypeSlashCommands:
		var cmd slack.SlashCommand
		if cmd, err = parseCommand(req.Payload); err != nil {
			break
		}
		var resp commandResponse
		resp, err = a.handleCommand(ctx, cmd, req.Payload, requestSig{})
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
