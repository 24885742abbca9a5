package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/agents/policy"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/daemon"
	"github.com/switchyard/switchyard/integrations/github"
	"github.com/switchyard/switchyard/integrations/slack"
)

func newExplainCmd(cl *clientFlags) *cobra.Command {
	var (
		cfgPath, source, kind, text, repo, actor, channel string
		delivery, workItem, permission                    string
		labels, paths                                     []string
		number                                            int
		isBot, asJSON, live                               bool
	)
	cmd := &cobra.Command{
		Use:   "explain [flags]",
		Short: "Show what intake would do with an event, offline, from config",
		Long: "Show whether an event would make a work item, for which agent and why, or why not, from\n" +
			"the config file alone, without a running daemon and without acting on anything. The\n" +
			"decision is the intake's own, the sources' rules included (GitHub acts only on mentions,\n" +
			"commands and rules, ignores bots, needs github.min_permission; Slack's allow lists).\n" +
			"What cannot be known offline, such as a GitHub permission, is named as a condition.",
		Example: `  switchyard explain --text "@coder fix the flaky test"
  switchyard explain --text "/deploy staging"
  switchyard explain --source github --kind github.pull_request.opened --repo acme/api --path src/db/x.sql
  switchyard explain --delivery 72d3f0e0-1c2b-11ef-8c3a-5e0d7a1b2c3d
  switchyard explain --work-item wi_12`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Each asks something else; cobra's flag groups would say
			// so with Go's lists and exit 1.
			for _, pair := range [][2]string{{"delivery", "work-item"}, {"daemon", "delivery"}, {"daemon", "work-item"}} {
				if cmd.Flags().Changed(pair[0]) && cmd.Flags().Changed(pair[1]) {
					return withCode(exitUsage, fmt.Errorf("--%s and --%s cannot go together: give one of them", pair[0], pair[1]))
				}
			}
			for _, f := range []string{"delivery", "work-item"} {
				if cmd.Flags().Changed(f) && strings.TrimSpace(cmd.Flags().Lookup(f).Value.String()) == "" {
					// Not an event described by nothing: a stored one
					// was meant, and none is named.
					return withCode(exitUsage, fmt.Errorf("--%s is empty: give the id of a stored delivery or work item", f))
				}
			}
			if delivery != "" || workItem != "" {
				if cmd.Flags().Changed("source") && delivery == "" {
					return withCode(exitUsage, fmt.Errorf("--source goes with --delivery"))
				}
				for _, f := range []string{"kind", "text", "label", "repo", "path", "actor", "permission", "bot", "channel", "number"} {
					if cmd.Flags().Changed(f) {
						return withCode(exitUsage, fmt.Errorf("--%s describes an event; --delivery and --work-item explain a stored one", f))
					}
				}
				if cfgPath != "" {
					cl.config = cfgPath // the daemon's, for its API token
				}
				req := map[string]string{"work_item_id": workItem, "delivery_id": delivery}
				if delivery != "" && cmd.Flags().Changed("source") {
					req["source"] = source
				}
				var rep bot.Replay
				if err := cl.client().do(cmd.Context(), "POST", "/api/v1/explain", req, &rep); err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), rep)
				}
				printReplay(cmd.OutOrStdout(), rep)
				return nil
			}
			if kind == "" {
				kind = bot.DefaultKind(source)
			}
			ev := &bot.Event{
				Source: source, Kind: kind, Text: text, Labels: labels, Repo: repo, Paths: paths,
				Actor: actor, ActorIsBot: isBot, Channel: channel, Number: number,
				Addressed: source == bot.SourceLocal || kind == bot.KindSlackMention,
				Requester: bot.Requester{Source: source, ID: actor, Permission: permission},
			}
			if source == bot.SourceLocal && actor == "" {
				ev.Requester.ID = "local" // what the console records for a message without a user
			}
			if err := explainFlags(ev, permission); err != nil {
				return withCode(exitUsage, err)
			}
			if owner, name, ok := strings.Cut(repo, "/"); ok {
				ev.Org = owner
				if number > 0 {
					ev.Thread = bot.GitHubThread(owner, name, number)
				}
			}
			if live {
				// The daemon's own intake decides, with its packages.
				if cfgPath != "" {
					cl.config = cfgPath
				}
				var e bot.Explanation
				if err := cl.client().do(cmd.Context(), "POST", "/api/v1/explain", ev, &e); err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), e)
				}
				fmt.Fprintln(cmd.OutOrStdout(), e)
				return nil
			}
			s, err := loadSetup(cmd.Context(), cfgPath, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			d, err := offlineIntake(s).Decide(cmd.Context(), ev)
			if err != nil {
				return err
			}
			e := d.Explain()
			if err := offlineRights(s, &e, ev.Requester); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), e)
			}
			fmt.Fprintln(cmd.OutOrStdout(), e)
			return nil
		},
	}
	f := cmd.Flags()
	addConfigFlag(cmd, &cfgPath)
	f.StringVar(&source, "source", bot.SourceLocal, "event source: local, github, slack or schedule")
	f.StringVar(&kind, "kind", "", "event kind, e.g. github.pull_request.opened (default: local.message, slack.app_mention, github.issue_comment.created)")
	f.StringVar(&text, "text", "", "message text, with mentions and commands")
	f.StringArrayVar(&labels, "label", nil, "a label (repeatable)")
	f.StringVar(&repo, "repo", "", "repository owner/name")
	f.StringArrayVar(&paths, "path", nil, "a changed file of a pull request (repeatable)")
	f.StringVar(&actor, "actor", "", "who sent it: a GitHub login, a Slack member id, a console user, a schedule's name")
	f.StringVar(&permission, "permission", "", "the actor's permission on the GitHub repository (read, triage, write, maintain, admin), held to github.min_permission and giving the rights; default: what github.min_permission asks of a mention or command, named as a condition")
	f.BoolVar(&isBot, "bot", false, "the actor is a bot")
	f.StringVar(&channel, "channel", "", "Slack channel id")
	f.IntVar(&number, "number", 0, "issue or pull request number")
	f.StringVar(&delivery, "delivery", "", "explain a stored delivery again (a GitHub delivery id, a Slack event id, a console message id), asking the running daemon")
	f.StringVar(&workItem, "work-item", "", "explain the event a work item was made from again, asking the running daemon")
	f.BoolVar(&live, "daemon", false, "decide with the running daemon's intake, whose routes include the rules made through the API or the admin UI and its packages' entry points")
	f.BoolVar(&asJSON, "json", false, `print {"work_item","agent","kind","reason","rule","ingress","needs","rights"}, or {"then","now","differs",…} for a stored event`)
	return cmd
}

// explainFlags says what is wrong with the event the flags describe, each
// problem naming its flag, and gives the requester the permission as
// GitHub spells it.
func explainFlags(ev *bot.Event, permission string) error {
	var errs, problems []error
	if j, ok := ev.CheckDescribed().(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	}
	for _, e := range problems {
		var fe *bot.FieldError
		if errors.As(e, &fe) {
			e = fmt.Errorf("--%s: %s", fe.Field, fe.Msg)
		}
		errs = append(errs, e)
	}
	if permission != "" {
		p, err := github.ParsePermission(permission)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s", bot.ErrorMessage(err)))
		}
		ev.Requester.Permission = string(p)
	}
	return errors.Join(errs...)
}

// printReplay shows what was decided for a stored event then and now.
func printReplay(w io.Writer, r bot.Replay) {
	what := r.Source + " " + r.Kind
	if r.DeliveryID != "" {
		what += " (delivery " + r.DeliveryID + ")"
	}
	if !r.Thread.IsZero() {
		what += " in " + r.Thread.Key()
	}
	made := "no work item"
	switch {
	case r.WorkItemID != "":
		made = r.WorkItemID
	case r.IngressID != "":
		made = r.IngressID
	}
	fmt.Fprintln(w, what)
	fmt.Fprintf(w, "then: %s → %s\n", made, r.Then)
	fmt.Fprintf(w, "now:  %s\n", r.Now)
	if r.Differs {
		fmt.Fprintln(w, "The config in effect now decides otherwise.")
	} else {
		fmt.Fprintln(w, "The config in effect now decides the same.")
	}
}

// offlineRights adds to e what its agent may do for requester, from the
// config alone. A GitHub requester's permission, unknown offline, is taken
// to be what the decision is conditional on (github.min_permission for a
// mention or a command) unless --permission says.
func offlineRights(s *daemon.Setup, e *bot.Explanation, requester bot.Requester) error {
	if !e.WorkItem {
		return nil
	}
	def, ok := s.Agents.Get(e.Agent)
	if !ok {
		return nil
	}
	engine, err := policy.New(policy.Options{Profiles: s.Config.Profiles, Access: s.Config.Access})
	if err != nil {
		return withCode(exitUsage, s.Config.Positioned(err))
	}
	if requester.Source == bot.SourceGitHub && requester.Permission == "" && e.Needs != "" {
		requester.Permission = string(github.DefaultMinPermission)
		if s.Config.GitHub != nil {
			requester.Permission = s.Config.GitHub.MinPermission
		}
	}
	rights := engine.Effective(def.Name, def.Profile, []bot.Ceiling{engine.Ceiling(requester)})
	e.Rights = &rights
	return nil
}

// offlineIntake decides like the daemon's intake, with the sources' gates
// built from the config alone: nothing is stored, no platform is asked, and
// what only a platform could answer (a GitHub permission) or the
// description leaves out (a Slack author on an allow list) is named as a
// condition of the decision.
func offlineIntake(s *daemon.Setup) *bot.Intake {
	gopts := github.GateOptions{Offline: true}
	if gc := s.Config.GitHub; gc != nil {
		gopts.AppSlug, gopts.AllowBots = gc.AppSlug, gc.AllowBots
		gopts.MinPermission = github.Permission(gc.MinPermission)
	}
	var channels, users []string
	if sc := s.Config.Slack; sc != nil {
		channels, users = sc.AllowedChannels, sc.AllowedUsers
	}
	return bot.NewIntake(bot.IntakeOptions{Router: s.Router, Gates: map[string]bot.Gate{
		bot.SourceGitHub: github.NewGate(gopts),
		bot.SourceSlack:  slack.NewOfflineGate(channels, users),
	}})
}

func newRulesCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "rules", Short: "Inspect routing rules"}
	var (
		cfgPath      string
		asJSON, live bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List routing rules in the order they are tried, with commands and the default agent",
		Long: "List the routing rules in the order they are tried (priority, then the config's in file\n" +
			"order before stored ones), with where each is written, the commands and the default agent,\n" +
			"from the config file alone; with --daemon, those of the running daemon, which include the\n" +
			"rules made through the API or the admin UI (origin stored:<id>) and the entry points\n" +
			"(commands and event triggers) of the packages it has installed. An entry point routes only\n" +
			"where its package is enabled.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rules admin.Rules
			if live {
				if cfgPath != "" {
					cl.config = cfgPath // the daemon's, for its API token
				}
				if err := cl.client().do(cmd.Context(), "GET", "/api/v1/rules", nil, &rules); err != nil {
					return err
				}
			} else {
				s, err := loadSetup(cmd.Context(), cfgPath, slog.New(slog.DiscardHandler))
				if err != nil {
					return err
				}
				rules = admin.RulesOf(s.Router)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, rules)
			}
			printRules(out, rules)
			if !live {
				fmt.Fprintln(cmd.ErrOrStderr(), "From the config file alone; rules made in the admin UI or through the API are the daemon's: switchyard rules list --daemon")
			}
			return nil
		},
	}
	addConfigFlag(list, &cfgPath)
	list.Flags().BoolVar(&asJSON, "json", false, `print {"rules","commands","default_agent","entrypoints"}`)
	list.Flags().BoolVar(&live, "daemon", false, "ask the running daemon: its rules include its packages' entry points")
	cmd.AddCommand(list)
	return cmd
}

// printRules shows a routing table: the rules with where each comes from,
// the commands, the default agent.
func printRules(out io.Writer, rules admin.Rules) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRIORITY\tRULE\tAGENT\tORIGIN\tMATCH")
	for _, r := range rules.Rules {
		origin := r.Origin
		if r.CreatedBy != "" {
			origin += " by " + r.CreatedBy
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Priority, r.Name, r.Agent, origin, r.Match)
	}
	_ = tw.Flush()
	if len(rules.Rules) == 0 {
		fmt.Fprintln(out, "(no rules)")
	}
	origin := map[string]string{}
	for _, ep := range rules.Entrypoints {
		for _, c := range ep.Commands {
			origin[c] = ep.Origin
		}
	}
	fmt.Fprintln(out, "\ncommands:")
	for _, n := range slices.Sorted(maps.Keys(rules.Commands)) {
		line := fmt.Sprintf("  /%s → %s", n, rules.Commands[n])
		if o := origin[n]; o != "" {
			line += " (" + o + ", where it is enabled)"
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "default agent: %s\n", rules.DefaultAgent)
}

func newConfigCmd(cl *clientFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check the config file, or reload it in the running daemon"}
	var cfgPath string
	check := &cobra.Command{
		Use:   "check",
		Short: "Check the config file, agents and models as serve does; exit 2 naming file, line and key on error",
		Long: "Check the config file, the agent definitions and the models exactly as `switchyard serve`\n" +
			"and a reload do, with the same messages: a config that check accepts, serve starts with.\n" +
			"Without models in the config, a model is looked for in the environment, as serve does.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadSetup(cmd.Context(), cfgPath, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			var names []string
			for _, a := range s.Agents.List() {
				names = append(names, a.Name)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s: ok (%s, %s; agents: %s; models: %s)\n", s.Config.Source,
				bot.Count(len(s.Router.Rules()), "rule", "rules"), bot.Count(len(s.Config.Schedules), "schedule", "schedules"),
				strings.Join(names, ", "), listOrNone(s.Models.Names()))
			switch {
			case !s.ModelFound:
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s; agents cannot run until a model is configured\n", s.ModelNote)
			case s.ModelNote != "":
				fmt.Fprintln(out, s.ModelNote)
			}
			return nil
		},
	}
	addConfigFlag(check, &cfgPath)
	reload := &cobra.Command{
		Use:   "reload",
		Short: "Make the running daemon read its config, agents and rules again (as SIGHUP does)",
		Long: "Make the running daemon read its config file, agent definitions and rules again, check\n" +
			"them as at start, and put them in effect without a restart. A config with problems is\n" +
			"refused: they are printed as file:line: path: why, the exit status is 2, and the config\n" +
			"in effect stays. Settings only a restart changes (server, data_dir, workers, dispatch,\n" +
			"GitHub and Slack credentials) are named and keep their values until then.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res daemon.ReloadResult
			err := cl.client().do(cmd.Context(), "POST", "/api/v1/config/reload", nil, &res, "config")
			var ae *apiError
			if errors.As(err, &ae) && ae.Code == bot.EINVALID {
				return withCode(exitUsage, errors.New(ae.Message))
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(res.Changed) == 0 {
				fmt.Fprintf(out, "%s reloaded: nothing changed\n", res.Config)
			} else {
				fmt.Fprintf(out, "%s reloaded: %s changed\n", res.Config, strings.Join(res.Changed, ", "))
			}
			if len(res.RestartRequired) > 0 {
				fmt.Fprintf(out, "takes effect at the next start: %s\n", strings.Join(res.RestartRequired, ", "))
			}
			return nil
		},
	}
	cmd.AddCommand(check, reload)
	return cmd
}

func listOrNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
