package daemon

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/admin/ui"
	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/local"
	"github.com/switchyard/switchyard/integrations/slack"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// Options is everything the daemon is built from.
type Options struct {
	// Setup is the configuration the daemon starts with (see Load).
	// Required.
	Setup *Setup
	// Reload reads the configuration again for a reload (SIGHUP, `switchyard
	// config reload`, POST /api/v1/config/reload); nil refuses reloads.
	Reload func(context.Context) (*Setup, error)
	// APIToken is the administrator's bearer token (identity "admin");
	// unset, the config's server.api_token, else the token of
	// <data_dir>/api-token, which New makes when it does not exist.
	APIToken bot.Secret
	// NewRunner builds the runner of each configuration; nil builds the
	// agent runtime (NewAgentRuntime).
	NewRunner func(RunnerDeps) (bot.Runner, error)
	// Sandbox tunes where bash and command tools run (the bubblewrap
	// program, paths to hide); its mode is the config's sandbox.mode, and
	// the data directory, the config file, the GitHub App's key file and
	// the home directory are always hidden.
	Sandbox sandbox.Options
	// ShutdownGrace bounds how long running jobs may finish at shutdown;
	// default 30s.
	ShutdownGrace time.Duration
	// Clock is this host's clock; nil is time.Now. With a database that
	// replicas share, the daemon keeps the server's time instead (see
	// clock).
	Clock func() time.Time

	Logger  *slog.Logger
	Version string
}

// Daemon is a configured Switchyard. New opens the store; Serve runs until
// its context ends; the caller owns both.
type Daemon struct {
	opts     Options
	cfg      *config.Config // as it started: what only a restart changes
	config   *Coordinator
	log      *slog.Logger
	redactor *bot.Redactor
	outbox   bot.Outboxer // the store, masking what it is given
	// tokens are the API's bearer tokens in effect: the administrator's
	// and server.api_tokens, which follow reloads.
	tokens *httpapi.TokenSet
	// ui is the admin UI, whose sign-in credentials follow reloads.
	ui         *ui.UI
	site       atomic.Pointer[httpapi.Site]
	store      Store
	replica    string // this process's name among the replicas sharing the store
	clock      *clock
	gen        atomic.Pointer[generation]
	audit      *policy.Auditor
	approvals  *policy.Approvals
	subagents  *agents.Subagents
	budgets    *agents.Budgets
	background *tools.Background
	metrics    *bot.Metrics
	registry   *prometheus.Registry
	intake     *bot.Intake
	reporter   *bot.Reporter
	deliverer  *bot.Deliverer
	dispatcher *bot.Dispatcher
	scheduler  *bot.Scheduler
	ghClient   *github.Client
	ghGate     *github.Gate
	ghSlug     string // looked up at start when github.app_slug is empty
	requesters requesters
	details    map[string]bot.Detailer
	slack      *slack.Adapter
	leader     slackLeader // Socket Mode on one replica at a time
	sources    []source
	github     http.Handler
	handler    http.Handler
	skills     *skills.Registry
	installer  *install.Installer
}

// sharedTokenProblem is why the postgres driver needs a configured API
// token, said after "storage.driver".
const sharedTokenProblem = "is postgres: the replicas must share the API token, so set server.api_token " +
	"(for example to ${SWITCHYARD_API_TOKEN}) or $SWITCHYARD_API_TOKEN instead of relying on each replica's " + APITokenFile + " file"

// DataFile is the store's file name inside the data directory.
const DataFile = "switchyard.db"

// New builds the daemon and opens its store. Without a configured API token
// it reads the token file of the data directory, making it at first start.
func New(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	if opts.Setup == nil {
		return nil, errors.New("daemon: no setup")
	}
	cfg := opts.Setup.Config
	site, err := httpapi.NewSite(cfg.Server.Listen, cfg.Server.PublicURL)
	if err != nil {
		return nil, err
	}
	// A token the caller passed is $SWITCHYARD_API_TOKEN (serve's).
	fromEnv := opts.APIToken.IsSet()
	if !fromEnv {
		opts.APIToken = cfg.Server.APIToken
	}
	tokenFile := ""
	if !opts.APIToken.IsSet() && cfg.Storage.Driver == config.StoragePostgres {
		// A token file is one replica's own: behind a load balancer each
		// replica would accept a different token.
		return nil, bot.Errorf(bot.EINVALID, "storage.driver %s", sharedTokenProblem)
	}
	if !opts.APIToken.IsSet() {
		if opts.APIToken, err = LoadAPIToken(cfg.DataDir); err != nil {
			return nil, err
		}
		tokenFile = filepath.Join(cfg.DataDir, APITokenFile)
	}
	redactor := bot.NewRedactor(append(opts.Setup.Secrets(), opts.APIToken)...)
	opts.Logger = slog.New(redactor.Handler(opts.Logger.Handler()))
	short := cfg.Server.ShortAPITokens()
	if fromEnv && len(opts.APIToken.Reveal()) < config.MinAPIToken {
		short = append(short, "$SWITCHYARD_API_TOKEN")
	}
	warnShortTokens(opts.Logger, short)
	store, err := OpenStore(ctx, cfg, opts.Logger)
	if err != nil {
		return nil, err
	}
	// Jobs still running in a file only this process can open belong to a
	// process that died: hand them back now instead of after their lease.
	// Replicas sharing a database take each other's jobs over only when
	// their leases expire.
	clk := newClock(opts.Clock)
	if sc, ok := store.(serverClock); ok {
		if err := clk.measure(ctx, sc, opts.Logger); err != nil {
			store.Close()
			return nil, err
		}
	}
	if r, ok := store.(orphanReclaimer); ok {
		if n, err := r.ExpireOrphanedLeases(ctx, clk.Now()); err != nil {
			store.Close()
			return nil, err
		} else if n > 0 {
			opts.Logger.Warn("reclaiming jobs of a previous process that did not stop cleanly", slog.Int("jobs", n))
		}
	}
	d := &Daemon{
		opts: opts, cfg: cfg, log: opts.Logger, redactor: redactor, store: store, registry: prometheus.NewRegistry(),
		outbox: bot.RedactingOutbox(store, redactor), tokens: httpapi.NewTokenSet(apiTokens(opts.APIToken, cfg)), requesters: requesters{}, details: map[string]bot.Detailer{},
		replica: replicaName(), clock: clk,
	}
	d.site.Store(site)
	if tokenFile != "" {
		d.log.Info("API clients authenticate with the token in " + tokenFile)
	}
	if err := d.build(); err != nil {
		store.Close()
		return nil, err
	}
	if d.handler, err = d.routes(); err != nil {
		store.Close()
		return nil, err
	}
	return d, nil
}

// build assembles the pipeline over the open store, from the setup it
// starts with, and subscribes every part that follows the config to
// reloads.
func (d *Daemon) build() error {
	store, setup, cfg := d.store, d.opts.Setup, d.cfg
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.metrics = bot.NewMetrics(d.registry)
	d.registerGauges()
	reload := d.opts.Reload
	if reload == nil {
		reload = func(context.Context) (*Setup, error) { return nil, errNoReload }
	}
	// A reload reads the config again and completes it with what the
	// installed packages contribute.
	d.config = NewCoordinator(setup, func(ctx context.Context) (*Setup, error) {
		s, err := reload(ctx)
		if err != nil {
			return nil, err
		}
		return d.complete(ctx, s)
	}, d.registry, d.log)

	sinks := map[string]bot.Sink{bot.SourceLocal: local.Sink{}}
	d.deliverer = bot.NewDeliverer(bot.DelivererOptions{
		Store: store, Sinks: sinks, Metrics: d.metrics, Logger: d.log, Now: d.clock.Now,
	})
	d.reporter = bot.NewReporter(bot.ReporterOptions{Outbox: d.outbox, Wake: d.deliverer.Wake, Logger: d.log})
	// The sources' gates are added by connect, before anything is served.
	gates := map[string]bot.Gate{}
	d.intake = bot.NewIntake(bot.IntakeOptions{
		Store: store, Router: setup.Router, Metrics: d.metrics, Logger: d.log,
		DedupWindow:  cfg.DedupWindow,
		Gates:        gates,
		Threads:      store,
		Resets:       store,
		ThreadWindow: setup.Router.ThreadWindow(),
		Notices:      d.outbox,
		Wake:         d.deliverer.Wake,
		React:        true,
		Now:          d.clock.Now,
		Accepted: func(context.Context, *bot.WorkItem, *bot.Event) {
			d.dispatcher.Wake()
		},
	})
	if err := d.connect(sinks, gates); err != nil {
		return err
	}
	d.registerSources()

	var err error
	if d.audit, err = policy.NewAuditor(store, d.redactor); err != nil {
		return err
	}
	// Pending approvals outlive a configuration; each configuration's
	// runs ask with their own approvers and timeout (Approvals.With).
	if d.approvals, err = policy.NewApprovals(policy.ApprovalOptions{
		Store: store, Approvers: noApprovers{}, Notifier: outboxNotifier{out: d.outbox, wake: d.deliverer.Wake},
		Audit: d.audit, Redactor: d.redactor, Logger: d.log, Timeout: cfg.ApprovalTimeout,
		Decided: func(id string) { d.notify(bot.TopicApproval, id) }, Now: d.clock.Now,
	}); err != nil {
		return err
	}
	if err := d.buildSkills(context.Background()); err != nil {
		return err
	}
	// Subagents outlive a configuration like approvals. What a previous
	// process left open and cannot go on is closed before anything runs,
	// in a file only this process opens: in a database other replicas'
	// open agent calls and background tasks are alive.
	d.subagents = agents.NewSubagents(agents.SubagentsOptions{Ledger: store, Wake: func() { d.dispatcher.Wake() }, Logger: d.log})
	d.budgets = agents.NewBudgets(store, d.log)
	d.background, err = tools.NewBackground(tools.BackgroundOptions{Store: store, Dir: filepath.Join(cfg.DataDir, "tasks"), Logger: d.log})
	if err != nil {
		return err
	}
	for _, rec := range []interface {
		Recover(context.Context) (int, error)
	}{d.subagents, d.background} {
		if _, single := store.(orphanReclaimer); !single {
			break
		}
		if n, err := rec.Recover(context.Background()); err != nil {
			return fmt.Errorf("close what the previous process left open: %w", err)
		} else if n > 0 {
			d.log.Warn("closed records a previous process left open", slog.Int("records", n))
		}
	}
	if setup, err = d.startPackages(context.Background(), setup); err != nil {
		return err
	}
	gen, err := d.buildGeneration(context.Background(), setup, nil)
	if err != nil {
		return err
	}
	d.gen.Store(gen)
	if !setup.ModelFound {
		d.log.Warn(setup.ModelNote)
	} else if setup.ModelNote != "" {
		d.log.Info(setup.ModelNote)
	}
	d.dispatcher = bot.NewDispatcher(bot.DispatcherOptions{
		Queue: store, Items: store, Open: d.subagents, Recorded: d.subagents.Recorded, Adopt: d.subagents.Adopt, Resets: store, Runner: currentRunner{&d.gen}, Reporter: d.reporter, Name: d.replica, Details: d.details,
		Workers: cfg.Workers, Lease: cfg.Dispatch.Lease, MaxAttempts: cfg.Dispatch.MaxAttempts, Grace: d.opts.ShutdownGrace,
		Cancelled: d.runCancelled, Metrics: d.metrics, Logger: d.log, Now: d.clock.Now,
	})
	d.scheduler, err = bot.NewScheduler(bot.SchedulerOptions{
		Schedules: cfg.BotSchedules(), Store: store, Intake: d.intake, Metrics: d.metrics, Logger: d.log, Now: d.clock.Now,
	})
	if err != nil {
		return err
	}
	d.config.Subscribe(
		// New secrets are masked before anything can use them.
		SubscriberFunc(func(_ context.Context, _, next *Setup) (func(), error) {
			return func() { d.redactor.Add(next.Secrets()...) }, nil
		}),
		SubscriberFunc(d.prepareRunner),
		SubscriberFunc(func(_ context.Context, _, next *Setup) (func(), error) {
			return d.scheduler.Prepare(next.Config.BotSchedules())
		}),
		SubscriberFunc(d.prepareIntake),
		SubscriberFunc(d.prepareSkills),
	)
	return nil
}

// prepareRunner builds the runner of next; its commit gives it the jobs
// that start from then on.
func (d *Daemon) prepareRunner(ctx context.Context, _, next *Setup) (func(), error) {
	prev := d.gen.Load()
	gen, err := d.buildGeneration(ctx, next, prev)
	if err != nil {
		return nil, err
	}
	return func() { d.gen.Store(gen) }, nil
}

// prepareIntake readies the routing and admission of next: the router and
// dedup window, GitHub's allowed bots, App slug and permission, Slack's
// allow lists.
func (d *Daemon) prepareIntake(_ context.Context, _, next *Setup) (func(), error) {
	cfg := next.Config
	var (
		slug string
		perm github.Permission
	)
	if gc := cfg.GitHub; gc != nil && d.ghGate != nil {
		var err error
		if perm, err = github.ParsePermission(gc.MinPermission); err != nil {
			return nil, bot.Errorf(bot.EINVALID, "github.min_permission: %v", err)
		}
		slug = cmp.Or(gc.AppSlug, d.ghSlug)
	}
	return func() {
		d.intake.Use(next.Router, cfg.DedupWindow, next.Router.ThreadWindow())
		if gc := cfg.GitHub; gc != nil && d.ghGate != nil {
			d.ghGate.Configure(slug, gc.AllowBots, perm)
		}
		if sc := cfg.Slack; sc != nil && d.slack != nil {
			d.slack.Gate().Allow(sc.AllowedChannels, sc.AllowedUsers)
			d.slack.UseUserGroups(slackGroups(cfg))
		}
	}, nil
}

// Reload reads the configuration again and puts it in effect at once, or
// refuses it with a *ReloadError and keeps the config in effect (see
// Coordinator.Reload).
// Replicas sharing the store are told, and reload their own.
func (d *Daemon) Reload(ctx context.Context) (ReloadResult, error) {
	res, err := d.config.Reload(ctx)
	if err == nil {
		d.notify(bot.TopicConfig, d.replica)
	}
	return res, err
}

// noApprovers is the approver lists of the Approvals itself, which only
// the runs' own Approvers (Approvals.With) ask for approvals with.
type noApprovers struct{}

func (noApprovers) Approvers(string) []string { return nil }

// connect sets up the GitHub and Slack integrations that are configured,
// adding their sinks and the gates the intake applies to their events. It
// runs before the deliverer starts and before anything is served, so
// writing the maps here is safe.
func (d *Daemon) connect(sinks map[string]bot.Sink, gates map[string]bot.Gate) error {
	// The webhooks of both platforms read bodies before they know who sent
	// them: what those bodies hold together is bounded once.
	bodies := httpapi.NewBodies(0)
	if gc := d.cfg.GitHub; gc != nil {
		client, err := github.NewClient(github.ClientOptions{
			AppID: gc.AppID, PrivateKey: gc.PrivateKey, PrivateKeyFile: gc.PrivateKeyFile,
			APIURL: gc.APIURL, Installations: d.store, AppSlug: gc.AppSlug, Logger: d.log,
		})
		if err != nil {
			return err // it names the github setting at fault
		}
		perm, err := github.ParsePermission(gc.MinPermission)
		if err != nil {
			return bot.Errorf(bot.EINVALID, "github.min_permission: %v", err)
		}
		slug := gc.AppSlug
		if slug == "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			slug, err = client.AppSlug(ctx)
			cancel()
			if err != nil {
				// Its own comments are still ignored: GitHub marks the App's
				// login as a bot.
				d.log.Warn("github: could not look up the App's slug; set github.app_slug", slog.String("error", err.Error()))
			}
			d.ghSlug = slug
		}
		d.ghClient = client
		d.ghGate = github.NewGate(github.GateOptions{
			Client: client, AppSlug: slug, AllowBots: gc.AllowBots, MinPermission: perm, Logger: d.log,
		})
		gates[bot.SourceGitHub] = d.ghGate
		d.requesters[bot.SourceGitHub] = d.ghGate
		d.details[bot.SourceGitHub] = github.Details{}
		d.github = github.NewWebhookHandler(github.WebhookOptions{
			Secret: gc.WebhookSecret, Intake: d.intake, Gate: d.ghGate, Client: client, Installations: d.store, Deliveries: d.store,
			Outbox: d.outbox, Wake: d.deliverer.Wake, Approvals: githubApprovals{d},
			NeedsPaths: func() bool { return d.config.Current().Router.NeedsPaths() }, Bodies: bodies, Logger: d.log,
		})
		sinks[bot.SourceGitHub] = github.NewSink(client)
		d.log.Info("github connected", slog.Int64("app_id", gc.AppID), slog.String("api_url", gc.APIURL), slog.String("app_slug", slug))
	}
	if sc := d.cfg.Slack; sc != nil {
		a, err := slack.New(slack.Options{
			Mode: sc.Mode, BotToken: sc.BotToken, AppToken: sc.AppToken, SigningSecret: sc.SigningSecret,
			APIURL: sc.APIURL, AllowedChannels: sc.AllowedChannels, AllowedUsers: sc.AllowedUsers,
			Intake: d.intake, Outbox: d.outbox, Wake: d.deliverer.Wake, WorkItems: d.store, Agents: d.agentNames, Skills: d.skillNames,
			Approvals: slackApprovals{d}, UserGroups: slackGroups(d.cfg), Redactor: d.redactor, Bodies: bodies, Logger: d.log,
			Resetter: slackResetter{d},
		})
		if err != nil {
			return fmt.Errorf("slack: %w", err)
		}
		d.slack = a
		gates[bot.SourceSlack] = a.Gate()
		d.requesters[bot.SourceSlack] = a
		d.sources = append(d.sources, source{name: bot.SourceSlack, health: d.slackHealth})
		sinks[bot.SourceSlack] = a.Sink()
		d.log.Info("slack configured", slog.String("mode", sc.Mode), slog.String("api_url", sc.APIURL))
	}
	return nil
}

// slackGroups are the Slack user groups access rules name, whose members
// are looked up when a run starts.
func slackGroups(cfg *config.Config) []string {
	return slices.Sorted(maps.Keys(cfg.Access.Slack.Groups))
}

// source is an inbound source that holds a connection and can be down.
type source struct {
	name   string
	health func() (up bool, reason string)
}

// registerSources exports switchyard_source_up for the connected sources.
func (d *Daemon) registerSources() {
	for _, src := range d.sources {
		d.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "switchyard_source_up",
			Help:        "Whether an inbound source that holds a connection takes events (1) or is down and retrying (0).",
			ConstLabels: prometheus.Labels{"source": src.name},
		}, func() float64 {
			if up, _ := src.health(); up {
				return 1
			}
			return 0
		}))
	}
}

func (d *Daemon) registerGauges() {
	gauge := func(name, help string, f func(ctx context.Context) (float64, error)) {
		d.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			v, err := f(ctx)
			if err != nil {
				return -1
			}
			return v
		}))
	}
	gauge("switchyard_queue_depth", "Dispatches pending or running.", func(ctx context.Context) (float64, error) {
		n, err := d.store.QueueDepth(ctx)
		return float64(n), err
	})
	gauge("switchyard_outbox_pending", "Outbox messages not yet delivered in their latest version.", func(ctx context.Context) (float64, error) {
		n, _, err := d.store.OutboxPending(ctx)
		return float64(n), err
	})
	gauge("switchyard_outbox_dead", "Outbox messages given up after permanent failures.", func(ctx context.Context) (float64, error) {
		_, n, err := d.store.OutboxPending(ctx)
		return float64(n), err
	})
	gauge("switchyard_sandbox_available", "1 when bash and command tools run inside the bubblewrap sandbox; 0 when they are refused (bubblewrap cannot run) or run without one (sandbox.mode: none).", func(context.Context) (float64, error) {
		gen := d.gen.Load()
		if gen == nil {
			return 0, nil
		}
		if ok, _ := gen.sandbox.Available(); ok {
			return 1, nil
		}
		return 0, nil
	})
}

func (d *Daemon) routes() (http.Handler, error) {
	api := http.NewServeMux()
	if d.cfg.Server.Console {
		local.New(d.intake, d.store, d.log).Mount(api)
	}
	ao := admin.Options{
		Store: d.store, Intake: d.intake, Logger: d.log,
		Agents: agentCatalog{d.config}, Routing: routingTable{d.config}, RuleBook: ruleBook{d}, Threads: threadResetter{d}, Config: configReloader{d},
		Runs: runsDesk{d}, Workspaces: workspaces{d}, Canceller: canceller{d},
		Audit: auditLog{d.audit}, Approvals: approvalDesk{d.approvals},
		Skills: d.skills,
	}
	if d.installer != nil {
		ao.Installer = checkedInstaller{d}
	}
	// The agent runtime says what an agent may do; a runner that cannot
	// (a test's) leaves explain without it.
	if _, ok := d.gen.Load().runner.(admin.Rights); ok {
		ao.Rights = currentRights{&d.gen}
	}
	admin.New(ao).Mount(api)

	pages, err := ui.New(ui.Options{
		Admin: ao, Tokens: apiTokens(d.opts.APIToken, d.cfg), Users: adminUsers(d.cfg), PublicURL: d.cfg.Server.PublicURL,
		Roster: roster{d.config}, Redactor: d.redactor, Audit: d.audit, Records: d.store, Rerouter: rerouter{d}, Approvals: d.approvals, Caps: budgetCaps{d.config}, Logger: d.log,
		Sessions: d.store,
	})
	if err != nil {
		return nil, err
	}
	d.ui = pages
	// A credential withdrawn from the config stops signing in, and the
	// sessions started with it end, when the config is reloaded.
	d.config.Subscribe(SubscriberFunc(func(_ context.Context, _, next *Setup) (func(), error) {
		tokens, users := apiTokens(d.opts.APIToken, next.Config), adminUsers(next.Config)
		return func() {
			warnShortTokens(d.log, next.Config.Server.ShortAPITokens())
			d.tokens.Replace(tokens)
			d.ui.SetCredentials(tokens, users)
		}, nil
	}))

	mux := http.NewServeMux()
	// Every /api/v1 call is for this daemon (Host), from no other site
	// (Origin, Sec-Fetch-Site), authenticated (bearer token), with each
	// query parameter once and, with a body, JSON; its answer shows no
	// secret.
	mux.Handle("/api/", httpapi.Guard(d.site.Load, httpapi.Authenticate(d.tokens,
		httpapi.StrictQuery(httpapi.RequireJSON(httpapi.Redact(d.redactor, httpapi.Endpoints(api)))))))
	// The admin UI is for this daemon and from no other site too; it
	// signs people in itself (sessions, CSRF) and masks every page.
	mux.Handle("/admin/", httpapi.Guard(d.site.Load, pages.Handler()))
	// Webhooks authenticate with their platform's signature, not the API token.
	if d.github != nil {
		mux.Handle("POST /webhooks/github", d.github)
	}
	if d.slack != nil && d.cfg.Slack.Mode == config.SlackHTTP {
		mux.Handle("/slack/", d.slack.Handler())
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.JSON(w, http.StatusOK, map[string]string{"status": "ok", "version": d.opts.Version})
	})
	// Open to anyone: a down source's reason is an error's text, masked
	// like every answer. Metrics carry only names, codes and numbers.
	mux.Handle("GET /readyz", httpapi.Redact(d.redactor, http.HandlerFunc(d.ready)))
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{}))
	return mux, nil
}

// notificationsHealth is a store shared by replicas that says when it
// does not hear the others' notifications.
type notificationsHealth interface {
	NotificationsDown() string
}

// readiness is the body of /readyz.
type readiness struct {
	Status string `json:"status"` // ready, degraded, or why it is not ready
	// Down names each source that is down, and each destination whose
	// messages wait because its platform refuses or fails them all (a bot
	// token revoked, an installation suspended), with why; webhooks and
	// the API are served meanwhile.
	Down map[string]string `json:"down,omitempty"`
}

// ready answers /readyz: 503 when the daemon cannot take work at all (the
// store or the workers), 200 otherwise. A source that is down (Slack's
// Socket Mode reconnecting), or a destination whose messages wait (Slack
// refusing the bot token while events still arrive), makes the answer
// "degraded" and is named, but
// stays 200: taking the daemon out of a load balancer would also stop the
// webhooks and the API, which still work. switchyard_source_up is what to
// alert on.
func (d *Daemon) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := d.store.Ping(ctx); err != nil {
		httpapi.JSON(w, http.StatusServiceUnavailable, readiness{Status: "store unavailable"})
		return
	}
	if !d.dispatcher.Running() {
		httpapi.JSON(w, http.StatusServiceUnavailable, readiness{Status: "workers not running"})
		return
	}
	out := readiness{Status: "ready"}
	for _, src := range d.sources {
		if up, reason := src.health(); !up {
			if out.Down == nil {
				out.Down = map[string]string{}
			}
			out.Down[src.name] = reason
			out.Status = "degraded"
		}
	}
	if n, ok := d.store.(notificationsHealth); ok {
		if why := n.NotificationsDown(); why != "" {
			if out.Down == nil {
				out.Down = map[string]string{}
			}
			out.Down["notifications"] = "not hearing the other replicas: " + why +
				"; work and changes they announce reach this replica by polling, later"
			out.Status = "degraded"
		}
	}
	for name, why := range d.deliverer.Down() {
		if out.Down == nil {
			out.Down = map[string]string{}
		}
		why = "its messages wait: " + why
		if reason, ok := out.Down[name]; ok {
			why = reason + "; " + why
		}
		out.Down[name] = why
		out.Status = "degraded"
	}
	httpapi.JSON(w, http.StatusOK, out)
}

// Handler is the daemon's HTTP surface.
func (d *Daemon) Handler() http.Handler { return d.handler }

// Intake is where sources hand events.
func (d *Daemon) Intake() *bot.Intake { return d.intake }

// Store is the daemon's store.
func (d *Daemon) Store() Store { return d.store }

// Registry is the daemon's Prometheus registry.
func (d *Daemon) Registry() *prometheus.Registry { return d.registry }

// ListenAndServe listens on Options.Listen and serves until ctx ends.
func (d *Daemon) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.Server.Listen)
	if err != nil {
		d.store.Close()
		// net's error repeats the operation and the address ("listen tcp
		// 127.0.0.1:8080: bind: …"): say them once.
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return fmt.Errorf("listen on %s: %w", d.cfg.Server.Listen, err)
	}
	return d.Serve(ctx, ln)
}

// Serve runs the daemon on ln until ctx ends, then shuts down in order:
// stop intake, let running jobs finish or release their leases, flush the
// outbox, close the store. It returns nil after a clean shutdown.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	// The port is known now (a listen address may have asked for any).
	site, err := httpapi.NewSite(ln.Addr().String(), d.cfg.Server.PublicURL)
	if err != nil {
		d.store.Close()
		return err
	}
	d.site.Store(site)
	srv := &http.Server{
		Handler:           d.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	deliverCtx, stopDelivery := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	defer stopDelivery()

	var work, delivery sync.WaitGroup
	work.Go(func() { _ = d.dispatcher.Run(workCtx) })
	work.Go(func() { _ = d.scheduler.Run(workCtx) })
	work.Go(func() { d.upkeep(workCtx) })
	work.Go(func() { d.listen(workCtx) })
	if _, single := d.store.(orphanReclaimer); !single {
		work.Go(func() { d.watchShared(workCtx) })
	}
	if sc, ok := d.store.(serverClock); ok {
		work.Go(func() { d.clock.follow(workCtx, sc, d.log) })
	}
	delivery.Go(func() { _ = d.deliverer.Run(deliverCtx) })
	if d.slack != nil {
		work.Go(func() { d.runSlack(workCtx) })
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	d.log.Info("switchyard serving", slog.String("listen", ln.Addr().String()), slog.String("store", d.store.Where()), slog.String("replica", d.replica),
		slog.String("version", d.opts.Version), slog.Bool("console", d.cfg.Server.Console), slog.String("config", d.cfg.Source))

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("serve http: %w", err)
	}
	d.log.Info("shutting down: intake stopped, finishing running jobs")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = srv.Shutdown(shutCtx)
	cancel()
	stopWork()
	work.Wait()
	// Background tasks die with the daemon; stopping them says so in their
	// records.
	d.background.Shutdown(context.Background())

	// Run and Flush must not deliver at the same time: stop Run first.
	stopDelivery()
	delivery.Wait()
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if ferr := d.deliverer.Flush(flushCtx); ferr != nil {
		d.log.Warn("outbox not fully flushed; the rest is sent after restart", slog.String("error", ferr.Error()))
	}
	cancel()
	if cerr := d.store.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close store: %w", cerr)
	}
	d.log.Info("stopped")
	return err
}

// Hurry cuts the grace of running jobs short at a shutdown: they are
// cancelled and released at once instead of after up to 30 s. serve calls
// it when it is asked to stop a second time (Ctrl-C again).
func (d *Daemon) Hurry() { d.dispatcher.Hurry() }

// notify tells every process sharing the store (this one too) of a change.
func (d *Daemon) notify(topic, payload string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.store.Notify(ctx, topic, payload); err != nil {
		d.log.Warn("tell the other replicas", slog.String("topic", topic), slog.String("error", err.Error()))
	}
}

// listen acts on what the processes sharing the store tell each other:
// work to claim, messages to deliver, approvals decided, work cancelled, a
// config reloaded,
// stored routing rules or skill settings changed.
func (d *Daemon) listen(ctx context.Context) {
	err := d.store.Listen(ctx, func(topic, payload string) {
		switch topic {
		case bot.TopicWork:
			d.dispatcher.Wake()
		case bot.TopicOutbox:
			d.deliverer.Wake()
		case bot.TopicApproval:
			d.approvals.Changed(payload)
		case bot.TopicCancel:
			// A person cancelled a job's work: if it runs here, its
			// renewal now finds the cancel and stops it.
			d.dispatcher.CheckJob(payload)
		case bot.TopicRules:
			if payload != d.replica {
				// Another replica changed a stored rule: build the router
				// again, as a change made here does.
				go func() { _ = d.config.Refresh(ctx) }()
			}
		case bot.TopicSkills:
			if payload != d.replica {
				// Another replica changed a skill setting: read the
				// settings again, as a change made here puts them.
				go d.refreshSkills(ctx)
			}
		case bot.TopicConfig:
			if payload == d.replica {
				return
			}
			// Another replica reloaded: read this one's config again, without
			// telling the others again.
			go func() {
				if _, err := d.config.Reload(ctx); err == nil {
					d.log.Info("config reloaded after replica " + payload + " reloaded its own")
				}
			}()
		case bot.TopicResync:
			go func() { _ = d.config.Refresh(ctx) }() // a rule may have changed meanwhile
			go d.refreshSkills(ctx)                   // and a skill setting
			d.dispatcher.Wake()
			d.deliverer.Wake()
			d.approvals.ChangedAll()
		}
	})
	if err != nil && ctx.Err() == nil {
		d.log.Error("listening to the other replicas stopped", slog.String("error", err.Error()))
	}
}

// replicaName names this process among the replicas sharing a store: it
// owns the jobs it claims and the leases it holds under this name.
func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "switchyard"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// upkeep, at start and then once an hour, forgets old delivery ids and
// sweeps what the retention of the config in effect lets go (the store logs
// what it removed).
func (d *Daemon) upkeep(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		if n, err := d.store.ExpireDedup(ctx, d.clock.Now()); err != nil && ctx.Err() == nil {
			d.log.Warn("expire dedup keys", slog.String("error", err.Error()))
		} else if n > 0 {
			d.log.Info("expired dedup keys", slog.Int("count", n))
		}
		retention := d.config.Current().Config.Retention.Bot()
		if _, err := d.store.Sweep(ctx, d.clock.Now(), retention); err != nil && ctx.Err() == nil {
			d.log.Warn("retention sweep", slog.String("error", err.Error()))
		}
		t.Reset(sweepEvery(retention))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepEvery is how long the daemon waits between two retention sweeps:
// an hour, or half the shortest retention when that is shorter (a
// retention of minutes or seconds), so nothing outlives its retention by
// more than half as long again; never more often than once a second.
func sweepEvery(r bot.Retention) time.Duration {
	every := time.Hour
	for _, d := range []time.Duration{r.Payloads, r.Records, r.Audit} {
		if d > 0 {
			every = min(every, d/2)
		}
	}
	return max(every, time.Second)
}

// Close releases the store of a daemon that was never served.
func (d *Daemon) Close() error { return d.store.Close() }

// apiTokens are the API's bearer tokens of cfg: the administrator's token
// (admin) and the named tokens of server.api_tokens.
func apiTokens(admin bot.Secret, cfg *config.Config) []httpapi.Token {
	tokens := []httpapi.Token{{Name: config.AdminIdentity, Value: admin}}
	for _, t := range cfg.Server.APITokens {
		tokens = append(tokens, httpapi.Token{Name: t.Name, Value: t.Token})
	}
	return tokens
}

// warnShortTokens says, once for each, which API tokens are short enough
// to guess. They work: whoever set one chose it.
func warnShortTokens(log *slog.Logger, settings []string) {
	for _, s := range settings {
		log.Warn(fmt.Sprintf("API token shorter than %d characters: anyone who can reach the listener could guess it (openssl rand -hex 32 makes one)", config.MinAPIToken),
			slog.String("setting", s))
	}
}

// adminUsers are the users who sign in to the admin UI with a password.
func adminUsers(cfg *config.Config) []ui.User {
	users := make([]ui.User, 0, len(cfg.Admin.Users))
	for _, u := range cfg.Admin.Users {
		users = append(users, ui.User{Name: u.Name, PasswordHash: u.PasswordHash})
	}
	return users
}

// agentCatalog shows the agents in effect to the admin API.
type agentCatalog struct{ c *Coordinator }

func (c agentCatalog) ListAgents() any { return c.c.Current().Agents.Summaries() }

func (c agentCatalog) GetAgent(name string) (any, bool) {
	d, ok := c.c.Current().Agents.Get(name)
	if !ok {
		return nil, false
	}
	return d.Detail(), true
}

// roster shows the configuration in effect to the admin UI's agents page:
// its agents, what its models are (never their keys) and its profiles and
// access ceilings.
type roster struct{ c *Coordinator }

func (r roster) Agents() []agents.Definition { return r.c.Current().Agents.List() }

func (r roster) Model(name string) (ui.Model, bool) {
	m, ok := r.c.Current().Config.Models[name]
	return ui.Model{Provider: m.Provider, Model: m.Model}, ok
}

func (r roster) Policy() *policy.Engine { return r.c.Current().Policy }

// budgetCaps are the budgets of the config in effect, for the admin UI.
type budgetCaps struct{ c *Coordinator }

func (b budgetCaps) BudgetCaps() config.Budgets { return b.c.Current().Config.Budgets }

// routingTable shows the router in effect to the admin API.
type routingTable struct{ c *Coordinator }

func (t routingTable) Routing() *bot.Router { return t.c.Current().Router }

// configReloader reloads the config for the admin API.
type configReloader struct{ d *Daemon }

func (r configReloader) ReloadConfig(ctx context.Context) (any, error) { return r.d.Reload(ctx) }

// agentNames lists the names of the agents in effect, for chat commands.
func (d *Daemon) agentNames(context.Context) ([]string, error) {
	var names []string
	for _, a := range d.config.Current().Agents.List() {
		names = append(names, a.Name)
	}
	return names, nil
}

// GCPercent is the garbage collector's target (GOGC) the daemon runs with
// when the environment sets none. Intake allocates about five times what it
// is sent (bbolt builds each commit's pages in the heap): a 28 KB GitHub
// delivery costs ~150 KB, so at the default of 100 the collector ran every
// few dozen deliveries over a heap of a few MB and took a quarter of the
// CPU (bench/: 450 µs of CPU per delivery against 330 µs at 400).
const GCPercent = 400

// TuneRuntime sets the process's garbage collector for the daemon, unless
// GOGC says otherwise. `switchyard serve` calls it, and so does the
// benchmark that measures the daemon's intake.
func TuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
