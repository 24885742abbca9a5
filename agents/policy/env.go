package policy

import (
	"fmt"
	"path"
	"strings"
)

// Environment variables change what programs run and read: a pager or an
// editor is a command line, LD_PRELOAD loads code, GIT_CONFIG_* is git
// configuration, PATH makes a name run another program. The policy knows
// which variables are data; any other a profile without exec may not set
// for a program (deny by default). For a profile with exec, variables
// whose value is a command line are checked as that command, git
// configuration as git -c would be, paths against the path policy, and the
// variables that break the policy's own view of the script (CDPATH, PWD,
// OLDPWD) are refused.

// envClass is what a variable does to the programs that read it.
type envClass uint8

const (
	envUnknown   envClass = iota
	envData               // formatting, identity, locale: any profile
	envCommand            // a command line or program a program runs
	envPrompt             // a prompt bash expands, running its substitutions
	envCode               // makes programs load code or read configuration
	envGitConfig          // git configuration
	envGitFile            // a git configuration file
	envPath               // a path programs read
	envWritePath          // a path programs write
	envCd                 // changes where cd goes
	envShell              // changes how the shell finds and splits things
)

// classifyEnv says what a variable is.
func classifyEnv(name string) envClass {
	switch name {
	case "LANG", "LANGUAGE", "TZ", "NO_COLOR", "TERM", "COLUMNS", "LINES", "CLICOLOR", "CLICOLOR_FORCE",
		"FORCE_COLOR", "GREP_COLOR", "GREP_COLORS", "POSIXLY_CORRECT", "LS_COLORS", "TIME_STYLE", "QUOTING_STYLE",
		"TABSIZE", "BLOCK_SIZE", "DU_BLOCK_SIZE", "LESSCHARSET", "MANWIDTH", "CI", "DEBIAN_FRONTEND",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
		"GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_LITERAL_PATHSPECS",
		"GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS", "GIT_ICASE_PATHSPECS", "GIT_FLUSH", "GIT_MERGE_VERBOSITY",
		"GIT_NO_REPLACE_OBJECTS", "GIT_ADVICE", "GIT_CONFIG_NOSYSTEM", "GIT_DEFAULT_HASH", "GIT_PROGRESS_DELAY",
		"GIT_REDACT_COOKIES", "GIT_NO_LAZY_FETCH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
		"PYTHONIOENCODING", "PYTHONHASHSEED", "PYTHONUTF8", "RUST_BACKTRACE", "RUST_LOG", "NODE_ENV",
		"HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "HISTIGNORE", "HISTTIMEFORMAT", "TIMEFORMAT", "OPTERR",
		"OPTIND", "REPLY", "MAILCHECK", "TMOUT", "USER", "LOGNAME":
		return envData
	case "PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER", "BAT_PAGER", "DELTA_PAGER", "EDITOR", "VISUAL",
		"GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "FCEDIT", "SUDO_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_SSH",
		"GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "GIT_PROXY_COMMAND", "BROWSER",
		"PROMPT_COMMAND", "LESSOPEN", "LESSCLOSE", "RSYNC_RSH", "RSYNC_CONNECT_PROG", "CVS_RSH", "SHELL",
		"CC", "CXX", "CPP", "LD", "AR", "AS", "RUSTC_WRAPPER", "GIT_SEQUENCE_EDITOR_COMMAND", "LESSEDIT",
		"TAR_SUBCOMMAND", "MAKE", "GIT_EXEC", "DIFF", "MANROFFSEQ", "GROFF_COMMAND":
		return envCommand
	case "PS0", "PS1", "PS2", "PS3", "PS4":
		return envPrompt
	case "BASH_ENV", "ENV", "BASH_LOADABLES_PATH", "SHELLOPTS", "BASHOPTS", "PYTHONSTARTUP", "PYTHONPATH",
		"PYTHONHOME", "PYTHONINSPECT", "PYTHONEXECUTABLE", "PYTHONUSERBASE", "PYTHONWARNINGS", "PERL5OPT",
		"PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
		"NODE_REPL_EXTERNAL_MODULE", "TAR_OPTIONS", "GZIP", "BZIP2", "BZIP", "XZ_OPT", "XZ_DEFAULTS",
		"ZIPOPT", "UNZIP", "UNZIPOPT", "ZIPINFO", "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKEFILES", "LESS",
		"LESSKEY", "LESSKEYIN", "LESSKEY_CONTENT", "LESSKEY_SRC", "LESSSECURE_ALLOW", "MANOPT", "MANPATH",
		"GREP_OPTIONS", "RIPGREP_CONFIG_PATH", "GOFLAGS", "GOTOOLCHAIN", "RUSTFLAGS", "XDG_CONFIG_HOME",
		"XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR",
		"SSH_AUTH_SOCK", "PARALLEL", "ACKRC", "JQ_LIBRARY_PATH", "SQLITE_HISTORY", "WGETRC", "CURL_HOME",
		"GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_ALLOW_PROTOCOL",
		"GIT_PROTOCOL_FROM_USER", "GIT_SHALLOW_FILE", "GIT_REPLACE_REF_BASE", "GIT_NAMESPACE",
		"GIT_ATTR_SOURCE", "IFS", "GLOBIGNORE", "BASH_XTRACEFD", "BASH_COMPAT", "EXECIGNORE", "INPUTRC",
		"TERMINFO", "TERMCAP", "MAGIC", "LOCPATH", "NLSPATH", "GCONV_PATH", "HOSTALIASES", "RES_OPTIONS",
		"LOCALDOMAIN", "MALLOC_CHECK_", "TMPPREFIX":
		return envCode
	case "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS":
		return envGitConfig
	case "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM":
		return envGitFile
	case "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
		"GNUPGHOME", "KUBECONFIG", "DOCKER_CONFIG":
		return envPath
	case "GIT_INDEX_FILE", "HISTFILE", "TMPDIR", "LESSHISTFILE", "GIT_TRACE", "GIT_TRACE2", "GIT_TRACE2_EVENT",
		"GIT_TRACE2_PERF", "GIT_TRACE_PACKET", "GIT_TRACE_PERFORMANCE", "GIT_TRACE_SETUP", "GIT_TRACE_CURL",
		"GIT_TRACE_PACK_ACCESS", "GIT_TRACE_SHALLOW", "GIT_TRACE_PACKFILE", "GIT_TRACE_FSMONITOR",
		"GIT_TRACE_REFS", "GIT_TRACE_CURL_NO_DATA", "GIT_TRACE_REDACT", "PYTHONPYCACHEPREFIX":
		return envWritePath
	case "CDPATH", "OLDPWD", "PWD":
		return envCd
	case "PATH", "HOME":
		return envShell
	}
	switch {
	case strings.HasPrefix(name, "LC_"):
		return envData
	case strings.HasPrefix(name, "LD_"), strings.HasPrefix(name, "BASH_FUNC_"), strings.HasPrefix(name, "DYLD_"):
		return envCode
	case strings.HasPrefix(name, "GIT_CONFIG_KEY_"), strings.HasPrefix(name, "GIT_CONFIG_VALUE_"):
		return envGitConfig
	case strings.HasPrefix(name, "GIT_TRACE"):
		return envWritePath
	}
	return envUnknown
}

// noopCommand reports a pager or editor value that runs nothing: the
// output is printed, the file kept as it is.
func noopCommand(v string) bool {
	switch strings.TrimSpace(v) {
	case "", "cat", "true", ":", "/bin/cat", "/usr/bin/cat", "/bin/true", "/usr/bin/true":
		return true
	}
	return false
}

// sandboxVar reports a variable the sandbox sets for every command: the
// home, which is not the workspace, and git's global configuration, which
// keeps git off a bare repository it comes upon. No command may change,
// unexport or remove them, whatever its profile: the workspace would
// configure the programs it runs again.
func sandboxVar(name string) bool {
	switch name {
	case "HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM":
		return true
	}
	return false
}

// sandboxVarDeny refuses what a command would do to the variables the
// sandbox sets ("setting HOME", "env -i").
func (c *checker) sandboxVarDeny(what string) {
	c.denyf("shell:sandbox-environment", "%s is not allowed: the sandbox sets HOME, GIT_CONFIG_GLOBAL and GIT_CONFIG_NOSYSTEM so that no file in the workspace configures the programs a command runs", what)
}

// envDeny refuses setting a variable.
func (c *checker) envDeny(name, why string, missing perms) {
	if missing != 0 {
		c.denyf("shell:environment", "setting %s is not allowed: %s (needs the %s permission)", name, why, missing)
		return
	}
	c.denyf("shell:environment", "setting %s is not allowed: %s", name, why)
}

// envNeed checks that the profile grants bits for setting a variable.
func (c *checker) envNeed(name, why string, bits perms) bool {
	if missing := bits &^ c.perms; missing != 0 {
		c.envDeny(name, why, missing)
		return false
	}
	c.used |= bits
	return true
}

// sensitiveAssign checks a variable a builtin assigns a value the policy
// does not see (read NAME, printf -v NAME, a for loop's variable): it
// reports whether that was refused.
func (c *checker) sensitiveAssign(name string, exported bool) bool {
	return !c.envAssign(name, dynWord("a value the policy cannot see", name), true, exported)
}

// envAssign checks setting name to val (hasVal: a value is given). It
// reports whether the check may go on.
func (c *checker) envAssign(name string, val word, hasVal, exported bool) bool {
	if c.deny != nil {
		return false
	}
	if sandboxVar(name) && !(name == "GIT_CONFIG_NOSYSTEM" && hasVal && val.lit && val.s == "1") {
		c.sandboxVarDeny("setting " + name)
		return false
	}
	if name == "BASH_CMDS" || name == "BASH_ALIASES" {
		// bash's command hash and aliases, as arrays: BASH_CMDS[ls]=/bin/rm
		// makes ls run rm.
		c.envDeny(name, "it makes a command's name run another program or command, which the policy could not follow", 0)
		return false
	}
	class := classifyEnv(name)
	switch class {
	case envData:
		if name == "TZ" && hasVal {
			c.tzValue(val)
			return c.deny == nil
		}
		return true
	case envUnknown:
		if !exported {
			// A shell variable, which programs do not see.
			return true
		}
		if strings.HasPrefix(name, "GIT_") {
			return c.envNeed(name, "git reads it, and the policy does not know what it does", pExec|pCI)
		}
		return c.envNeed(name, "environment variables change what programs run and read", pExec)
	case envCd:
		c.envDeny(name, "it changes where cd goes, which the policy must follow", 0)
		return false
	}
	if hasVal && val.lit && (class == envCommand) && noopCommand(val.s) {
		return true
	}
	if hasVal && val.lit && val.s == "/dev/null" && (class == envGitFile || class == envWritePath) {
		return true
	}
	switch class {
	case envCommand:
		if !c.envNeed(name, "its value is a command that programs run", pExec) || !hasVal {
			return c.deny == nil
		}
		return c.envCommandValue(name, val)
	case envPrompt:
		if !c.envNeed(name, "bash expands it and runs the commands in it", pExec) || !hasVal {
			return c.deny == nil
		}
		return c.promptValue(name, val)
	case envCode:
		if name == "IFS" {
			c.ifsSet = true
		}
		bits := pExec
		if strings.HasPrefix(name, "GIT_") || strings.HasPrefix(name, "XDG_CONFIG") {
			bits |= pCI
		}
		if !c.envNeed(name, "it makes programs load code or read configuration", bits) {
			return false
		}
		if (name == "BASH_ENV" || name == "ENV") && hasVal {
			// A shell runs the file it names before its own script.
			inv := c.invocation(invocation{name: "bash", cwd: c.curDirs})
			c.runProgram(inv, c.fileProgram(val, c.curDirs), langShell, c.curDirs, false)
		}
		return c.deny == nil
	case envGitConfig:
		return c.gitConfigEnv(name, val, hasVal)
	case envGitFile:
		if !c.envNeed(name, "git reads configuration from it, which can run programs", pExec|pCI) {
			return false
		}
		if hasVal {
			c.envPathValue(name, val, accRead)
		}
		return c.deny == nil
	case envPath, envWritePath:
		if strings.HasPrefix(name, "GIT_TRACE") && hasVal && val.lit && traceSwitch(val.s) {
			return true
		}
		if !c.envNeed(name, "it points programs at other files", pExec) {
			return false
		}
		if hasVal {
			acc := accRead
			if class == envWritePath {
				acc = accWrite
			}
			c.envPathValue(name, val, acc)
			if name == "GIT_DIR" || name == "GIT_COMMON_DIR" {
				c.gitDirConfig(val, c.curDirs)
			}
		}
		return c.deny == nil
	case envShell:
		switch name {
		case "PATH":
			if !c.envNeed(name, "programs then resolve to other files", pExec) {
				return false
			}
			if len(c.p.denyCmds) > 0 || len(c.p.approvalCmds) > 0 {
				c.envDeny(name, fmt.Sprintf("a command could then run under another name, which the rules of profile %q could not follow", c.p.Name), 0)
				return false
			}
			c.pathSet = true
		}
		return true
	}
	return true
}

// traceSwitch reports a GIT_TRACE value that turns tracing on or off
// rather than naming a file.
func traceSwitch(v string) bool {
	switch strings.ToLower(v) {
	case "", "0", "1", "2", "true", "false", "yes", "no", "on", "off":
		return true
	}
	return isDigits(v)
}

// envCommandValue checks the command a variable's value runs.
func (c *checker) envCommandValue(name string, val word) bool {
	if !val.lit {
		c.denyf("shell:dynamic-script", "setting %s to %s is not allowed: its value is a command that programs run, and it is not a literal (it contains %s)", name, val.source(), val.dyn)
		return false
	}
	cmd := val.s
	if name == "LESSOPEN" || name == "LESSCLOSE" {
		cmd = strings.TrimLeft(cmd, "|-")
		cmd = strings.ReplaceAll(cmd, "%s", "file")
	}
	if strings.TrimSpace(cmd) == "" {
		return true
	}
	c.fedText(cmd, c.curDirs, "the program that runs "+name)
	return c.deny == nil
}

// promptValue checks a prompt string: bash expands it, substitutions and
// all.
func (c *checker) promptValue(name string, val word) bool {
	if !val.lit {
		c.denyf("shell:dynamic-script", "setting %s to %s is not allowed: bash expands it, and it is not a literal", name, val.source())
		return false
	}
	if !strings.ContainsAny(val.s, "$`") {
		return true
	}
	c.reader.Reset(val.s)
	doc, err := c.parser.Document(&c.reader)
	if err != nil {
		c.denyf("shell:code", "setting %s is not allowed: its value does not parse as a prompt the policy can check", name)
		return false
	}
	outer := c.src
	c.src = val.s
	c.depth++
	c.enter()
	c.subst(doc, c.root[:1])
	c.leave()
	c.depth--
	c.src = outer
	return c.deny == nil
}

// envPathValue checks the paths in a variable's value (a colon-separated
// list for the lists git and the shell read).
func (c *checker) envPathValue(name string, val word, acc access) {
	inv := c.invocation(invocation{name: "setting " + name, cwd: c.root[:1]})
	if !val.lit {
		c.usePath(inv, val, pathUse{acc: acc})
		return
	}
	for _, p := range strings.Split(val.s, ":") {
		if p == "" {
			continue
		}
		c.usePath(inv, litWord(p), pathUse{acc: acc})
		if c.deny != nil {
			return
		}
	}
}

// gitConfigEnv checks git configuration passed in the environment: every
// GIT_CONFIG_* needs what git -c needs, and each key and value is checked
// as git -c KEY=VALUE, pairing GIT_CONFIG_KEY_n with GIT_CONFIG_VALUE_n
// from what the script set.
func (c *checker) gitConfigEnv(name string, val word, hasVal bool) bool {
	switch {
	case name == "GIT_CONFIG_COUNT":
		// The count alone does nothing: the keys and values are checked.
		if hasVal && val.lit && (val.s == "" || isDigits(val.s)) {
			return true
		}
		return c.envNeed(name, "it passes git configuration, which can run programs", pExec|pCI)
	case name == "GIT_CONFIG_PARAMETERS":
		if !hasVal {
			return c.envNeed(name, "it passes git configuration, which can run programs", pExec|pCI)
		}
		if !val.lit {
			c.denyf("shell:dynamic-script", "setting %s to %s is not allowed: it is git configuration the policy cannot see", name, val.source())
			return false
		}
		for _, kv := range splitConfigParameters(val.s) {
			key, v, _ := strings.Cut(kv, "=")
			if !c.gitConfigSetting(key, litWord(v), name) {
				return false
			}
		}
		return true
	}
	n := strings.TrimPrefix(strings.TrimPrefix(name, "GIT_CONFIG_KEY_"), "GIT_CONFIG_VALUE_")
	keyName, valName := "GIT_CONFIG_KEY_"+n, "GIT_CONFIG_VALUE_"+n
	var key string
	var v word
	if name == keyName {
		if !hasVal || !val.lit {
			return c.envNeed(name, "it passes git configuration the policy cannot see", pExec|pCI) && c.deny == nil
		}
		key = val.s
		if pv, ok := c.vals[valName]; ok && pv.kind == valText {
			v = litWord(pv.text)
		} else {
			v = word{lit: true}
		}
	} else {
		pk, ok := c.vals[keyName]
		if !ok || pk.kind != valText {
			// The key is not known: the value may be a command.
			if !c.envNeed(name, "it passes git configuration, which can run programs", pExec|pCI) {
				return false
			}
			if hasVal {
				return c.envCommandValue(name, val)
			}
			return true
		}
		key, v = pk.text, val
	}
	return c.gitConfigSetting(key, v, name)
}

// splitConfigParameters splits GIT_CONFIG_PARAMETERS, a list of
// single-quoted 'key=value' or 'key'='value' items.
func splitConfigParameters(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, any := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			inQuote = !inQuote
			any = true
		case ch == '\\' && !inQuote && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case (ch == ' ' || ch == '\t' || ch == '\n') && !inQuote:
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteByte(ch)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}

// tzValue checks a TZ value: a zone's name is data, but one that starts
// with "/" (after an optional ":") names the file the C library reads,
// and one with ".." leaves the zone directory it is read under.
func (c *checker) tzValue(val word) {
	if !val.lit {
		c.envPathValue("TZ", val, accRead)
		return
	}
	v := strings.TrimPrefix(val.s, ":")
	switch {
	case strings.HasPrefix(v, "/"):
	case strings.Contains(v, ".."):
		v = path.Join("/usr/share/zoneinfo", v)
	default:
		return
	}
	inv := c.invocation(invocation{name: "setting TZ", cwd: c.root[:1]})
	c.usePath(inv, litWord(v), pathUse{acc: accRead})
}
