package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
)

// A Subscriber is a part of the daemon that depends on the config in
// effect: the router, the agent runtime, the schedules, the sources' allow
// lists.
type Subscriber interface {
	// Prepare readies the part to work with next without changing what it
	// does now, and returns the commit that makes it use next. A commit
	// cannot fail. An error refuses the reload: then no part commits, and
	// prev stays in effect everywhere.
	Prepare(ctx context.Context, prev, next *Setup) (commit func(), err error)
}

// SubscriberFunc is a Subscriber written as a function.
type SubscriberFunc func(ctx context.Context, prev, next *Setup) (commit func(), err error)

// Prepare implements Subscriber.
func (f SubscriberFunc) Prepare(ctx context.Context, prev, next *Setup) (func(), error) {
	return f(ctx, prev, next)
}

// Coordinator owns the config in effect. A reload loads the configuration
// again (Load: the same checks as at start), asks every subscriber to
// prepare for it, and only when all of them could, commits them all, one
// after the other under one lock, then makes it the config in effect. A
// run already under way keeps what it started with; the next decision uses
// the new config. Settings that only a restart can change keep their value
// in effect and are reported.
type Coordinator struct {
	load func(context.Context) (*Setup, error)
	log  *slog.Logger
	now  func() time.Time
	// rebuild makes the configuration in effect again from its config
	// (Refresh); nil until the daemon sets it.
	rebuild func(context.Context, *Setup) (*Setup, error)

	mu   sync.Mutex // one reload at a time; guards subs
	subs []Subscriber
	cur  atomic.Pointer[Setup]
	// refresh is set by a Refresh that found the coordinator busy: whoever
	// holds mu refreshes before letting go of it.
	refresh atomic.Bool

	successful  prometheus.Gauge
	success     prometheus.Gauge
	successTime prometheus.Gauge
}

// NewCoordinator returns the owner of initial, which is in effect already,
// reloading with load. The reload metrics are registered with reg (nil: not
// exported): switchyard_config_last_reload_successful (1 or 0, as
// Alertmanager names it), the same under the name
// switchyard_config_last_reload_success, and
// switchyard_config_last_reload_success_timestamp_seconds. The start counts
// as a successful load.
func NewCoordinator(initial *Setup, load func(context.Context) (*Setup, error), reg prometheus.Registerer, log *slog.Logger) *Coordinator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Coordinator{
		load: load, log: log, now: time.Now,
		successful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_config_last_reload_successful",
			Help: "Whether the last config reload succeeded (1) or was refused, leaving the config before it in effect (0).",
		}),
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_config_last_reload_success",
			Help: "The same as switchyard_config_last_reload_successful.",
		}),
		successTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_config_last_reload_success_timestamp_seconds",
			Help: "When the config in effect was loaded: at start or by the last successful reload, in Unix seconds.",
		}),
	}
	if reg != nil {
		reg.MustRegister(c.successful, c.success, c.successTime)
	}
	c.cur.Store(initial)
	c.succeeded()
	return c
}

// Subscribe adds parts that follow the config; they are prepared and
// committed in the order they were added.
func (c *Coordinator) Subscribe(subs ...Subscriber) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs = append(c.subs, subs...)
}

// Current is the config in effect.
func (c *Coordinator) Current() *Setup { return c.cur.Load() }

// ReloadResult is what a successful reload changed.
type ReloadResult struct {
	// Config is the file reloaded, or "<defaults>".
	Config string `json:"config"`
	// Changed are the settings whose new values are in effect now, as
	// config paths ("routing.rules", "schedules"), and "agents" when an
	// agent definition changed.
	Changed []string `json:"changed"`
	// RestartRequired are settings the file changes that only a restart
	// puts in effect ("server.listen"); until then the old values stay.
	RestartRequired []string `json:"restart_required"`
}

// ReloadError is a reload that was refused: the config in effect is
// unchanged. Its problems are config errors, each "file:line: path: why",
// when the new configuration is wrong.
type ReloadError struct {
	Config string
	Err    error
}

func (e *ReloadError) Error() string {
	return fmt.Sprintf("config reload refused, %s stays in effect:\n%v", e.Config, e.Err)
}

func (e *ReloadError) Unwrap() error { return e.Err }

// As lets the edges see a refused reload as bad input (HTTP 400, exit
// status 2) with every problem in its message.
func (e *ReloadError) As(target any) bool {
	if t, ok := target.(**bot.Error); ok {
		*t = &bot.Error{Code: bot.EINVALID, Message: e.Error()}
		return true
	}
	return false
}

// Reload loads the configuration again and swaps every subscriber to it at
// once, or, if the configuration is wrong or a part cannot take it,
// changes nothing and returns a *ReloadError. Either way it logs the
// outcome: problems at ERROR, one line each.
func (c *Coordinator) Reload(ctx context.Context) (ReloadResult, error) {
	c.mu.Lock()
	defer c.unlock(ctx)
	prev := c.cur.Load()
	next, err := c.load(ctx)
	if err == nil {
		var res ReloadResult
		res, err = c.swap(ctx, prev, next)
		if err == nil {
			c.succeeded()
			c.log.LogAttrs(ctx, slog.LevelInfo, "config reloaded", slog.String("config", res.Config),
				slog.String("changed", listOr(res.Changed, "nothing")))
			if len(res.RestartRequired) > 0 {
				c.log.LogAttrs(ctx, slog.LevelWarn, "config changes that take effect at the next start: "+
					strings.Join(res.RestartRequired, ", ")+"; until then their old values stay in effect")
			}
			return res, nil
		}
	}
	c.successful.Set(0)
	c.success.Set(0)
	rerr := &ReloadError{Config: prev.Config.Source, Err: err}
	c.log.LogAttrs(ctx, slog.LevelError, "config reload refused; the config in effect is unchanged", slog.String("config", prev.Config.Source))
	for _, e := range flatten(err) {
		for line := range strings.Lines(e.Error()) {
			c.log.LogAttrs(ctx, slog.LevelError, "config problem: "+strings.TrimRight(line, "\n"))
		}
	}
	return ReloadResult{}, rerr
}

// Refresh makes the configuration in effect again from the config in
// effect, without reading the config file: what the daemon builds from
// outside the config (installed packages: their agents, entry points and
// command tools; the stored routing rules) changed. Every subscriber is prepared and committed as
// for a reload, or none. A Refresh asked while a reload or another refresh
// is under way (a reload that puts the config's package settings in
// effect) runs right after it, by whoever holds the coordinator, and
// returns at once.
func (c *Coordinator) Refresh(ctx context.Context) error {
	c.refresh.Store(true)
	if !c.mu.TryLock() {
		return nil
	}
	defer c.unlock(ctx)
	return c.refreshLocked(ctx)
}

// unlock lets go of the coordinator, refreshing first while a Refresh
// waits for it.
func (c *Coordinator) unlock(ctx context.Context) {
	for {
		// Putting packages in effect must not change them again (a
		// subscriber that sets what is set already); a few rounds end it.
		for round := 0; c.refresh.Load(); round++ {
			if round == maxRefreshRounds {
				c.refresh.Store(false)
				c.log.LogAttrs(ctx, slog.LevelError, "the packages changed again each time they were put in effect; stopped after a few rounds")
				break
			}
			_ = c.refreshLocked(ctx)
		}
		c.mu.Unlock()
		// A Refresh that came between the check and the unlock found the
		// coordinator busy and left it to us.
		if !c.refresh.Load() || !c.mu.TryLock() {
			return
		}
	}
}

// maxRefreshRounds bounds the refreshes one holder of the coordinator makes
// in a row.
const maxRefreshRounds = 8

// refreshLocked rebuilds the setup in effect and swaps to it; mu is held.
func (c *Coordinator) refreshLocked(ctx context.Context) error {
	c.refresh.Store(false)
	if c.rebuild == nil {
		return nil
	}
	prev := c.cur.Load()
	next, err := c.rebuild(ctx, prev)
	if err == nil {
		var res ReloadResult
		if res, err = c.swap(ctx, prev, next); err == nil {
			c.log.LogAttrs(ctx, slog.LevelInfo, "packages or stored rules changed; in effect", slog.String("changed", listOr(res.Changed, "nothing")))
			return nil
		}
	}
	c.log.LogAttrs(ctx, slog.LevelError, "packages or stored rules changed, but they could not be put in effect; the agents, routes and tools in effect stay",
		slog.String("error", err.Error()))
	return err
}

// swap prepares every subscriber for next and commits them all, or none.
func (c *Coordinator) swap(ctx context.Context, prev, next *Setup) (ReloadResult, error) {
	res := ReloadResult{Config: next.Config.Source}
	// A refresh keeps the config in effect, the same value, which others
	// read meanwhile: nothing in it changed, and it must not be written.
	if next.Config != prev.Config {
		res.RestartRequired = keepRestartOnly(prev.Config, next.Config)
		res.Changed = changedKeys("", reflect.ValueOf(prev.Config).Elem(), reflect.ValueOf(next.Config).Elem())
	}
	if !reflect.DeepEqual(prev.Agents.List(), next.Agents.List()) {
		res.Changed = append(res.Changed, "agents")
	}
	if !reflect.DeepEqual(prev.Router.Entrypoints(), next.Router.Entrypoints()) {
		res.Changed = append(res.Changed, "entry points")
	}
	if !reflect.DeepEqual(storedRules(prev.Router), storedRules(next.Router)) {
		res.Changed = append(res.Changed, "stored rules")
	}
	if next.ModelNote != prev.ModelNote {
		res.Changed = append(res.Changed, "models")
	}
	slices.Sort(res.Changed)
	res.Changed = slices.Compact(res.Changed)
	if res.Changed == nil {
		res.Changed = []string{}
	}
	if res.RestartRequired == nil {
		res.RestartRequired = []string{}
	}
	commits := make([]func(), 0, len(c.subs))
	for _, s := range c.subs {
		commit, err := s.Prepare(ctx, prev, next)
		if err != nil {
			return ReloadResult{}, err
		}
		commits = append(commits, commit)
	}
	for _, commit := range commits {
		commit()
	}
	c.cur.Store(next)
	// Said after the commits: the redactor knows a detected key by then.
	if next.ModelNote != prev.ModelNote && next.ModelNote != "" {
		level := slog.LevelInfo
		if !next.ModelFound {
			level = slog.LevelWarn
		}
		c.log.LogAttrs(ctx, level, next.ModelNote)
	}
	return res, nil
}

func (c *Coordinator) succeeded() {
	c.successful.Set(1)
	c.success.Set(1)
	c.successTime.Set(float64(c.now().UnixNano()) / 1e9)
}

// keepRestartOnly gives next the values in effect of the settings only a
// restart can change (the listener and the administrator's token, the data
// directory and storage, the workers and the queue, the GitHub and Slack
// credentials, endpoints and Slack's mode, adding or removing either
// section), and returns those next had changed, as config paths.
func keepRestartOnly(prev, next *config.Config) []string {
	var keys []string
	keep := func(path string, p, n any) {
		pv, nv := reflect.ValueOf(p).Elem(), reflect.ValueOf(n).Elem()
		keys = append(keys, changedKeys(path, pv, nv)...)
		nv.Set(pv)
	}
	// The API's named tokens follow the config: one withdrawn must stop
	// authenticating at once.
	apiTokens := next.Server.APITokens
	keep("server", &prev.Server, &next.Server)
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "server.api_tokens" })
	next.Server.APITokens = apiTokens
	keep("data_dir", &prev.DataDir, &next.DataDir)
	keep("workers", &prev.Workers, &next.Workers)
	keep("dispatch", &prev.Dispatch, &next.Dispatch)
	switch {
	case (prev.GitHub == nil) != (next.GitHub == nil):
		keys = append(keys, "github")
		next.GitHub = prev.GitHub
	case next.GitHub != nil:
		g := *next.GitHub // next's own copy: prev may share nothing with it
		next.GitHub = &g
		keep("github.app_id", &prev.GitHub.AppID, &g.AppID)
		keep("github.private_key", &prev.GitHub.PrivateKey, &g.PrivateKey)
		keep("github.private_key_file", &prev.GitHub.PrivateKeyFile, &g.PrivateKeyFile)
		keep("github.webhook_secret", &prev.GitHub.WebhookSecret, &g.WebhookSecret)
		keep("github.api_url", &prev.GitHub.APIURL, &g.APIURL)
	}
	switch {
	case (prev.Slack == nil) != (next.Slack == nil):
		keys = append(keys, "slack")
		next.Slack = prev.Slack
	case next.Slack != nil:
		s := *next.Slack
		next.Slack = &s
		keep("slack.mode", &prev.Slack.Mode, &s.Mode)
		keep("slack.app_token", &prev.Slack.AppToken, &s.AppToken)
		keep("slack.bot_token", &prev.Slack.BotToken, &s.BotToken)
		keep("slack.signing_secret", &prev.Slack.SigningSecret, &s.SigningSecret)
		keep("slack.api_url", &prev.Slack.APIURL, &s.APIURL)
	}
	return keys
}

// changedKeys lists where a and b, values of one config type, differ, as
// config paths under path: the fields of structs are compared one by one
// by their YAML names, anything else whole. Values are never part of the
// answer, so secrets cannot be.
func changedKeys(path string, a, b reflect.Value) []string {
	if a.Kind() == reflect.Pointer {
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{path}
			}
			return nil
		}
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{path}
	}
	var out []string
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		out = append(out, changedKeys(p, a.Field(i), b.Field(i))...)
	}
	return out
}

// storedRules are the stored rules r routes by, as listed.
func storedRules(r *bot.Router) []bot.RuleInfo {
	return slices.DeleteFunc(r.Rules(), func(ri bot.RuleInfo) bool { return ri.ID == "" })
}

func listOr(list []string, none string) string {
	if len(list) == 0 {
		return none
	}
	return strings.Join(list, ", ")
}

// errNoReload is the answer to a reload of a daemon built without a way to
// load its configuration again.
var errNoReload = errors.New("this daemon was started without a config to reload")
