package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/switchyard/switchyard/agents"
	"github.com/switchyard/switchyard/agents/tools"
	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
	"github.com/switchyard/switchyard/skills/install"
)

// PackagesDir is where installed packages live inside the data directory,
// one directory each, <name>@<version>.
const PackagesDir = "packages"

// permissionNames are the permissions a package's command tools may
// declare: the tools' own.
func permissionNames() []string {
	var out []string
	for _, p := range tools.AllPermissions() {
		out = append(out, string(p))
	}
	return out
}

// buildSkills opens the package registry over the store (the built-in
// packages, the installed ones, the settings made with the CLI) with the
// config's settings, and the installer that adds to it. A config setting
// that names nothing installed, or settings a package's schema refuses,
// stop the start like any other config error, at its line.
func (d *Daemon) buildSkills(ctx context.Context) error {
	load := skills.LoadOptions{Masker: d.redactor, Permissions: permissionNames()}
	reg, err := skills.NewRegistry(ctx, skills.Options{
		Store: d.store, Masker: d.redactor, Permissions: load.Permissions, Version: d.opts.Version, Logger: d.log,
		KnownTools: func() []string {
			return slices.Concat(ToolNames(d.config.Current().Config), agents.ReservedToolNames())
		},
		// A package whose command tools need what the agents that would
		// run them lack is refused when it is enabled.
		CheckEnable: d.checkEnable,
		// A change stored here is put in effect on the replicas sharing
		// the store, as a stored routing rule is.
		Stored: func() { d.notify(bot.TopicSkills, d.replica) },
	})
	if err != nil {
		return err
	}
	cfg := d.opts.Setup.Config
	if err := reg.SetConfig(cfg.SkillSettings()); err != nil {
		return cfg.SkillErrors(err)
	}
	in, err := install.New(ctx, install.Options{
		Registry: reg, Dir: filepath.Join(cfg.DataDir, PackagesDir), Load: load, Logger: d.log,
	})
	if err != nil {
		return err
	}
	d.skills, d.installer = reg, in
	return nil
}

// prepareSkills checks the skills section of next against the packages
// installed; its commit puts the settings in effect for the next run.
func (d *Daemon) prepareSkills(_ context.Context, prev, next *Setup) (func(), error) {
	if prev != nil && prev.Config == next.Config {
		// A refresh after the packages changed: the config, and so its
		// settings, are those in effect already. Setting them again would
		// be a change of the packages, and another refresh.
		return func() {}, nil
	}
	list := next.Config.SkillSettings()
	if err := d.skills.CheckConfig(list); err != nil {
		return nil, next.Config.SkillErrors(err)
	}
	if prev != nil && reflect.DeepEqual(prev.Config.SkillSettings(), list) {
		// Unchanged: setting them again would only make the packages
		// change, and the coordinator refresh once more.
		return func() {}, nil
	}
	return func() {
		if err := d.skills.SetConfig(list); err != nil {
			// Only a package uninstalled between the check and now.
			d.log.Error("skills settings of the reloaded config: " + err.Error())
		}
	}, nil
}

// builtinTools are the tools every daemon registers beside the core ones:
// spec_kit, of the built-in specification-engine package.
func builtinTools() []tools.Tool { return []tools.Tool{tools.NewSpecKit(nil)} }

func builtinToolNames() []string {
	var out []string
	for _, t := range builtinTools() {
		out = append(out, t.Info().Name)
	}
	return slices.Clip(out)
}

// skillNames lists the skills for Slack's /switchyard skills.
func (d *Daemon) skillNames(context.Context) ([]string, error) {
	if d.skills == nil {
		return nil, nil
	}
	var names []string
	for _, s := range d.skills.Skills() {
		names = append(names, s.Name)
	}
	return names, nil
}

// refreshSkills puts the skill settings another replica sharing the store
// changed in effect here: the registry reads them again and, when they
// differ, swaps its catalog and tells its subscribers, as for a change
// made here.
func (d *Daemon) refreshSkills(ctx context.Context) {
	changed, err := d.skills.RefreshSettings(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.LogAttrs(ctx, slog.LevelWarn, "look for skill settings changed on another replica", slog.String("error", err.Error()))
	case changed:
		d.log.LogAttrs(ctx, slog.LevelInfo, "skill settings changed on another replica are in effect here")
	}
}
