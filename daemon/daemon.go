package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/sandbox"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/bot/admin"
	"github.com/switchyard/switchyard/config"
	"github.com/switchyard/switchyard/httpapi"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/local"
	"github.com/switchyard/switchyard/integrations/slack"
	"github.com/switchyard/switchyard/storage/bolt"
)

// Options is everything the daemon is built from. cmd/switchyard fills it
// from the config file.
type Options struct {
	Listen string // host:port
	// APIToken is the administrator's bearer token (identity "admin");
	// unset, the token of <DataDir>/api-token, which New makes when it
	// does not exist.
	APIToken bot.Secret
	// APITokens are further bearer tokens, each with the name its holder
	// decides approvals as.
	APITokens []config.APIToken
	// PublicURL is where the daemon is reached besides its listen address;
	// /api/v1 refuses requests for any other host or origin.
	PublicURL string
	Console   bool // serve the local console endpoints
	DataDir   string
	// Secrets are every value configured as a secret. They, the API tokens
	// and anything shaped like a credential are masked in logs, API
	// answers, thread messages, tool results, transcripts and the audit log.
	Secrets []bot.Secret

	Router *bot.Router
	// NewRunner builds the agent runtime inside the daemon; nil runs
	// bot.NoRuntime, which fails every job with a clear error.
	NewRunner func(RunnerDeps) (Runtime, error)
	Schedules []bot.Schedule

	Workers     int
	Lease       time.Duration
	MaxAttempts int
	DedupWindow time.Duration
	// ShutdownGrace bounds how long running jobs may finish at shutdown;
	// default 30s.
	ShutdownGrace time.Duration

	// GitHub and Slack connect those platforms; nil leaves them off.
	GitHub *config.GitHub
	Slack  *config.Slack
	// Agents are the agents in effect, for the API and chat commands.
	Agents *agents.Manager
	// SlackGroups are the Slack user groups access rules name, whose
	// members are looked up when a run starts.
	SlackGroups []string
	// Sandbox configures where bash and command tools run; the zero value
	// requires bubblewrap. The data directory is always hidden from
	// commands, beside Sandbox.Hide.
	Sandbox sandbox.Options

	Logger  *slog.Logger
	Version string
}

// Daemon is a configured Switchyard. New opens the store; Serve runs until
// its context ends; the caller owns both.
type Daemon struct {
	opts       Options
	log        *slog.Logger
	redactor   *bot.Redactor
	outbox     bot.Outboxer // the store, masking what it is given
	tokens     []httpapi.Token
	site       atomic.Pointer[httpapi.Site]
	store      *bolt.Store
	runner     bot.Runner
	runtime    Runtime
	metrics    *bot.Metrics
	registry   *prometheus.Registry
	intake     *bot.Intake
	reporter   *bot.Reporter
	deliverer  *bot.Deliverer
	dispatcher *bot.Dispatcher
	scheduler  *bot.Scheduler
	sandbox    *sandbox.Sandbox
	requesters requesters
	slack      *slack.Adapter
	sources    []source
	github     http.Handler
	handler    http.Handler
}

// DataFile is the store's file name inside the data directory.
const DataFile = "switchyard.db"

// New builds the daemon and opens its store. Without a configured API token
// it reads the token file of the data directory, making it at first start.
func New(opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	if opts.Router == nil {
		return nil, errors.New("daemon: no router")
	}
	site, err := httpapi.NewSite(opts.Listen, opts.PublicURL)
	if err != nil {
		return nil, err
	}
	tokenFile := ""
	if !opts.APIToken.IsSet() {
		if opts.APIToken, err = LoadAPIToken(opts.DataDir); err != nil {
			return nil, err
		}
		tokenFile = filepath.Join(opts.DataDir, APITokenFile)
	}
	tokens := []httpapi.Token{{Name: config.AdminIdentity, Value: opts.APIToken}}
	secrets := append(slices.Clone(opts.Secrets), opts.APIToken)
	for _, t := range opts.APITokens {
		tokens = append(tokens, httpapi.Token{Name: t.Name, Value: t.Token})
		secrets = append(secrets, t.Token)
	}
	redactor := bot.NewRedactor(secrets...)
	opts.Logger = slog.New(redactor.Handler(opts.Logger.Handler()))
	store, err := bolt.Open(filepath.Join(opts.DataDir, DataFile), bolt.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	// Jobs still running in the file belong to a process that died: hand
	// them back now instead of after their lease.
	if n, err := store.ExpireOrphanedLeases(context.Background(), time.Now()); err != nil {
		store.Close()
		return nil, err
	} else if n > 0 {
		opts.Logger.Warn("reclaiming jobs of a previous process that did not stop cleanly", slog.Int("jobs", n))
	}
	d := &Daemon{
		opts: opts, log: opts.Logger, redactor: redactor, store: store, registry: prometheus.NewRegistry(),
		outbox: bot.RedactingOutbox(store, redactor), tokens: tokens, requesters: requesters{},
	}
	d.site.Store(site)
	if tokenFile != "" {
		d.log.Info("API clients authenticate with the token in " + tokenFile)
	}
	if err := d.build(); err != nil {
		store.Close()
		return nil, err
	}
	d.handler = d.routes()
	return d, nil
}

// build assembles the pipeline over the open store.
func (d *Daemon) build() error {
	opts, store := d.opts, d.store
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d.metrics = bot.NewMetrics(d.registry)
	d.registerGauges()

	sinks := map[string]bot.Sink{bot.SourceLocal: local.Sink{}}
	d.deliverer = bot.NewDeliverer(bot.DelivererOptions{
		Store: store, Sinks: sinks, Metrics: d.metrics, Logger: d.log,
	})
	d.reporter = bot.NewReporter(bot.ReporterOptions{Outbox: d.outbox, Wake: d.deliverer.Wake, Logger: d.log})
	// The sources' gates are added by connect, before anything is served.
	gates := map[string]bot.Gate{}
	d.intake = bot.NewIntake(bot.IntakeOptions{
		Store: store, Router: opts.Router, Metrics: d.metrics, Logger: d.log,
		DedupWindow:  opts.DedupWindow,
		Gates:        gates,
		Threads:      store,
		ThreadWindow: opts.Router.ThreadWindow(),
		Notices:      d.outbox,
		Wake:         d.deliverer.Wake,
		Accepted: func(ctx context.Context, wi *bot.WorkItem, _ *bot.Event) {
			d.reporter.Accepted(ctx, wi)
			d.dispatcher.Wake()
		},
	})
	platformTools, err := d.connect(sinks, gates)
	if err != nil {
		return err
	}
	d.registerSources()
	sbOpts := opts.Sandbox
	sbOpts.Hide = append(slices.Clone(sbOpts.Hide), opts.DataDir)
	sbOpts.Logger = d.log
	if d.sandbox, err = sandbox.New(context.Background(), sbOpts); err != nil {
		return bot.Errorf(bot.EINVALID, "%v", err)
	}
	d.runtime = Runtime{Runner: bot.NoRuntime{}}
	if opts.NewRunner != nil {
		d.runtime, err = opts.NewRunner(RunnerDeps{
			Store: store, Tools: platformTools, Notifier: outboxNotifier{out: d.outbox, wake: d.deliverer.Wake},
			Redactor: d.redactor, Logger: d.log, Sandbox: d.sandbox, Requesters: d.requesters,
		})
		if err != nil {
			return fmt.Errorf("agent runtime: %w", err)
		}
	}
	d.runner = d.runtime.Runner
	d.dispatcher = bot.NewDispatcher(bot.DispatcherOptions{
		Queue: store, Items: store, Runner: d.runner, Reporter: d.reporter,
		Workers: opts.Workers, Lease: opts.Lease, MaxAttempts: opts.MaxAttempts, Grace: opts.ShutdownGrace,
		Metrics: d.metrics, Logger: d.log,
	})
	d.scheduler, err = bot.NewScheduler(bot.SchedulerOptions{
		Schedules: opts.Schedules, Store: store, Intake: d.intake, Metrics: d.metrics, Logger: d.log,
	})
	if err != nil {
		return err
	}
	d.handler = d.routes()
	return nil
}

// connect sets up the GitHub and Slack integrations that are configured,
// adding their sinks and the gates the intake applies to their events, and
// returns the agent tools they offer. It runs before the deliverer starts
// and before anything is served, so writing the maps here is safe.
func (d *Daemon) connect(sinks map[string]bot.Sink, gates map[string]bot.Gate) ([]tools.Tool, error) {
	var ts []tools.Tool
	if gc := d.opts.GitHub; gc != nil {
		client, err := github.NewClient(github.ClientOptions{
			AppID: gc.AppID, PrivateKey: gc.PrivateKey, PrivateKeyFile: gc.PrivateKeyFile,
			APIURL: gc.APIURL, Installations: d.store, Logger: d.log,
		})
		if err != nil {
			return nil, fmt.Errorf("github: %w", err)
		}
		perm, err := github.ParsePermission(gc.MinPermission)
		if err != nil {
			return nil, bot.Errorf(bot.EINVALID, "github.min_permission: %v", err)
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
		}
		gate := github.NewGate(github.GateOptions{
			Client: client, AppSlug: slug, AllowBots: gc.AllowBots, MinPermission: perm, Logger: d.log,
		})
		gates[bot.SourceGitHub] = gate
		d.requesters[bot.SourceGitHub] = gate
		d.github = github.NewWebhookHandler(github.WebhookOptions{
			Secret: gc.WebhookSecret, Intake: d.intake, Gate: gate, Client: client, Installations: d.store,
			Outbox: d.outbox, Wake: d.deliverer.Wake, Approvals: githubApprovals{d},
			NeedsPaths: d.opts.Router.NeedsPaths, Logger: d.log,
		})
		sinks[bot.SourceGitHub] = github.NewSink(client)
		ts = append(ts, github.Tools(client, github.ToolOptions{AllowOtherRepos: gc.AllowOtherRepos})...)
		d.log.Info("github connected", slog.Int64("app_id", gc.AppID), slog.String("api_url", gc.APIURL), slog.String("app_slug", slug))
	}
	if sc := d.opts.Slack; sc != nil {
		a, err := slack.New(slack.Options{
			Mode: sc.Mode, BotToken: sc.BotToken, AppToken: sc.AppToken, SigningSecret: sc.SigningSecret,
			APIURL: sc.APIURL, AllowedChannels: sc.AllowedChannels, AllowedUsers: sc.AllowedUsers,
			Intake: d.intake, Outbox: d.outbox, Wake: d.deliverer.Wake, WorkItems: d.store, Agents: d.agentNames,
			Approvals: slackApprovals{d}, UserGroups: d.opts.SlackGroups, Redactor: d.redactor, Logger: d.log,
		})
		if err != nil {
			return nil, fmt.Errorf("slack: %w", err)
		}
		d.slack = a
		gates[bot.SourceSlack] = a.Gate()
		d.requesters[bot.SourceSlack] = a
		d.sources = append(d.sources, source{name: bot.SourceSlack, health: a.Health})
		sinks[bot.SourceSlack] = a.Sink()
		ts = append(ts, a.Tools()...)
		d.log.Info("slack configured", slog.String("mode", sc.Mode), slog.String("api_url", sc.APIURL))
	}
	return ts, nil
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
		if d.sandbox == nil {
			return 0, nil
		}
		if ok, _ := d.sandbox.Available(); ok {
			return 1, nil
		}
		return 0, nil
	})
}

func (d *Daemon) routes() http.Handler {
	api := http.NewServeMux()
	if d.opts.Console {
		local.New(d.intake, d.store, d.log).Mount(api)
	}
	ao := admin.Options{Store: d.store, Intake: d.intake, Logger: d.log}
	if rr, ok := d.runner.(admin.Rights); ok {
		ao.Rights = rr
	}
	if d.opts.Agents != nil {
		ao.Agents = agentCatalog{d.opts.Agents}
	}
	if rs, ok := d.runner.(admin.ThreadResetter); ok {
		ao.Threads = rs
	}
	if d.runtime.Audit != nil {
		ao.Audit = auditLog{d.runtime.Audit}
	}
	if d.runtime.Approvals != nil {
		ao.Approvals = approvalDesk{d.runtime.Approvals}
	}
	admin.New(ao).Mount(api)

	mux := http.NewServeMux()
	// Every /api/v1 call is for this daemon (Host), from no other site
	// (Origin, Sec-Fetch-Site), authenticated (bearer token) and, with a
	// body, JSON; its answer shows no secret.
	mux.Handle("/api/", httpapi.Guard(d.site.Load, httpapi.Authenticate(d.tokens,
		httpapi.RequireJSON(httpapi.Redact(d.redactor, api)))))
	// Webhooks authenticate with their platform's signature, not the API token.
	if d.github != nil {
		mux.Handle("POST /webhooks/github", d.github)
	}
	if d.slack != nil && d.opts.Slack.Mode == config.SlackHTTP {
		mux.Handle("/slack/", d.slack.Handler())
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.JSON(w, http.StatusOK, map[string]string{"status": "ok", "version": d.opts.Version})
	})
	// Open to anyone: a down source's reason is an error's text, masked
	// like every answer. Metrics carry only names, codes and numbers.
	mux.Handle("GET /readyz", httpapi.Redact(d.redactor, http.HandlerFunc(d.ready)))
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{}))
	return mux
}

// readiness is the body of /readyz.
type readiness struct {
	Status string `json:"status"` // ready, degraded, or why it is not ready
	// Down names each source that is down, with why; webhooks and the API
	// are served meanwhile.
	Down map[string]string `json:"down,omitempty"`
}

// ready answers /readyz: 503 when the daemon cannot take work at all (the
// store or the workers), 200 otherwise. A source that is down (Slack's
// Socket Mode reconnecting) makes the answer "degraded" and is named, but
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
	httpapi.JSON(w, http.StatusOK, out)
}

// Handler is the daemon's HTTP surface.
func (d *Daemon) Handler() http.Handler { return d.handler }

// Intake is where sources hand events.
func (d *Daemon) Intake() *bot.Intake { return d.intake }

// Store is the daemon's store.
func (d *Daemon) Store() *bolt.Store { return d.store }

// Registry is the daemon's Prometheus registry.
func (d *Daemon) Registry() *prometheus.Registry { return d.registry }

// ListenAndServe listens on Options.Listen and serves until ctx ends.
func (d *Daemon) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.opts.Listen)
	if err != nil {
		d.store.Close()
		// net's error repeats the operation and the address ("listen tcp
		// 127.0.0.1:8080: bind: …"): say them once.
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return fmt.Errorf("listen on %s: %w", d.opts.Listen, err)
	}
	return d.Serve(ctx, ln)
}

// Serve runs the daemon on ln until ctx ends, then shuts down in order:
// stop intake, let running jobs finish or release their leases, flush the
// outbox, close the store. It returns nil after a clean shutdown.
func (d *Daemon) Serve(ctx context.Context, ln net.Listener) error {
	// The port is known now (a listen address may have asked for any).
	site, err := httpapi.NewSite(ln.Addr().String(), d.opts.PublicURL)
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
	work.Go(func() { d.expireDedup(workCtx) })
	delivery.Go(func() { _ = d.deliverer.Run(deliverCtx) })
	if d.slack != nil {
		work.Go(func() {
			if err := d.slack.Run(workCtx); err != nil {
				d.log.Error("slack stopped", slog.String("error", err.Error()))
			}
		})
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	d.log.Info("switchyard serving", slog.String("listen", ln.Addr().String()), slog.String("data", d.store.Path()),
		slog.String("version", d.opts.Version), slog.Bool("console", d.opts.Console))

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

// expireDedup forgets old delivery ids once an hour.
func (d *Daemon) expireDedup(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := d.store.ExpireDedup(ctx, time.Now()); err != nil && ctx.Err() == nil {
			d.log.Warn("expire dedup keys", slog.String("error", err.Error()))
		} else if n > 0 {
			d.log.Info("expired dedup keys", slog.Int("count", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close releases the store of a daemon that was never served.
func (d *Daemon) Close() error { return d.store.Close() }

// agentCatalog shows the agent manager to the admin API.
type agentCatalog struct{ m *agents.Manager }

func (c agentCatalog) ListAgents() any { return c.m.Summaries() }

func (c agentCatalog) GetAgent(name string) (any, bool) {
	d, ok := c.m.Get(name)
	if !ok {
		return nil, false
	}
	return d.Detail(), true
}

// agentNames lists agent names for chat commands.
func (d *Daemon) agentNames(context.Context) ([]string, error) {
	if d.opts.Agents == nil {
		return nil, nil
	}
	var names []string
	for _, a := range d.opts.Agents.List() {
		names = append(names, a.Name)
	}
	return names, nil
}
