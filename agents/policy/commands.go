package policy

import (
	"path"
	"slices"
	"strings"
)

// handler checks one command and returns the directories the script may be
// in after it succeeded (only cd and its kin change them).
type handler func(c *checker, inv *invocation) cwds

// opt is one parsed option: "-n", "--output", with its value if it takes
// one.
type opt struct {
	name string
	val  *word
}

// optSpec says which options take a value, so their values are not taken
// for paths or patterns.
type optSpec struct {
	short string   // short options taking a value: "nfo"
	long  []string // long options taking a value when written without =
}

// parseOpts splits args into options and operands the way GNU getopt
// does: options may follow operands, "--" ends them, "-" is an operand. A
// word that is not literal is an operand: it cannot be read as an option.
// Option values and operands point into args, which nothing changes.
func parseOpts(args []word, spec optSpec) (opts []opt, pos []word) {
	// While the operands are one run of args (no option between them, the
	// common case), pos is that run, not a copy.
	ps, pe, copied := 0, 0, false
	operand := func(i int) {
		switch {
		case copied:
			pos = append(pos, args[i])
		case ps == pe:
			ps, pe = i, i+1
		case pe == i:
			pe++
		default:
			pos = make([]word, 0, pe-ps+len(args)-i)
			pos = append(append(pos, args[ps:pe]...), args[i])
			copied = true
		}
	}
	add := func(o opt) {
		if opts == nil {
			opts = make([]opt, 0, 4)
		}
		opts = append(opts, o)
	}
	for i := 0; i < len(args); i++ {
		w := &args[i]
		if !w.lit || w.s == "-" || !strings.HasPrefix(w.s, "-") {
			operand(i)
			continue
		}
		if w.s == "--" {
			for j := i + 1; j < len(args); j++ {
				operand(j)
			}
			break
		}
		if strings.HasPrefix(w.s, "--") {
			name, val, hasVal := strings.Cut(w.s, "=")
			o := opt{name: name}
			switch {
			case hasVal:
				v := litWord(val)
				o.val = &v
			case slices.Contains(spec.long, name) && i+1 < len(args):
				i++
				o.val = &args[i]
			}
			add(o)
			continue
		}
		for j := 1; j < len(w.s); j++ {
			o := opt{name: shortOption(w.s, j)}
			if strings.IndexByte(spec.short, w.s[j]) >= 0 {
				if rest := w.s[j+1:]; rest != "" {
					v := litWord(rest)
					o.val = &v
				} else if i+1 < len(args) {
					i++
					o.val = &args[i]
				}
				add(o)
				break
			}
			add(o)
		}
	}
	if !copied && pe > ps {
		pos = args[ps:pe:pe]
	}
	return opts, pos
}

// shortOption names the short option at cluster[j] ("-l" of "-la"),
// without allocating for letters and digits.
func shortOption(cluster string, j int) string {
	const names = "-0-1-2-3-4-5-6-7-8-9-A-B-C-D-E-F-G-H-I-J-K-L-M-N-O-P-Q-R-S-T-U-V-W-X-Y-Z" +
		"-a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p-q-r-s-t-u-v-w-x-y-z"
	switch b := cluster[j]; {
	case j == 1 && cluster[0] == '-':
		return cluster[:2]
	case '0' <= b && b <= '9':
		return names[2*(b-'0') : 2*(b-'0')+2]
	case 'A' <= b && b <= 'Z':
		i := 10 + int(b-'A')
		return names[2*i : 2*i+2]
	case 'a' <= b && b <= 'z':
		i := 36 + int(b-'a')
		return names[2*i : 2*i+2]
	}
	return "-" + cluster[j:j+1]
}

func hasOpt(opts []opt, names ...string) bool {
	for _, o := range opts {
		if slices.Contains(names, o.name) {
			return true
		}
	}
	return false
}

// subcommands appends to dst, an empty buffer, the words rules match after
// the command name: the first three operands, or for git and gh their
// first two subcommands.
func subcommands(dst []string, name string, args []word) []string {
	switch name {
	case "git":
		_, rest := gitGlobal(args)
		out := dst[:0]
		for _, w := range rest {
			if len(out) == 2 {
				break
			}
			if !w.lit || strings.HasPrefix(w.s, "-") {
				if len(out) == 0 {
					continue
				}
				break
			}
			out = append(out, w.s)
		}
		return out
	case "gh":
		_, pos := parseOpts(args, optSpec{short: "R", long: []string{"--repo", "--hostname"}})
		return literalWords(dst[:0], pos, 2)
	}
	// parseOpts with no option taking a value, then literalWords, without
	// building the operands: options are skipped, "--" makes the rest
	// operands, and the first operand that is not literal ends the words.
	dst = dst[:0]
	for i, w := range args {
		switch {
		case w.lit && w.s == "--":
			return literalWords(dst, args[i+1:], 3)
		case w.lit && w.s != "-" && strings.HasPrefix(w.s, "-"):
			continue
		case len(dst) == 3 || !w.lit:
			return dst
		}
		dst = append(dst, w.s)
	}
	return dst
}

// literalWords appends to dst the values of ws until dst holds n or a word
// is not literal.
func literalWords(dst []string, ws []word, n int) []string {
	for _, w := range ws {
		if len(dst) == n || !w.lit {
			break
		}
		dst = append(dst, w.s)
	}
	return dst
}

// cmdSpec describes a command whose operands are paths.
type cmdSpec struct {
	need  perms
	opts  optSpec
	pos   posRole
	skip  int      // leading operands that are not paths (a mode, a pattern)
	write []string // options whose value is a path written
	read  []string // options whose value is a path read
	exec  []string // options that run another program
	tree  []string // options that make every path a whole tree (-r)
	// follow are options that read trees through their links (-L).
	follow []string
	// writeIf are options that turn a reading command into a writing one
	// (sed -i, gofmt -w).
	writeIf []string
}

type posRole uint8

const (
	posRead      posRole = iota // operands are read
	posWrite                    // operands are written
	posNone                     // operands are not paths
	posLastWrite                // all but the last are read, the last written (cp)
	posAllWrite                 // every operand is written, the last as destination (mv)
)

func (s cmdSpec) handler() handler {
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], s.opts)
		need := s.need
		writing := s.pos == posWrite || s.pos == posLastWrite || s.pos == posAllWrite || hasOpt(opts, s.writeIf...)
		if writing {
			need |= pWrite
		}
		if hasOpt(opts, s.exec...) {
			need |= pExec
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		tree := hasOpt(opts, s.tree...)
		follow := tree && hasOpt(opts, s.follow...)
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch {
			case slices.Contains(s.write, o.name):
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case slices.Contains(s.read, o.name):
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			case o.val.lit && looksLikePath(o.val.s):
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
		if s.skip > 0 {
			pos = pos[min(s.skip, len(pos)):]
		}
		role := s.pos
		if role == posRead && hasOpt(opts, s.writeIf...) {
			role = posWrite
		}
		for i, w := range pos {
			switch {
			case role == posNone:
			case role == posRead:
				c.usePath(inv, w, pathUse{acc: accRead, tree: tree, follow: follow})
			case role == posWrite:
				c.usePath(inv, w, pathUse{acc: accWrite, tree: tree})
			case role == posLastWrite && i < len(pos)-1:
				c.usePath(inv, w, pathUse{acc: accRead, tree: tree})
			case role == posLastWrite:
				c.usePath(inv, w, pathUse{acc: accWrite, tree: tree})
			case role == posAllWrite:
				c.usePath(inv, w, pathUse{acc: accWrite, tree: true})
			}
		}
		return inv.cwd
	}
}

// need returns a handler for a command whose arguments are not paths and
// that needs bits.
func needOnly(bits perms) handler {
	return func(c *checker, inv *invocation) cwds {
		c.need(inv, bits)
		return inv.cwd
	}
}

// runsCode returns a handler for a program that runs code the policy
// cannot see (interpreters, build tools): it needs exec and bits, and its
// arguments that look like paths are checked.
func runsCode(bits perms) handler {
	return func(c *checker, inv *invocation) cwds {
		if c.need(inv, pExec|bits) {
			c.pathLikeArgs(inv, inv.argv[1:])
		}
		return inv.cwd
	}
}

func unknownCommand(c *checker, inv *invocation) cwds {
	if !inv.allowed && !c.perms.has(pExec) {
		c.denyf("permission:exec", "command %q is not allowed (it is not a known read-only command; running other programs needs the exec permission)", inv.name)
		return inv.cwd
	}
	c.used |= pExec
	c.pathLikeArgs(inv, inv.argv[1:])
	return inv.cwd
}

func privileged(c *checker, inv *invocation) cwds {
	c.denyf("shell:privilege", "command %q is never allowed: it runs commands as another user", inv.name)
	return inv.cwd
}

// newCommandTable returns the handler of every command the policy knows.
// A command it does not know runs other code as far as the policy can
// tell: it needs exec.
func newCommandTable() map[string]handler {
	t := map[string]handler{}
	reg := func(h handler, names ...string) {
		for _, n := range names {
			t[n] = h
		}
	}
	read := cmdSpec{need: pRead}

	// Commands that only read their operands.
	reg(read.handler(), "cat", "tac", "nl", "head", "tail", "od", "hexdump", "hd", "strings", "wc",
		"md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "sum",
		"base32", "base64", "basenc", "file", "stat", "du", "realpath", "readlink", "cmp", "diff3",
		"comm", "join", "paste", "fold", "fmt", "expand", "unexpand", "column", "rev", "zcat", "bzcat",
		"xzcat", "zstdcat", "lz4cat", "shellcheck", "hadolint", "actionlint", "yamllint",
		"md5", "shasum", "look", "pr", "tsort", "numfmt", "cut", "lsattr")
	reg(cmdSpec{need: pRead, tree: []string{"-R", "--recursive"}, follow: []string{"-L", "--dereference"}}.handler(), "ls", "dir", "vdir")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "LPIo", long: []string{"--filelimit", "--charset"}},
		write: []string{"-o"}}.handler(), "tree")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "o"}, write: []string{"-o", "--log-file", "-O", "--LOG-FILE"},
		exec: []string{"--lesskey-file", "-k"}}.handler(), "less", "more", "most")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "oTSt", long: []string{"--output", "--temporary-directory",
		"--compress-program", "--files0-from"}}, write: []string{"-o", "--output", "-T", "--temporary-directory"},
		read: []string{"--files0-from"}, exec: []string{"--compress-program"}}.handler(), "sort")
	reg(cmdSpec{need: pRead, opts: optSpec{long: []string{"--to-file", "--from-file"}},
		read: []string{"--to-file", "--from-file"}}.handler(), "diff", "sdiff")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "ft", long: []string{"--from-code", "--to-code", "--output"}},
		write: []string{"-o", "--output"}}.handler(), "iconv")
	reg(cmdSpec{need: pRead, opts: optSpec{short: "ngio", long: []string{"--output", "--input-range", "--head-count"}},
		write: []string{"-o", "--output"}}.handler(), "shuf")
	reg(cmdSpec{need: pRead, writeIf: []string{"-w", "--write"}, opts: optSpec{short: "r"}}.handler(),
		"gofmt", "goimports")
	reg(grepHandler(optSpec{short: "efmABCd", long: []string{"--regexp", "--file", "--max-count", "--after-context",
		"--before-context", "--context", "--include", "--exclude", "--exclude-dir", "--label", "--binary-files",
		"--directories", "--devices", "--exclude-from"}}, nil), "grep", "egrep", "fgrep", "zgrep")
	reg(grepHandler(optSpec{short: "efgtTmABCjMrEd", long: []string{"--regexp", "--file", "--glob", "--iglob",
		"--type", "--type-not", "--max-count", "--after-context", "--before-context", "--context", "--threads",
		"--max-columns", "--replace", "--encoding", "--max-depth", "--pre", "--pre-glob", "--type-add",
		"--ignore-file", "--sort", "--sortr", "--max-filesize", "--colors", "--color", "--path-separator"}},
		[]string{"--pre"}), "rg")
	reg(grepHandler(optSpec{short: "GgmABC", long: []string{"--ignore", "--file-search-regex", "--max-count",
		"--after", "--before", "--context", "--pager"}}, []string{"--pager"}), "ag", "ack")
	reg(jqHandler, "jq", "gojq", "jaq")
	reg(yqHandler, "yq")
	reg(sedHandler, "sed", "gsed")
	reg(findHandler, "find")
	reg(inOutHandler(optSpec{short: "fsw", long: []string{"--skip-fields", "--skip-chars", "--check-chars", "--group", "--all-repeated"}}), "uniq")
	reg(inOutHandler(optSpec{short: "cglnosC", long: []string{"-cols", "-len", "-seek", "-name"}}), "xxd")
	reg(tarHandler, "tar", "bsdtar", "gtar")
	reg(unzipHandler, "unzip")
	reg(compressHandler, "gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma", "zstd", "unzstd",
		"lz4", "compress", "uncompress", "pigz", "unpigz")
	reg(cmdSpec{need: pWrite, opts: optSpec{short: "bnt", long: []string{"--suffix", "--number", "--lines",
		"--bytes", "--line-bytes", "--additional-suffix"}}}.handler(), "split")
	reg(cmdSpec{need: pWrite, pos: posNone, opts: optSpec{short: "fbn", long: []string{"--prefix", "--suffix-format",
		"--digits"}}, write: []string{"-f", "--prefix"}}.handler(), "csplit")
	reg(ddHandler, "dd")
	reg(dateHandler, "date")
	reg(hostnameHandler, "hostname")

	// Shell builtins that touch no file and run nothing: any profile whose
	// tools include bash may use them.
	reg(needOnly(0), "echo", "true", "false", ":", "pwd", "test", "[", "exit", "return", "break", "continue",
		"shift", "wait", "jobs", "type", "which", "getopts", "times", "umask", "dirs", "caller")

	// Commands whose arguments are not paths.
	reg(needOnly(pRead), "printf", "tr", "true", "false", ":", "pwd", "sleep", "yes", "seq", "expr",
		"basename", "dirname", "whoami", "id", "groups", "uname", "nproc", "arch", "getconf", "locale",
		"tty", "printenv", "logname", "users", "uptime", "which", "type", "help", "jobs", "wait", "times",
		"umask", "ulimit", "unset", "shift", "shopt", "getopts", "test", "[", "break", "continue",
		"return", "exit", "disown", "bg", "fg", "history", "dirs", "caller",
		"compopt", "bind", "logout", "suspend", "unalias", "ps", "pgrep", "free", "df", "lsblk",
		"tput", "clear", "reset", "stty", "bc", "factor", "cal", "ncal", "w", "who",
		"last", "top", "htop", "vmstat", "iostat", "lscpu", "lsb_release")
	reg(readVarsHandler, "read", "mapfile", "readarray")
	reg(completionHandler, "compgen", "complete")
	reg(unsetHandler, "unset")
	reg(printfHandler, "printf")
	reg(setHandler, "set")
	reg(declHandler, "declare", "typeset", "local", "export", "readonly")

	// Commands that write their operands.
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "dtr", long: []string{"--date", "--reference"}},
		read: []string{"-r", "--reference"}}.handler(), "touch")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "mZ", long: []string{"--mode", "--context"}}}.handler(), "mkdir", "rmdir")
	reg(cmdSpec{pos: posWrite, tree: []string{"-r", "-R", "--recursive"}}.handler(), "rm", "shred", "unlink")
	reg(cmdSpec{pos: posWrite, skip: 1, tree: []string{"-R", "--recursive"},
		opts: optSpec{long: []string{"--reference"}}, read: []string{"--reference"}}.handler(), "chmod")
	reg(cmdSpec{need: pAdmin, pos: posWrite, skip: 1, tree: []string{"-R", "--recursive"}}.handler(), "chown", "chgrp")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "sro", long: []string{"--size", "--reference"}},
		read: []string{"-r", "--reference"}}.handler(), "truncate")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "a"}}.handler(), "tee")
	reg(copyHandler(false), "cp", "install")
	reg(copyHandler(true), "mv")
	reg(lnHandler, "ln")
	reg(mktempHandler, "mktemp")
	reg(cmdSpec{pos: posWrite, opts: optSpec{short: "ioBDdpFrVYzgE", long: []string{"--input", "--output",
		"--prefix", "--directory", "--strip", "--reject-file", "--backup-if-mismatch"}},
		read: []string{"-i", "--input"}, write: []string{"-o", "--output", "-r", "--reject-file", "-d", "--directory"}}.handler(), "patch")

	// Wrappers: the command they run is checked instead.
	reg(envHandler, "env")
	reg(wrapper(optSpec{short: "n", long: []string{"--adjustment"}}, 0), "nice")
	reg(wrapper(optSpec{}, 0), "nohup", "unbuffer", "chronic", "caffeinate", "builtin")
	reg(wrapper(optSpec{short: "sk", long: []string{"--signal", "--kill-after"}}, 1), "timeout")
	reg(wrapper(optSpec{short: "ioe", long: []string{"--input", "--output", "--error"}}, 0), "stdbuf")
	reg(wrapper(optSpec{}, 0), "setsid")
	reg(wrapper(optSpec{short: "cnp", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}}, 0), "ionice")
	reg(timeHandler, "time")
	reg(commandHandler, "command")
	reg(execHandler, "exec")
	reg(xargsHandler, "xargs")
	reg(watchHandler, "watch")
	reg(flockHandler, "flock")
	reg(shellHandler, "bash", "sh", "dash", "rbash")
	reg(runsCode(0), "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "ash", "yash", "pwsh", "nu", "elvish", "xonsh")
	reg(busyboxHandler, "busybox")
	reg(evalHandler, "eval")
	reg(sourceHandler, "source", ".")
	reg(trapHandler, "trap")
	reg(aliasHandler, "alias")
	reg(hashHandler, "hash")
	reg(enableHandler, "enable")
	reg(fcHandler, "fc")
	reg(cdHandler, "cd", "pushd")
	reg(popdHandler, "popd")
	reg(privileged, "sudo", "su", "doas", "pkexec", "runuser", "sg", "newgrp", "run0", "sudoedit")

	// Programs that run code the policy cannot see.
	reg(runsCode(0), "python", "python2", "python3", "pip", "pip3", "pipx", "poetry", "pipenv", "uv", "uvx",
		"pdm", "hatch", "tox", "nox", "pytest", "mypy", "ruff", "black", "isort", "flake8", "pylint",
		"node", "nodejs", "npm", "npx", "yarn", "pnpm", "bun", "deno", "tsc", "ts-node", "tsx", "eslint",
		"prettier", "jest", "vitest", "mocha", "ruby", "gem", "bundle", "bundler", "rake", "rails", "rspec",
		"irb", "perl", "cpan", "cpanm", "php", "composer", "java", "javac", "jar", "mvn", "gradle",
		"kotlin", "kotlinc", "scala", "sbt", "cargo", "rustc", "rustup", "rustfmt", "gcc", "g++",
		"cc", "c++", "clang", "clang++", "ld", "make", "gmake", "cmake", "ninja", "meson", "bazel", "bazelisk",
		"buck", "dotnet", "msbuild", "swift", "swiftc", "xcodebuild", "lua", "luajit", "R", "Rscript", "julia",
		"elixir", "mix", "iex", "erl", "erlc", "rebar3", "ghc", "ghci", "cabal", "stack", "dart", "flutter",
		"zig", "nim", "crystal", "ocaml", "opam", "dune", "awk", "gawk", "mawk", "nawk", "dc", "m4", "expect",
		"tclsh", "wish", "sqlite3", "vim", "vi", "nvim", "emacs", "nano", "ed", "ex", "pico", "micro",
		"protoc", "buf", "pre-commit", "hugo", "jekyll", "mkdocs", "sphinx-build", "doxygen", "pandoc",
		"asciidoctor", "golangci-lint", "staticcheck", "govulncheck", "strace", "ltrace", "gdb", "lldb",
		"valgrind", "perf", "script", "parallel", "entr", "openssl", "7z", "7za", "cpio", "ar", "xdg-open",
		"open", "direnv", "just", "task", "mage", "earthly", "nix", "nix-shell", "asdf", "mise", "nvm",
		"pyenv", "rbenv", "sdk", "conda", "mamba", "micromamba", "go-task", "air", "reflex", "nodemon")
	reg(goHandler, "go")

	// The network.
	reg(curlHandler, "curl")
	reg(wgetHandler, "wget")
	reg(runsCode(pNetwork), "ssh", "nc", "ncat", "netcat", "socat", "telnet", "ftp", "tftp", "lftp", "sftp",
		"psql", "mysql", "redis-cli", "mongo", "mongosh", "grpcurl", "websocat", "mosh")
	reg(needOnly(pNetwork), "ping", "ping6", "traceroute", "tracepath", "mtr", "dig", "nslookup", "host",
		"whois", "nmap", "http", "https", "xh", "aria2c")
	reg(scpHandler, "scp")
	reg(rsyncHandler, "rsync")
	reg(gitHandler, "git")
	reg(ghHandler, "gh")
	reg(zipHandler, "zip")

	// Deployment and infrastructure.
	reg(runsCode(pDeploy), "kubectl", "helm", "terraform", "tofu", "terragrunt", "pulumi", "ansible",
		"ansible-playbook", "ansible-galaxy", "aws", "gcloud", "gsutil", "bq", "az", "doctl", "flyctl", "fly",
		"heroku", "vercel", "netlify", "wrangler", "serverless", "sls", "eksctl", "docker", "docker-compose",
		"podman", "nerdctl", "buildah", "skaffold", "tilt", "kustomize", "argocd", "flux", "nomad", "consul",
		"packer", "cdk", "sam", "firebase", "railway", "kamal", "cap", "kind", "minikube", "k3d", "k9s", "oc",
		"istioctl", "linkerd", "crane", "skopeo", "gcrane", "ko")

	// Secret stores.
	reg(runsCode(pSecrets), "vault", "op", "pass", "gopass", "gpg", "gpg2", "age", "sops", "security",
		"keyctl", "secret-tool", "lpass", "bw", "doppler", "chamber", "aws-vault", "infisical")

	// The machine itself.
	reg(runsCode(pAdmin), "kill", "pkill", "killall", "systemctl", "service", "journalctl", "crontab", "at",
		"batch", "mount", "umount", "losetup", "modprobe", "insmod", "rmmod", "sysctl", "iptables", "ip6tables",
		"nft", "ufw", "ip", "ifconfig", "route", "shutdown", "reboot", "halt", "poweroff", "init", "telinit",
		"useradd", "userdel", "usermod", "groupadd", "groupdel", "passwd", "chpasswd", "visudo", "chroot",
		"nsenter", "unshare", "setpriv", "capsh", "firejail", "bwrap", "systemd-run", "machinectl", "renice",
		"apt", "apt-get", "dpkg", "yum", "dnf", "rpm", "apk", "brew", "snap", "flatpak", "pacman", "zypper",
		"hwclock", "timedatectl", "hostnamectl", "lsof", "taskset", "chrt", "prlimit", "setcap", "chattr",
		"dmesg", "swapon", "swapoff", "fdisk", "mkfs", "parted", "tcpdump")
	return t
}

// grepHandler handles grep-like commands: the first operand is the pattern
// unless one is given by option; the rest are read, whole trees with -r.
func grepHandler(spec optSpec, execOpts []string) handler {
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], spec)
		need := pRead
		if hasOpt(opts, execOpts...) {
			need |= pExec
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		tree := hasOpt(opts, "-r", "-R", "--recursive", "--dereference-recursive") || inv.name == "rg" || inv.name == "ag" || inv.name == "ack"
		follow := hasOpt(opts, "-R", "--dereference-recursive") || (inv.name == "rg" || inv.name == "ag") && hasOpt(opts, "-L", "--follow") ||
			inv.name == "ack" && hasOpt(opts, "--follow")
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-f", "--file", "--exclude-from", "--ignore-file":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
		if !hasOpt(opts, "-e", "--regexp", "-f", "--file") && len(pos) > 0 {
			pos = pos[1:]
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accRead, tree: tree, follow: follow})
		}
		if len(pos) == 0 && tree {
			// grep -r with no operand searches the current directory.
			c.usePath(inv, litWord("."), pathUse{acc: accRead, tree: true, follow: follow})
		}
		return inv.cwd
	}
}

func jqHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	args := inv.argv[1:]
	var pos []word
	fromFile, rawArgs := false, false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if rawArgs || !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
			if !rawArgs {
				pos = append(pos, w)
			}
			continue
		}
		switch w.s {
		case "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case "--arg", "--argjson":
			i += 2
		case "--slurpfile", "--rawfile":
			if i+2 < len(args) {
				c.usePath(inv, args[i+2], pathUse{acc: accRead})
			}
			i += 2
		case "-f", "--from-file":
			fromFile = true
			if i+1 < len(args) {
				i++
				c.usePath(inv, args[i], pathUse{acc: accRead})
			}
		case "-L", "--indent", "--tab-width":
			i++
		case "--args", "--jsonargs":
			rawArgs = true
		}
	}
	if !fromFile && len(pos) > 0 {
		pos = pos[1:]
	}
	for _, w := range pos {
		c.usePath(inv, w, pathUse{acc: accRead})
	}
	return inv.cwd
}

func yqHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "pIoe", long: []string{"--input-format", "--output-format",
		"--indent", "--from-file", "--expression", "--split-exp"}})
	inPlace := hasOpt(opts, "-i", "--inplace")
	need := pRead
	if inPlace {
		need |= pWrite
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	if len(pos) > 0 && pos[0].lit {
		switch pos[0].s {
		case "e", "eval", "ea", "eval-all":
			pos = pos[1:]
		}
	}
	if !hasOpt(opts, "--from-file", "--expression", "-e") && len(pos) > 0 {
		pos = pos[1:]
	}
	acc := accRead
	if inPlace {
		acc = accWrite
	}
	for _, w := range pos {
		c.usePath(inv, w, pathUse{acc: acc})
	}
	return inv.cwd
}

// inOutHandler checks a filter that reads its first operand and, when
// given a second, writes its output there (uniq IN OUT, xxd IN OUT).
func inOutHandler(spec optSpec) handler {
	return func(c *checker, inv *invocation) cwds {
		_, pos := parseOpts(inv.argv[1:], spec)
		need := pRead
		if len(pos) > 1 {
			need |= pWrite
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		for i, w := range pos {
			acc := accRead
			if i == 1 {
				acc = accWrite
			}
			c.usePath(inv, w, pathUse{acc: acc})
		}
		return inv.cwd
	}
}

func ddHandler(c *checker, inv *invocation) cwds {
	need := pRead
	var reads, writes []word
	for _, w := range inv.argv[1:] {
		if !w.lit {
			c.denyf("shell:dynamic-path", "dd operand %s is not a literal, so the policy cannot check it", w.source())
			return inv.cwd
		}
		if v, ok := strings.CutPrefix(w.s, "if="); ok {
			reads = append(reads, litWord(v))
		}
		if v, ok := strings.CutPrefix(w.s, "of="); ok {
			writes = append(writes, litWord(v))
			need |= pWrite
		}
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, w := range reads {
		c.usePath(inv, w, pathUse{acc: accRead})
	}
	for _, w := range writes {
		c.usePath(inv, w, pathUse{acc: accWrite})
	}
	return inv.cwd
}

func dateHandler(c *checker, inv *invocation) cwds {
	opts, _ := parseOpts(inv.argv[1:], optSpec{short: "dfrsI", long: []string{"--date", "--file", "--reference", "--set"}})
	need := pRead
	if hasOpt(opts, "-s", "--set") {
		need |= pAdmin
	}
	if c.need(inv, need) {
		for _, o := range opts {
			if o.val != nil && (o.name == "-f" || o.name == "--file" || o.name == "-r" || o.name == "--reference") {
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
	}
	return inv.cwd
}

func hostnameHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "F", long: []string{"--file"}})
	need := pRead
	if len(pos) > 0 || hasOpt(opts, "-F", "--file", "-b", "--boot") {
		need |= pAdmin
	}
	c.need(inv, need)
	return inv.cwd
}

func readVarsHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "adinNptuCcsO", long: nil})
	need := pRead
	if inv.name != "read" && hasOpt(opts, "-C") {
		// mapfile -C runs its callback as shell code.
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, o := range opts {
		if o.name == "-a" && o.val != nil && o.val.lit {
			c.setClean(o.val.s, false)
		}
	}
	for _, w := range pos {
		if w.lit {
			c.setClean(w.s, false)
		}
	}
	return inv.cwd
}

// completionHandler: compgen and complete run a command with -C.
func completionHandler(c *checker, inv *invocation) cwds {
	opts, _ := parseOpts(inv.argv[1:], optSpec{short: "oAGWFCXPS"})
	need := pRead
	if hasOpt(opts, "-C") {
		need |= pExec
	}
	c.need(inv, need)
	return inv.cwd
}

// unsetHandler: unset can remove a function, after which its name runs a
// program again.
func unsetHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	for _, w := range inv.argv[1:] {
		if !w.lit {
			for _, f := range c.funcs {
				f.sure = false
			}
			return inv.cwd
		}
		if f, ok := c.funcs[w.s]; ok {
			f.sure = false
		}
	}
	return inv.cwd
}

func printfHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	args := inv.argv[1:]
	if len(args) >= 2 && args[0].lit && args[0].s == "-v" {
		if !args[1].lit {
			c.denyf("shell:environment", "printf -v with a variable name that is not a literal is not allowed")
			return inv.cwd
		}
		name, _, _ := strings.Cut(args[1].s, "[")
		if shellSensitive(name) && !c.perms.has(pExec) {
			c.denyf("shell:environment", "setting %s is not allowed: it changes what the shell runs (needs the exec permission)", name)
			return inv.cwd
		}
		c.setClean(name, false)
	}
	return inv.cwd
}

func setHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	args := inv.argv[1:]
	for i, w := range args {
		if !w.lit {
			if !c.perms.has(pExec) {
				c.denyf("shell:environment", "set with an argument that is not a literal is not allowed")
			}
			return inv.cwd
		}
		if w.s == "--" || w.s == "-" {
			break
		}
		if (w.s == "-o" || w.s == "+o") && i+1 < len(args) {
			switch args[i+1].s {
			case "allexport", "keyword":
				c.need(inv, pExec)
			}
			continue
		}
		if strings.HasPrefix(w.s, "-") && strings.ContainsAny(w.s[1:], "ak") {
			c.need(inv, pExec)
		}
	}
	return inv.cwd
}

// declHandler handles declare and its kin reached as ordinary commands
// (builtin export …), where the parser does not see assignments.
func declHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pRead) {
		return inv.cwd
	}
	exported := inv.name == "export"
	for _, w := range inv.argv[1:] {
		if !w.lit {
			if !c.perms.has(pExec) {
				c.denyf("shell:environment", "%s with an argument that is not a literal (%s) is not allowed: it could assign any variable", inv.name, w.source())
			}
			return inv.cwd
		}
		if strings.HasPrefix(w.s, "-") {
			exported = exported || strings.Contains(w.s, "x")
			if strings.ContainsAny(w.s, "ni") && !c.perms.has(pExec) {
				c.denyf("shell:environment", "%s %s is not allowed here (needs the exec permission)", inv.name, w.s)
				return inv.cwd
			}
			continue
		}
		name, _, _ := strings.Cut(w.s, "=")
		name, _, _ = strings.Cut(name, "[")
		if !c.perms.has(pExec) && (exported || shellSensitive(name)) && !envSafe(name) {
			c.denyf("shell:environment", "setting %s is not allowed: environment variables change what programs run and read (needs the exec permission)", name)
			return inv.cwd
		}
		c.setClean(name, false)
	}
	return inv.cwd
}

// copyHandler handles cp, install and mv: sources are read (mv: removed,
// so written), the destination written; -t names the destination.
func copyHandler(move bool) handler {
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], optSpec{short: "tSgmo", long: []string{"--target-directory", "--suffix",
			"--backup", "--group", "--mode", "--owner", "--reflink", "--sparse", "--preserve", "--no-preserve"}})
		if !c.need(inv, pRead|pWrite) {
			return inv.cwd
		}
		tree := move || hasOpt(opts, "-r", "-R", "-a", "--recursive", "--archive")
		follow := !move && tree && hasOpt(opts, "-L", "--dereference")
		var dest *word
		for _, o := range opts {
			if (o.name == "-t" || o.name == "--target-directory") && o.val != nil {
				dest = o.val
			}
		}
		if inv.name == "install" && hasOpt(opts, "-d", "--directory") {
			for _, w := range pos {
				c.usePath(inv, w, pathUse{acc: accWrite})
			}
			return inv.cwd
		}
		if dest == nil && len(pos) > 0 {
			dest = &pos[len(pos)-1]
			pos = pos[:len(pos)-1]
		}
		srcAcc := accRead
		if move {
			srcAcc = accWrite
		}
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: srcAcc, tree: tree, follow: follow})
		}
		if dest != nil {
			c.usePath(inv, *dest, pathUse{acc: accWrite, tree: tree})
		}
		return inv.cwd
	}
}

// lnHandler: the link is written; its target is read, relative to the
// link's directory for a symbolic link, so a link out of the workspace is
// refused when it is made.
func lnHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "tS", long: []string{"--target-directory", "--suffix", "--backup"}})
	if !c.need(inv, pRead|pWrite) {
		return inv.cwd
	}
	symbolic := hasOpt(opts, "-s", "--symbolic")
	var dir *word
	for _, o := range opts {
		if (o.name == "-t" || o.name == "--target-directory") && o.val != nil {
			dir = o.val
		}
	}
	targets := pos
	var link word
	switch {
	case dir != nil:
		c.usePath(inv, *dir, pathUse{acc: accWrite})
		link = *dir
	case len(pos) >= 2:
		link, targets = pos[len(pos)-1], pos[:len(pos)-1]
		c.usePath(inv, link, pathUse{acc: accWrite})
	case len(pos) == 1:
		link = litWord(".")
	}
	for _, t := range targets {
		if !symbolic || !t.lit || !link.lit || path.IsAbs(t.s) {
			c.usePath(inv, t, pathUse{acc: accRead})
			continue
		}
		// A relative symbolic link resolves from where the link is.
		base := link.s
		if len(targets) == 1 && dir == nil && !strings.HasSuffix(link.s, "/") {
			base = path.Dir(link.s)
		}
		c.usePath(inv, litWord(path.Join(base, t.s)), pathUse{acc: accRead})
	}
	return inv.cwd
}

// mktempHandler: without a directory the file lands in the system's
// temporary directory, outside the workspace.
func mktempHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "p", long: []string{"--tmpdir", "--suffix"}})
	if !c.need(inv, pWrite) {
		return inv.cwd
	}
	for _, o := range opts {
		if (o.name == "-p" || o.name == "--tmpdir") && o.val != nil {
			c.usePath(inv, *o.val, pathUse{acc: accWrite})
			return inv.cwd
		}
	}
	if len(pos) > 0 && !hasOpt(opts, "-t") {
		c.usePath(inv, pos[0], pathUse{acc: accWrite})
		return inv.cwd
	}
	c.usePath(inv, litWord("/tmp/mktemp"), pathUse{acc: accWrite})
	return inv.cwd
}

func tarHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	// Old style: "tar czf file …" with the letters in the first word.
	if len(args) > 0 && args[0].lit && !strings.HasPrefix(args[0].s, "-") && args[0].s != "" {
		first := litWord("-" + args[0].s)
		args = append([]word{first}, args[1:]...)
	}
	opts, pos := parseOpts(args, optSpec{short: "fCIFTXbgKLNV", long: []string{"--file", "--directory",
		"--use-compress-program", "--to-command", "--checkpoint-action", "--info-script", "--new-volume-script",
		"--rsh-command", "--rmt-command", "--exclude", "--files-from", "--exclude-from", "--transform", "--xform"}})
	creating, extracting := false, false
	for _, o := range opts {
		switch o.name {
		case "-c", "--create", "-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate", "--delete":
			creating = true
		case "-x", "--extract", "--get":
			extracting = true
		}
	}
	need := pRead
	if creating || extracting {
		need |= pWrite
	}
	if hasOpt(opts, "-I", "--use-compress-program", "--to-command", "--checkpoint-action", "--info-script",
		"-F", "--new-volume-script", "--rsh-command", "--rmt-command") {
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	dest := litWord(".")
	for _, o := range opts {
		if o.val == nil {
			continue
		}
		switch o.name {
		case "-f", "--file":
			acc := accRead
			if creating {
				acc = accWrite
			}
			c.usePath(inv, *o.val, pathUse{acc: acc})
		case "-C", "--directory":
			dest = *o.val
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		case "-T", "--files-from", "-X", "--exclude-from":
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		}
	}
	switch {
	case extracting:
		c.usePath(inv, dest, pathUse{acc: accWrite, tree: true})
	case creating:
		follow := hasOpt(opts, "-h", "--dereference")
		for _, w := range pos {
			c.usePath(inv, w, pathUse{acc: accRead, tree: true, follow: follow})
		}
	}
	return inv.cwd
}

func unzipHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "dxP"})
	listing := hasOpt(opts, "-l", "-t", "-v", "-Z", "-p", "-c", "-z")
	need := pRead
	if !listing {
		need |= pWrite
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	if len(pos) > 0 {
		c.usePath(inv, pos[0], pathUse{acc: accRead})
	}
	if listing {
		return inv.cwd
	}
	dest := litWord(".")
	for _, o := range opts {
		if o.name == "-d" && o.val != nil {
			dest = *o.val
		}
	}
	c.usePath(inv, dest, pathUse{acc: accWrite, tree: true})
	return inv.cwd
}

func zipHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "bnPtxiO", long: []string{"--unzip-command", "--temp-path",
		"--password", "--exclude", "--include", "--output-file"}})
	need := pRead | pWrite
	if hasOpt(opts, "-TT", "--unzip-command") || hasOpt(opts, "-T") && slices.ContainsFunc(inv.argv, func(w word) bool { return w.s == "-TT" }) {
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	tree := hasOpt(opts, "-r", "--recurse-paths")
	// zip stores what links point to unless told to store the links.
	follow := !hasOpt(opts, "-y", "--symlinks")
	for i, w := range pos {
		if i == 0 {
			c.usePath(inv, w, pathUse{acc: accWrite})
			continue
		}
		c.usePath(inv, w, pathUse{acc: accRead, tree: tree, follow: follow && tree})
	}
	for _, o := range opts {
		if (o.name == "-O" || o.name == "--output-file") && o.val != nil {
			c.usePath(inv, *o.val, pathUse{acc: accWrite})
		}
	}
	return inv.cwd
}

func compressHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "SbTLp", long: []string{"--suffix", "--threads"}})
	toStdout := hasOpt(opts, "-c", "--stdout", "--to-stdout", "-l", "--list", "-t", "--test")
	need := pRead
	if !toStdout && len(pos) > 0 {
		need |= pWrite
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	acc := accRead
	if need.has(pWrite) {
		acc = accWrite
	}
	tree := hasOpt(opts, "-r", "--recursive")
	for _, w := range pos {
		c.usePath(inv, w, pathUse{acc: acc, tree: tree})
	}
	return inv.cwd
}

// sedHandler: sed reads its files and writes them with -i; its script may
// also write (w), read (r) or run commands (e).
func sedHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "efl", long: []string{"--expression", "--file", "--line-length"}})
	inPlace := hasOpt(opts, "-i", "--in-place")
	for _, w := range inv.argv[1:] {
		if w.lit && strings.HasPrefix(w.s, "-") && !strings.HasPrefix(w.s, "--") && strings.ContainsRune(strings.SplitN(w.s, "e", 2)[0], 'i') {
			inPlace = true
		}
	}
	sandboxed := hasOpt(opts, "--sandbox")
	var scripts []word
	fromOpts := false
	for _, o := range opts {
		switch o.name {
		case "-e", "--expression":
			fromOpts = true
			if o.val != nil {
				scripts = append(scripts, *o.val)
			}
		case "-f", "--file":
			fromOpts = true
			if o.val != nil {
				c.usePath(inv, *o.val, pathUse{acc: accRead})
				if !sandboxed && !c.perms.has(pExec) && !inv.allowed {
					c.denyf("permission:exec", "sed -f is not allowed: the policy cannot see what the script file does (needs the exec permission)")
					return inv.cwd
				}
			}
		}
	}
	if !fromOpts && len(pos) > 0 {
		scripts, pos = append(scripts, pos[0]), pos[1:]
	}
	need := pRead
	if inPlace {
		need |= pWrite
	}
	var writes, reads []string
	for _, s := range scripts {
		if !s.lit {
			need |= pExec
			continue
		}
		eff := sedScript(s.s)
		if eff.exec {
			need |= pExec
		}
		if len(eff.writes) > 0 {
			need |= pWrite
		}
		writes = append(writes, eff.writes...)
		reads = append(reads, eff.reads...)
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, w := range writes {
		c.usePath(inv, litWord(w), pathUse{acc: accWrite})
	}
	for _, r := range reads {
		c.usePath(inv, litWord(r), pathUse{acc: accRead})
	}
	acc := accRead
	if inPlace {
		acc = accWrite
	}
	for _, w := range pos {
		c.usePath(inv, w, pathUse{acc: acc})
	}
	return inv.cwd
}

// sedEffects are what a sed script does beyond printing.
type sedEffects struct {
	writes, reads []string
	exec          bool
}

// sedScript reads a sed script far enough to find the commands that write
// files (w, W, s///w), read files (r, R) or run commands (e, s///e). A
// command it does not know counts as running commands.
func sedScript(s string) sedEffects {
	var eff sedEffects
	i := 0
	toEOL := func() string {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = len(s) - i
		}
		v := strings.TrimSpace(s[i : i+j])
		i += j
		return v
	}
	skipDelimited := func(d byte) bool {
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case d:
				i++
				return true
			}
			i++
		}
		return false
	}
	address := func() {
		for i < len(s) {
			switch ch := s[i]; {
			case ch >= '0' && ch <= '9' || ch == '$' || ch == ',' || ch == '~' || ch == '+' || ch == '!' || ch == ' ' || ch == '\t':
				i++
			case ch == '/':
				i++
				skipDelimited('/')
			case ch == '\\' && i+1 < len(s):
				d := s[i+1]
				i += 2
				skipDelimited(d)
			case ch == 'I' || ch == 'M':
				// Address flags after a regex.
				if i > 0 && s[i-1] == '/' {
					i++
					continue
				}
				return
			default:
				return
			}
		}
	}
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', ';', '{', '}':
			i++
			continue
		case '#':
			toEOL()
			continue
		}
		address()
		if i >= len(s) {
			break
		}
		cmd := s[i]
		i++
		switch cmd {
		case '{', '}', ';', '\n':
		case 'p', 'P', 'd', 'D', 'n', 'N', 'g', 'G', 'h', 'H', 'x', '=', 'z', 'F', 'l', 'q', 'Q', 'L':
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case ':', 'b', 't', 'T', 'v':
			for i < len(s) && s[i] != ';' && s[i] != '\n' {
				i++
			}
		case 'a', 'i', 'c':
			for {
				line := toEOL()
				if !strings.HasSuffix(line, `\`) || i >= len(s) {
					break
				}
				i++
			}
		case 'w', 'W':
			eff.writes = append(eff.writes, toEOL())
		case 'r', 'R':
			eff.reads = append(eff.reads, toEOL())
		case 'e':
			eff.exec = true
			toEOL()
		case 's', 'y':
			if i >= len(s) {
				eff.exec = true
				return eff
			}
			d := s[i]
			i++
			if !skipDelimited(d) || !skipDelimited(d) {
				eff.exec = true
				return eff
			}
			if cmd == 'y' {
				continue
			}
		flags:
			for i < len(s) {
				switch f := s[i]; {
				case f == 'g' || f == 'p' || f == 'i' || f == 'I' || f == 'm' || f == 'M' || f >= '0' && f <= '9':
					i++
				case f == 'e':
					eff.exec = true
					i++
				case f == 'w':
					i++
					eff.writes = append(eff.writes, toEOL())
					break flags
				default:
					break flags
				}
			}
		default:
			eff.exec = true
			return eff
		}
	}
	return eff
}

// findHandler: find reads its starting points as trees; -delete writes
// them; -exec and its kin run a command checked like any other, with {}
// standing for every path under the starting points.
func findHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	follow := false
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit {
			break
		}
		switch {
		case w.s == "-H" || w.s == "-P":
		case w.s == "-L":
			follow = true
		case w.s == "-D" || w.s == "-O" || strings.HasPrefix(w.s, "-O"):
			if w.s == "-D" {
				i++
			}
		default:
			goto starts
		}
	}
starts:
	var startPoints []word
	for ; i < len(args); i++ {
		w := args[i]
		if w.lit && (strings.HasPrefix(w.s, "-") || w.s == "(" || w.s == "!" || w.s == ")") {
			break
		}
		startPoints = append(startPoints, w)
	}
	if len(startPoints) == 0 {
		startPoints = []word{litWord(".")}
	}
	expr := args[i:]
	need := pRead
	writes, execdir := false, false
	var execs [][]word
	for j := 0; j < len(expr); j++ {
		w := expr[j]
		if !w.lit {
			continue
		}
		switch w.s {
		case "-L", "-follow":
			follow = true
		case "-delete":
			writes = true
		case "-execdir", "-okdir":
			execdir = true
			fallthrough
		case "-exec", "-ok":
			k := j + 1
			for k < len(expr) && !(expr[k].lit && (expr[k].s == ";" || expr[k].s == "+")) {
				k++
			}
			execs = append(execs, expr[j+1:k])
			j = k
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			writes = true
			if j+1 < len(expr) {
				c.usePath(inv, expr[j+1], pathUse{acc: accWrite})
			}
			j++
		case "-newer", "-anewer", "-cnewer", "-samefile", "-files0-from":
			if j+1 < len(expr) {
				c.usePath(inv, expr[j+1], pathUse{acc: accRead})
			}
			j++
		}
	}
	if execdir {
		// -execdir runs in every directory it finds, where relative paths
		// and links mean something else than from here.
		need |= pExec
	}
	if writes {
		need |= pWrite
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, s := range startPoints {
		acc := accRead
		if writes {
			acc = accWrite
		}
		c.usePath(inv, s, pathUse{acc: acc, tree: true, follow: follow})
	}
	for _, argv := range execs {
		for _, s := range startPoints {
			inner := make([]word, len(argv))
			for k, w := range argv {
				switch {
				case w.lit && w.s == "{}":
					inner[k] = s
					inner[k].tree = true
				case w.lit && strings.Contains(w.s, "{}"):
					inner[k] = dynWord("a path find fills in", w.source())
				default:
					inner[k] = w
				}
			}
			if len(inner) == 0 {
				c.denyf("shell:parse", "find -exec names no command")
				return inv.cwd
			}
			c.run(inner, inv.cwd)
		}
	}
	return inv.cwd
}

// xargsHandler checks the command xargs runs, with its arguments from
// standard input standing in as words the policy cannot see.
func xargsHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	replace := ""
	i := 0
	valueShort := "aEdILlnPs"
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
			break
		}
		if w.s == "--" {
			i++
			break
		}
		if strings.HasPrefix(w.s, "--") {
			name, val, hasVal := strings.Cut(w.s, "=")
			switch name {
			case "--replace":
				replace = "{}"
				if hasVal {
					replace = val
				}
			case "--arg-file", "--delimiter", "--eof", "--max-lines", "--max-args", "--max-procs", "--max-chars",
				"--process-slot-var":
				if !hasVal && i+1 < len(args) {
					i++
					val = args[i].s
					if name == "--arg-file" {
						c.usePath(inv, args[i], pathUse{acc: accRead})
					}
				} else if name == "--arg-file" {
					c.usePath(inv, litWord(val), pathUse{acc: accRead})
				}
			}
			continue
		}
		letter := w.s[1]
		rest := w.s[2:]
		switch letter {
		case 'i':
			replace = "{}"
			if rest != "" {
				replace = rest
			}
			continue
		case 'e', 'l':
			continue
		}
		if strings.IndexByte(valueShort, letter) >= 0 {
			val := rest
			if val == "" && i+1 < len(args) {
				i++
				val = args[i].s
				if letter == 'a' {
					c.usePath(inv, args[i], pathUse{acc: accRead})
				}
			} else if letter == 'a' {
				c.usePath(inv, litWord(val), pathUse{acc: accRead})
			}
			if letter == 'I' {
				replace = val
			}
		}
	}
	inner := slices.Clone(args[i:])
	if len(inner) == 0 {
		inner = []word{litWord("echo")}
	}
	stdin := dynWord("arguments xargs reads from standard input", "(standard input)")
	if replace != "" {
		for k, w := range inner {
			if k > 0 && w.lit && strings.Contains(w.s, replace) {
				inner[k] = stdin
			}
		}
	} else {
		inner = append(inner, stdin)
	}
	return c.run(inner, inv.cwd)
}

// wrapper returns a handler for a command that runs another: options
// (with values per spec), skip more operands (timeout's duration), then
// the command.
func wrapper(spec optSpec, skip int) handler {
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		i := 0
		for ; i < len(args); i++ {
			w := args[i]
			if !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-" {
				break
			}
			if w.s == "--" {
				i++
				break
			}
			if strings.HasPrefix(w.s, "--") {
				if name, _, hasVal := strings.Cut(w.s, "="); !hasVal && slices.Contains(spec.long, name) {
					i++
				}
				continue
			}
			if len(w.s) == 2 && strings.IndexByte(spec.short, w.s[1]) >= 0 {
				i++
			}
		}
		i += skip
		if i >= len(args) {
			c.need(inv, pRead)
			return inv.cwd
		}
		return c.run(args[i:], inv.cwd)
	}
}

func envHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	cwd := inv.cwd
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit {
			break
		}
		switch {
		case w.s == "-S" || strings.HasPrefix(w.s, "--split-string") || strings.HasPrefix(w.s, "-S"):
			c.denyf("shell:wrapper", "env -S is not allowed: it splits a string into a command the policy cannot see; write the command out")
			return cwd
		case w.s == "-u" || w.s == "--unset":
			i++
		case w.s == "-C" || w.s == "--chdir":
			if i+1 < len(args) {
				i++
				cwd = c.chdir(inv, args[i], cwd)
			}
		case strings.HasPrefix(w.s, "--chdir="):
			cwd = c.chdir(inv, litWord(strings.TrimPrefix(w.s, "--chdir=")), cwd)
		case w.s == "--":
			i++
			goto assigns
		case strings.HasPrefix(w.s, "-") && w.s != "-":
		default:
			goto assigns
		}
		if c.deny != nil {
			return inv.cwd
		}
	}
assigns:
	for ; i < len(args); i++ {
		w := args[i]
		name, _, ok := strings.Cut(w.s, "=")
		if !w.lit || !ok || !validName(name) {
			break
		}
		if !c.perms.has(pExec) && !envSafe(name) && !inv.allowed {
			c.denyf("shell:environment", "setting %s is not allowed: environment variables change what programs run and read (needs the exec permission)", name)
			return inv.cwd
		}
	}
	if i >= len(args) {
		c.need(inv, pRead)
		return inv.cwd
	}
	c.run(args[i:], cwd)
	return inv.cwd
}

// chdir resolves a directory a wrapper changes into (env -C, git -C) and
// returns the new directories.
func (c *checker) chdir(inv *invocation, w word, cwd cwds) cwds {
	inv2 := c.invocation(invocation{name: inv.name, cwd: cwd, allowed: inv.allowed})
	c.usePath(inv2, w, pathUse{acc: accRead})
	if c.deny != nil || !w.lit {
		return cwd
	}
	var out cwds
	for _, d := range cwd {
		if r := c.resolve(d, w.s); r.in {
			out = union(out, cwds{r.abs})
		}
	}
	if len(out) == 0 {
		return cwd
	}
	return out
}

func timeHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || !strings.HasPrefix(w.s, "-") {
			break
		}
		switch {
		case w.s == "-o" || w.s == "--output":
			if i+1 < len(args) {
				i++
				c.need(inv, pWrite)
				c.usePath(inv, args[i], pathUse{acc: accWrite})
			}
		case strings.HasPrefix(w.s, "--output="):
			c.need(inv, pWrite)
			c.usePath(inv, litWord(strings.TrimPrefix(w.s, "--output=")), pathUse{acc: accWrite})
		case w.s == "-f" || w.s == "--format":
			i++
		}
	}
	if i >= len(args) || c.deny != nil {
		return inv.cwd
	}
	return c.run(args[i:], inv.cwd)
}

func commandHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
		if strings.ContainsAny(args[i].s, "vV") {
			c.need(inv, pRead)
			return inv.cwd
		}
	}
	if i >= len(args) {
		return inv.cwd
	}
	return c.run(args[i:], inv.cwd)
}

func execHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
		if args[i].s == "-a" {
			i++
		}
	}
	if i >= len(args) {
		return inv.cwd
	}
	return c.run(args[i:], inv.cwd)
}

// watchHandler: watch runs its arguments through sh -c unless -x.
func watchHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	direct := false
	i := 0
	for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
		switch s := args[i].s; {
		case s == "-x" || s == "--exec":
			direct = true
		case s == "-n" || s == "--interval" || s == "-q" || s == "--equexit":
			i++
		}
	}
	if i >= len(args) {
		return inv.cwd
	}
	if direct {
		return c.run(args[i:], inv.cwd)
	}
	return c.joinedScript(inv, args[i:])
}

// joinedScript checks words a command joins with spaces and hands to a
// shell (watch, eval).
func (c *checker) joinedScript(inv *invocation, args []word) cwds {
	parts := make([]string, 0, len(args))
	for _, w := range args {
		if !w.lit {
			c.denyf("shell:dynamic-script", "%s runs %s as shell code, and it is not a literal (it contains %s); the policy cannot see what would run", inv.name, w.source(), w.dyn)
			return inv.cwd
		}
		parts = append(parts, w.s)
	}
	return c.script(strings.Join(parts, " "), inv.cwd)
}

func flockHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	i := 0
	for ; i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-"); i++ {
		switch s := args[i].s; s {
		case "-c", "--command":
			if i+2 < len(args) || i+1 < len(args) {
				// flock -c CMD FILE or FILE -c CMD: the script is the word
				// after -c.
				if i+1 < len(args) {
					return c.shellString(inv, args[i+1])
				}
			}
		case "-w", "--timeout", "-E", "--conflict-exit-code":
			i++
		}
	}
	if i >= len(args) {
		return inv.cwd
	}
	lock := args[i]
	if !(lock.lit && isDigits(lock.s)) {
		c.need(inv, pWrite)
		c.usePath(inv, lock, pathUse{acc: accWrite})
	}
	rest := args[i+1:]
	if len(rest) >= 2 && rest[0].lit && (rest[0].s == "-c" || rest[0].s == "--command") {
		return c.shellString(inv, rest[1])
	}
	if len(rest) == 0 {
		return inv.cwd
	}
	return c.run(rest, inv.cwd)
}

// shellString checks a word a command runs as a shell script.
func (c *checker) shellString(inv *invocation, w word) cwds {
	if !w.lit {
		c.denyf("shell:dynamic-script", "%s runs %s as shell code, and it is not a literal (it contains %s); the policy cannot see what would run", inv.name, w.source(), w.dyn)
		return inv.cwd
	}
	return c.script(w.s, inv.cwd)
}

// shellHandler: bash -c SCRIPT is unwrapped and SCRIPT checked; a script
// file, standard input or an option that reads start-up files runs code
// the policy cannot see.
func shellHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	command := false
	hidden := ""
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.lit || (!strings.HasPrefix(w.s, "-") && !strings.HasPrefix(w.s, "+")) || w.s == "-" {
			break
		}
		switch {
		case w.s == "--":
			i++
			goto operands
		case w.s == "-o" || w.s == "+o" || w.s == "-O" || w.s == "+O":
			i++
		case w.s == "--rcfile" || w.s == "--init-file":
			hidden = w.s
			i++
		case w.s == "--login" || w.s == "-l" || w.s == "-i" || w.s == "-s" || w.s == "--debugger":
			hidden = w.s
		case strings.HasPrefix(w.s, "--"):
		default:
			flags := w.s[1:]
			if strings.Contains(flags, "c") {
				command = true
			}
			if strings.ContainsAny(flags, "ils") {
				hidden = w.s
			}
		}
	}
operands:
	rest := args[min(i, len(args)):]
	if hidden != "" {
		if c.need(inv, pExec) {
			c.pathLikeArgs(inv, rest)
		}
		return inv.cwd
	}
	if command {
		if len(rest) == 0 {
			c.denyf("shell:parse", "%s -c names no command", inv.name)
			return inv.cwd
		}
		return c.shellString(inv, rest[0])
	}
	// A script file or standard input.
	if c.need(inv, pExec) && len(rest) > 0 {
		c.usePath(inv, rest[0], pathUse{acc: accRead})
		c.pathLikeArgs(inv, rest[1:])
	}
	return inv.cwd
}

func busyboxHandler(c *checker, inv *invocation) cwds {
	if len(inv.argv) < 2 {
		c.need(inv, pRead)
		return inv.cwd
	}
	return c.run(inv.argv[1:], inv.cwd)
}

func evalHandler(c *checker, inv *invocation) cwds {
	return c.joinedScript(inv, inv.argv[1:])
}

// sourceHandler: source runs a file's contents in the current shell, which
// the policy does not read; it needs exec.
func sourceHandler(c *checker, inv *invocation) cwds {
	if !c.need(inv, pExec) {
		return inv.cwd
	}
	if len(inv.argv) > 1 {
		c.usePath(inv, inv.argv[1], pathUse{acc: accRead})
	}
	return inv.cwd
}

func trapHandler(c *checker, inv *invocation) cwds {
	args := inv.argv[1:]
	if len(args) > 0 && args[0].lit && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) < 2 || args[0].lit && (args[0].s == "-" || args[0].s == "" || strings.HasPrefix(args[0].s, "-")) {
		c.need(inv, pRead)
		return inv.cwd
	}
	return c.shellString(inv, args[0])
}

func aliasHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || strings.Contains(w.s, "=") {
			c.denyf("shell:alias", "alias is not allowed: an alias hides what a command name runs; write the command out")
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

func hashHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || strings.HasPrefix(w.s, "-") && strings.Contains(w.s, "p") {
			c.denyf("shell:alias", "hash -p is not allowed: it makes a command name run another program")
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

func enableHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if !w.lit || strings.HasPrefix(w.s, "-") && strings.Contains(w.s, "f") {
			c.need(inv, pExec|pAdmin)
			return inv.cwd
		}
	}
	c.need(inv, pRead)
	return inv.cwd
}

// fcHandler: fc re-runs history through an editor, or with -s runs a
// history entry; neither is visible.
func fcHandler(c *checker, inv *invocation) cwds {
	for _, w := range inv.argv[1:] {
		if w.lit && w.s == "-l" {
			c.need(inv, pRead)
			return inv.cwd
		}
	}
	c.need(inv, pExec)
	return inv.cwd
}

// cdHandler changes the directories the script may be in. A directory
// outside the workspace is refused; cd with no operand goes home, which
// the bash tool sets to the workspace; cd - goes back to any directory the
// script has been in.
func cdHandler(c *checker, inv *invocation) cwds {
	// Changing directory reads nothing; the commands that follow are
	// checked from where it leads.
	inv = c.invocation(invocation{name: inv.name, argv: inv.argv, cwd: inv.cwd, sub: inv.sub, allowed: true})
	_, pos := parseOpts(inv.argv[1:], optSpec{})
	if len(pos) == 0 {
		return cwds{c.ws.home}
	}
	w := pos[0]
	if w.lit && w.s == "-" || inv.name == "pushd" && w.lit && (strings.HasPrefix(w.s, "+") || strings.HasPrefix(w.s, "-")) {
		return union(inv.cwd, c.dirs)
	}
	if !w.lit {
		c.denyf("shell:dynamic-path", "%s %s is not allowed: the directory is not a literal (it contains %s), so the policy cannot follow it", inv.name, w.source(), w.dyn)
		return inv.cwd
	}
	var out cwds
	for _, d := range inv.cwd {
		r := c.resolve(d, w.s)
		if !r.in {
			c.denyf("path:outside-workspace", "%s %q is not allowed: it is outside the workspace", inv.name, w.s)
			return inv.cwd
		}
		c.useResolved(inv, r, pathUse{acc: accRead})
		out = union(out, cwds{r.abs})
	}
	if len(out) > maxCwds {
		c.denyf("shell:too-complex", "the command changes directory too often to follow")
		return inv.cwd
	}
	c.dirs = union(c.dirs, out)
	return out
}

func popdHandler(c *checker, inv *invocation) cwds {
	return union(inv.cwd, c.dirs)
}

func goHandler(c *checker, inv *invocation) cwds {
	sub := ""
	if len(inv.argv) > 1 && inv.argv[1].lit {
		sub = inv.argv[1].s
	}
	switch sub {
	case "version", "doc", "list", "help":
		if c.need(inv, pRead) {
			c.pathLikeArgs(inv, inv.argv[2:])
		}
		return inv.cwd
	case "env":
		for _, w := range inv.argv[2:] {
			if w.lit && (w.s == "-w" || w.s == "-u") {
				return runsCode(0)(c, inv)
			}
		}
		c.need(inv, pRead)
		return inv.cwd
	}
	return runsCode(0)(c, inv)
}

func curlHandler(c *checker, inv *invocation) cwds {
	opts, _ := parseOpts(inv.argv[1:], optSpec{short: "oDcTdFKbeEHuUXAxrwmYyzCQtPE", long: []string{
		"--output", "--output-dir", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr",
		"--upload-file", "--data", "--data-binary", "--data-urlencode", "--data-raw", "--form", "--config",
		"--netrc-file", "--cookie", "--key", "--cert", "--cacert", "--header", "--user", "--request",
		"--url", "--proxy", "--referer", "--user-agent", "--connect-timeout", "--max-time", "--retry",
		"--write-out", "--json"}})
	need := pNetwork
	for _, o := range opts {
		switch o.name {
		case "-o", "--output", "--output-dir", "-D", "--dump-header", "-c", "--cookie-jar", "--trace",
			"--trace-ascii", "--stderr", "-O", "--remote-name", "--remote-name-all", "-J":
			need |= pWrite
		}
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, o := range opts {
		switch o.name {
		case "-O", "--remote-name", "--remote-name-all":
			c.usePath(inv, litWord("."), pathUse{acc: accWrite})
		}
		if o.val == nil {
			continue
		}
		v := *o.val
		switch o.name {
		case "-o", "--output", "--output-dir", "-D", "--dump-header", "-c", "--cookie-jar", "--trace",
			"--trace-ascii", "--stderr":
			c.usePath(inv, v, pathUse{acc: accWrite})
		case "-T", "--upload-file", "-K", "--config", "--netrc-file", "--key", "--cert", "--cacert", "-E":
			c.usePath(inv, v, pathUse{acc: accRead})
		case "-d", "--data", "--data-binary", "--data-urlencode", "--json":
			if v.lit {
				if _, f, ok := strings.Cut(v.s, "@"); ok && (strings.HasPrefix(v.s, "@") || o.name == "--data-urlencode") {
					c.usePath(inv, litWord(f), pathUse{acc: accRead})
				}
			}
		case "-F", "--form":
			if v.lit {
				if _, f, ok := strings.Cut(v.s, "=@"); ok {
					f, _, _ = strings.Cut(f, ";")
					c.usePath(inv, litWord(f), pathUse{acc: accRead})
				} else if _, f, ok := strings.Cut(v.s, "=<"); ok {
					c.usePath(inv, litWord(f), pathUse{acc: accRead})
				}
			}
		case "-b", "--cookie":
			if v.lit && !strings.Contains(v.s, "=") {
				c.usePath(inv, v, pathUse{acc: accRead})
			}
		}
	}
	return inv.cwd
}

func wgetHandler(c *checker, inv *invocation) cwds {
	opts, _ := parseOpts(inv.argv[1:], optSpec{short: "OoaPieUTtwQ", long: []string{"--output-document", "--output-file",
		"--append-output", "--directory-prefix", "--input-file", "--execute", "--post-file", "--load-cookies",
		"--save-cookies", "--user-agent", "--header", "--timeout", "--tries", "--wait", "--quota", "--body-file"}})
	need := pNetwork | pWrite
	if hasOpt(opts, "-e", "--execute") {
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	dest := litWord(".")
	for _, o := range opts {
		if o.val == nil {
			continue
		}
		switch o.name {
		case "-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "--save-cookies":
			c.usePath(inv, *o.val, pathUse{acc: accWrite})
			if o.name == "-O" || o.name == "--output-document" {
				dest = word{}
			}
		case "-P", "--directory-prefix":
			dest = *o.val
		case "-i", "--input-file", "--post-file", "--load-cookies", "--body-file":
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		}
	}
	if dest.lit {
		c.usePath(inv, dest, pathUse{acc: accWrite})
	}
	return inv.cwd
}

// remote reports an scp or rsync operand naming another host.
func remote(w word) bool {
	if !w.lit {
		return false
	}
	if strings.HasPrefix(w.s, "rsync://") {
		return true
	}
	colon := strings.IndexByte(w.s, ':')
	slash := strings.IndexByte(w.s, '/')
	return colon > 0 && (slash < 0 || colon < slash)
}

func scpHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "cFiJlopPSoD", long: nil})
	need := pNetwork
	if hasOpt(opts, "-S") {
		need |= pExec
	}
	if len(pos) > 0 && !remote(pos[len(pos)-1]) {
		need |= pWrite
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	for _, o := range opts {
		if (o.name == "-F" || o.name == "-i") && o.val != nil {
			c.usePath(inv, *o.val, pathUse{acc: accRead})
		}
	}
	c.copyOperands(inv, pos, hasOpt(opts, "-L", "--copy-links", "-k", "--copy-dirlinks", "--copy-unsafe-links"))
	return inv.cwd
}

// copyOperands checks the local operands of a remote copy (scp, rsync):
// every source is a tree read, the last operand a tree written; remote ones
// (host:path) are the network permission's business.
func (c *checker) copyOperands(inv *invocation, pos []word, follow bool) {
	for i, w := range pos {
		if remote(w) {
			continue
		}
		if i == len(pos)-1 {
			c.usePath(inv, w, pathUse{acc: accWrite, tree: true})
			continue
		}
		c.usePath(inv, w, pathUse{acc: accRead, tree: true, follow: follow})
	}
}

func rsyncHandler(c *checker, inv *invocation) cwds {
	opts, pos := parseOpts(inv.argv[1:], optSpec{short: "eTBf", long: []string{"--rsh", "--rsync-path", "--temp-dir",
		"--exclude", "--include", "--exclude-from", "--include-from", "--files-from", "--filter", "--log-file",
		"--password-file", "--backup-dir", "--compare-dest", "--copy-dest", "--link-dest", "--partial-dir"}})
	need := pRead | pWrite
	for _, w := range pos {
		if remote(w) {
			need |= pNetwork
		}
	}
	if hasOpt(opts, "-e", "--rsh", "--rsync-path") {
		need |= pExec
	}
	if !c.need(inv, need) {
		return inv.cwd
	}
	c.copyOperands(inv, pos, hasOpt(opts, "-L", "--copy-links", "-k", "--copy-dirlinks", "--copy-unsafe-links"))
	return inv.cwd
}
