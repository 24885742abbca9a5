package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/config"
)

// Slack's Socket Mode delivers each event to one of the app's connections,
// and the bot's replies would go out once per replica holding one: with a
// store shared by replicas, one replica at a time holds it, the one that
// holds this lease. HTTP mode runs on every replica.
const (
	slackLease    = "slack-socket-mode"
	slackLeaseTTL = 15 * time.Second
)

// slackLeader says whether this replica stands by for Slack's Socket Mode
// while another replica holds its connection.
type slackLeader struct {
	standby atomic.Bool
}

// shared reports whether other processes may share the daemon's store.
func (d *Daemon) shared() bool {
	_, single := d.store.(orphanReclaimer)
	return !single
}

// slackHealth is the Slack source's health: a replica standing by while
// another holds the Socket Mode connection is not down.
func (d *Daemon) slackHealth() (bool, string) {
	if d.leader.standby.Load() {
		return true, ""
	}
	return d.slack.Health()
}

// runSlack runs the Slack adapter until ctx ends: at once in HTTP mode or
// with a store only this process opens; in Socket Mode with a shared
// store, only while this replica holds the lease, renewed every third of
// its time. A replica that finds another holds it stops its connection at
// once; one whose renewal fails (the database does not answer for a
// moment, a connection cut) keeps it until a fifth of the lease before
// the lease it holds runs out, and stops it then unless a renewal got
// through. Another takes the lease over when it runs out.
func (d *Daemon) runSlack(ctx context.Context) {
	run := func(ctx context.Context) {
		if err := d.slack.Run(ctx); err != nil {
			d.log.Error("slack stopped", slog.String("error", err.Error()))
		}
	}
	if d.cfg.Slack.Mode != config.SlackSocket || !d.shared() {
		run(ctx)
		return
	}
	d.leader.standby.Store(true)
	var cur *connection
	end := func() {
		if cur != nil {
			cur.stop()
			<-cur.done
			cur = nil
			d.leader.standby.Store(true)
		}
	}
	defer func() {
		end()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := d.store.ReleaseLease(rctx, slackLease, d.replica); err != nil {
			d.log.Warn("give up the Socket Mode lease", slog.String("error", err.Error()))
		}
	}()
	tick := time.NewTicker(slackLeaseTTL / 3)
	defer tick.Stop()
	var keepUntil time.Time // when the lease last held runs out, less a fifth
	for {
		asked := time.Now()
		hctx, cancel := context.WithTimeout(ctx, slackLeaseTTL/3)
		held, err := d.store.HoldLease(hctx, slackLease, d.replica, d.clock.Now(), slackLeaseTTL)
		cancel()
		var expire <-chan time.Time // set while the connection is kept on a lease not renewed
		switch {
		case err == nil && held:
			keepUntil = asked.Add(slackLeaseTTL - slackLeaseTTL/5)
		case err != nil && ctx.Err() == nil:
			d.log.Warn("renew the Socket Mode lease", slog.String("error", err.Error()))
			held = cur != nil && time.Now().Before(keepUntil)
			if held {
				expire = time.After(time.Until(keepUntil))
			}
		}
		switch {
		case held && cur == nil:
			d.log.Info("this replica holds Slack's Socket Mode connection")
			d.leader.standby.Store(false)
			cur = startConnection(ctx, run)
		case !held && cur != nil:
			d.log.Warn("Socket Mode lease lost: Slack's connection is left to the replica that holds it")
			end()
		case !held && ctx.Err() == nil:
			d.log.Debug("another replica holds Slack's Socket Mode connection; standing by")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-expire:
			d.log.Warn("Socket Mode lease not renewed before it runs out: Slack's connection stops until this replica holds the lease again")
			end()
		}
	}
}

// connection is Slack's adapter running under the lease.
type connection struct {
	stop context.CancelFunc
	done chan struct{}
}

func startConnection(ctx context.Context, run func(context.Context)) *connection {
	ctx, stop := context.WithCancel(ctx)
	c := &connection{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		run(ctx)
	}()
	return c
}
