package policy

import (
	"strings"
)

// registerNetwork adds the commands that reach the network.
func registerNetwork(reg func(handler, ...string)) {
	reg(curlHandler(), "curl")
	reg(wgetHandler(), "wget")
	reg(sshHandler(), "ssh", "autossh")
	reg(runsCode(pNetwork), "nc", "ncat", "netcat", "socat", "telnet", "ftp", "tftp", "lftp", "sftp",
		"psql", "mysql", "redis-cli", "mongo", "mongosh", "grpcurl", "websocat", "mosh")
	reg(needOnly(pNetwork), "ping", "ping6", "traceroute", "tracepath", "mtr", "dig", "nslookup", "host",
		"whois", "nmap", "http", "https", "xh", "aria2c")
	reg(scpHandler(), "scp")
	reg(rsyncHandler(), "rsync")
}

func curlHandler() handler {
	t := optSpec{short: "oDcTdFKbeEHuUXAxrwmYyzCQtP", long: []string{
		"--output", "--output-dir", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr",
		"--upload-file", "--data", "--data-binary", "--data-urlencode", "--data-raw", "--data-ascii", "--form",
		"--form-string", "--config", "--netrc-file", "--cookie", "--key", "--cert", "--cacert", "--capath", "--header",
		"--user", "--request", "--url", "--proxy", "--referer", "--user-agent", "--connect-timeout", "--max-time",
		"--retry", "--write-out", "--json", "--libcurl", "--etag-save", "--etag-compare", "--hsts", "--alt-svc",
		"--crlfile", "--proxy-cacert", "--proxy-cert", "--proxy-key", "--unix-socket", "--abstract-unix-socket",
		"--trace-config", "--variable", "--range", "--limit-rate", "--max-filesize", "--resolve", "--connect-to",
		"--interface", "--dns-servers", "--oauth2-bearer", "--proxy-user", "--tls-max", "--ciphers", "--expect100-timeout",
		"--keepalive-time", "--retry-delay", "--retry-max-time", "--speed-limit", "--speed-time", "--time-cond",
		"--local-port", "--max-redirs", "--quote", "--continue-at", "--noproxy", "--preproxy", "--socks5",
		"--socks5-hostname", "--socks4", "--socks4a", "--pinnedpubkey", "--mail-from", "--mail-rcpt", "--aws-sigv4",
		"--ech", "--ipfs-gateway"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, _ := parseOpts(inv.argv[1:], t)
		need := pNetwork
		for _, o := range opts {
			switch o.name {
			case "-o", "--output", "--output-dir", "-D", "--dump-header", "-c", "--cookie-jar", "--trace",
				"--trace-ascii", "--stderr", "-O", "--remote-name", "--remote-name-all", "-J", "--libcurl",
				"--etag-save", "--hsts", "--alt-svc":
				need |= pWrite
			case "-K", "--config":
				if !c.needBecause(inv, pExec, "a curl config file can write and read files the policy cannot see") {
					return inv.cwd
				}
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
				"--trace-ascii", "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc":
				c.usePath(inv, v, pathUse{acc: accWrite})
			case "-T", "--upload-file", "-K", "--config", "--netrc-file", "--key", "--cert", "--cacert", "-E",
				"--capath", "--crlfile", "--etag-compare", "--proxy-cacert", "--proxy-cert", "--proxy-key":
				c.usePath(inv, v, pathUse{acc: accRead})
			case "-d", "--data", "--data-binary", "--data-urlencode", "--json", "--data-ascii", "-H", "--header",
				"-w", "--write-out", "--variable":
				if v.lit {
					if _, f, ok := strings.Cut(v.s, "@"); ok && (strings.HasPrefix(v.s, "@") || o.name == "--data-urlencode" || o.name == "--variable") {
						f, _, _ = strings.Cut(f, "[")
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
}

func wgetHandler() handler {
	t := optSpec{short: "OoaPieUTtwQlADRXIh", long: []string{"--output-document", "--output-file",
		"--append-output", "--directory-prefix", "--input-file", "--execute", "--post-file", "--load-cookies",
		"--save-cookies", "--user-agent", "--header", "--timeout", "--tries", "--wait", "--quota", "--body-file",
		"--config", "--use-askpass", "--ca-certificate", "--certificate", "--private-key", "--warc-file",
		"--rejected-log", "--input-metalink", "--level", "--accept", "--reject", "--domains", "--include-directories",
		"--exclude-directories", "--hsts-file", "--ca-directory", "--crl-file", "--warc-tempdir", "--base",
		"--password", "--user", "--method", "--body-data", "--post-data", "--referer", "--limit-rate"}}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, _ := parseOpts(inv.argv[1:], t)
		need := pNetwork | pWrite
		for _, o := range opts {
			switch o.name {
			case "-e", "--execute", "--config":
				if !c.needBecause(inv, pExec, "option "+o.name+" runs wgetrc commands, which can write files the policy cannot see") {
					return inv.cwd
				}
			case "--use-askpass":
				c.optionCommand(inv, o)
			}
			if c.deny != nil {
				return inv.cwd
			}
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
			case "-O", "--output-document", "-o", "--output-file", "-a", "--append-output", "--save-cookies",
				"--warc-file", "--rejected-log", "--hsts-file":
				if o.val.lit && o.val.s == "-" {
					continue
				}
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
				if o.name == "-O" || o.name == "--output-document" {
					dest = word{}
				}
			case "-P", "--directory-prefix":
				dest = *o.val
			case "-i", "--input-file", "--post-file", "--load-cookies", "--body-file", "--ca-certificate",
				"--certificate", "--private-key", "--input-metalink", "--config":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			}
		}
		if dest.lit {
			c.usePath(inv, dest, pathUse{acc: accWrite, tree: hasOpt(opts, "-r", "--recursive", "-m", "--mirror")})
		}
		return inv.cwd
	}
}

// sshValueShort are the short options of ssh that take a value.
const sshValueShort = "BbcDEeFIiJLlmOoPpQRSWw"

// sshOption checks one -o KEY=VALUE of ssh, scp, sftp or rsync -e: a
// command it runs is checked as that command; a file it reads or writes
// against the path policy.
func (c *checker) sshOption(inv *invocation, v word) {
	if !v.lit {
		c.denyf("shell:dynamic-script", "%s -o %s is not allowed: the option is not a literal", inv.name, v.source())
		return
	}
	key, val, ok := strings.Cut(v.s, "=")
	if !ok {
		key, val, _ = strings.Cut(v.s, " ")
	}
	val = strings.TrimSpace(val)
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "proxycommand", "localcommand", "knownhostscommand", "remotecommand":
		if strings.EqualFold(val, "none") {
			return
		}
		c.optionCommand(inv, opt{name: "-o " + key, val: &word{s: val, lit: true, src: val}})
	case "permitlocalcommand", "proxyusefdpass", "match", "include", "pkcs11provider", "securitykeyprovider",
		"sessiontype", "stdinnull", "forkafterauthentication":
		c.needBecause(inv, pExec, "ssh option "+key+" can run programs or load code")
	case "identityfile", "certificatefile", "userknownhostsfile", "globalknownhostsfile", "revokedhostkeys",
		"identityagent":
		c.usePath(inv, litWord(val), pathUse{acc: accRead})
	case "controlpath":
		if !strings.EqualFold(val, "none") {
			c.usePath(inv, litWord(val), pathUse{acc: accWrite})
		}
	}
}

func sshHandler() handler {
	t := optSpec{short: sshValueShort, flags: "46AaCfGgKkMNnqsTtVvXxYy"}.compile()
	return func(c *checker, inv *invocation) cwds {
		args := inv.argv[1:]
		// ssh's options end at the destination; the rest is the remote
		// command.
		i := 0
		var opts []opt
		for i < len(args) && args[i].lit && strings.HasPrefix(args[i].s, "-") {
			if args[i].s == "--" {
				i++
				break
			}
			o, next := optsAt(args, i, t)
			opts = append(opts, o...)
			i = next
		}
		if !c.need(inv, pNetwork|pExec) {
			return inv.cwd
		}
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-o":
				c.sshOption(inv, *o.val)
			case "-F", "-i":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
				if o.name == "-F" {
					c.needBecause(inv, pExec, "an ssh config file can make it run programs")
				}
			case "-E", "-S":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			case "-I":
				c.needBecause(inv, pExec, "-I loads a PKCS#11 library")
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		c.ruleScanWords(args[min(i+1, len(args)):])
		return inv.cwd
	}
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

func scpHandler() handler {
	t := optSpec{short: "cFiJlopPSoDX", flags: "346ABCOpqRrTv"}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		need := pNetwork
		if len(pos) > 0 && !remote(pos[len(pos)-1]) {
			need |= pWrite
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "-S", "-D":
				c.optionCommand(inv, o)
			case "-o":
				c.sshOption(inv, *o.val)
			case "-F", "-i":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
				if o.name == "-F" {
					c.needBecause(inv, pExec, "an ssh config file can make it run programs")
				}
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		c.copyOperands(inv, pos, hasOpt(opts, "-L", "--copy-links", "-k", "--copy-dirlinks", "--copy-unsafe-links"))
		return inv.cwd
	}
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

func rsyncHandler() handler {
	t := optSpec{short: "eTBfM", flags: "vqcarRbudlLkKHpEAXoDgtUNOJSnWxyzhPi0468CFmI",
		long: []string{"--rsh", "--rsync-path", "--temp-dir", "--exclude", "--include", "--exclude-from", "--include-from",
			"--files-from", "--filter", "--log-file", "--password-file", "--backup-dir", "--compare-dest", "--copy-dest",
			"--link-dest", "--partial-dir", "--write-batch", "--only-write-batch", "--read-batch", "--suffix", "--chmod",
			"--chown", "--usermap", "--groupmap", "--max-size", "--min-size", "--max-delete", "--timeout", "--contimeout",
			"--port", "--sockopts", "--out-format", "--log-file-format", "--bwlimit", "--block-size", "--modify-window",
			"--compress-choice", "--compress-level", "--skip-compress", "--checksum-choice", "--checksum-seed",
			"--iconv", "--remote-option", "--address", "--protocol", "--outbuf", "--info", "--debug", "--stderr",
			"--stop-after", "--stop-at", "--copy-as", "--max-alloc", "--early-input"},
		longFlags: []string{"--archive", "--recursive", "--relative", "--links", "--copy-links", "--copy-unsafe-links",
			"--safe-links", "--munge-links", "--copy-dirlinks", "--keep-dirlinks", "--hard-links", "--perms",
			"--executability", "--acls", "--xattrs", "--owner", "--group", "--devices", "--specials", "--times",
			"--atimes", "--open-noatime", "--crtimes", "--omit-dir-times", "--omit-link-times", "--super",
			"--fake-super", "--sparse", "--preallocate", "--dry-run", "--whole-file", "--one-file-system",
			"--existing", "--ignore-existing", "--remove-source-files", "--delete", "--delete-before",
			"--delete-during", "--delete-delay", "--delete-after", "--delete-excluded", "--ignore-missing-args",
			"--delete-missing-args", "--ignore-errors", "--force", "--partial", "--delay-updates", "--prune-empty-dirs",
			"--numeric-ids", "--ignore-times", "--size-only", "--fuzzy", "--compress", "--cvs-exclude", "--from0",
			"--protect-args", "--secluded-args", "--trust-sender", "--verbose", "--quiet", "--no-motd", "--checksum",
			"--update", "--inplace", "--append", "--append-verify", "--dirs", "--mkpath", "--backup", "--progress",
			"--human-readable", "--itemize-changes", "--stats", "--8-bit-output", "--list-only", "--blocking-io",
			"--ipv4", "--ipv6", "--version", "--help", "--old-args", "--old-dirs", "--no-implied-dirs",
			"--whole-file", "--delete-excluded"},
		negate: true, strict: true}.compile()
	return func(c *checker, inv *invocation) cwds {
		opts, pos := parseOpts(inv.argv[1:], t)
		if !c.strictOpts(inv, t, opts) {
			return inv.cwd
		}
		need := pRead | pWrite
		for _, w := range pos {
			if remote(w) {
				need |= pNetwork
			}
		}
		for _, o := range opts {
			switch o.name {
			case "-e", "--rsh", "--rsync-path":
				c.optionCommand(inv, o)
			case "--files-from", "--read-batch", "--early-input", "-M", "--remote-option":
				c.needBecause(inv, pExec, "option "+o.name+" reads paths or options the policy cannot check")
			}
			if c.deny != nil {
				return inv.cwd
			}
		}
		if !c.need(inv, need) {
			return inv.cwd
		}
		for _, o := range opts {
			if o.val == nil {
				continue
			}
			switch o.name {
			case "--exclude-from", "--include-from", "--password-file", "--compare-dest", "--copy-dest", "--link-dest",
				"--files-from", "--read-batch":
				c.usePath(inv, *o.val, pathUse{acc: accRead})
			case "-f", "--filter":
				c.rsyncFilter(inv, *o.val)
			case "--log-file", "--write-batch", "--only-write-batch", "--backup-dir", "--temp-dir", "-T", "--partial-dir":
				c.usePath(inv, *o.val, pathUse{acc: accWrite})
			}
		}
		follow := hasOpt(opts, "-L", "--copy-links", "-k", "--copy-dirlinks", "--copy-unsafe-links")
		c.copyOperands(inv, pos, follow)
		if !follow && len(pos) > 1 && !remote(pos[len(pos)-1]) {
			c.copyLinks(inv, pos[:len(pos)-1], pos[len(pos)-1], linkCopy, true)
		}
		return inv.cwd
	}
}

// rsyncFilter checks a filter rule of rsync's -f: a merge rule (merge,
// ".", dir-merge, ":") names a file of rules it reads, which is a read; a
// rule the policy cannot see may be one.
func (c *checker) rsyncFilter(inv *invocation, v word) {
	if !v.lit {
		c.needBecause(inv, pExec, "a filter rule the policy cannot see may read a file of rules")
		return
	}
	rule, file, ok := strings.Cut(strings.TrimSpace(v.s), " ")
	if !ok {
		rule, file, ok = strings.Cut(strings.TrimSpace(v.s), "_")
	}
	name, _, _ := strings.Cut(rule, ",")
	switch {
	case name == "merge" || name == "dir-merge" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, ":"):
	default:
		return
	}
	if !ok || strings.TrimSpace(file) == "" {
		return
	}
	c.usePath(inv, litWord(strings.TrimSpace(file)), pathUse{acc: accRead})
}

func goHandler(c *checker, inv *invocation) cwds {
	sub := ""
	if len(inv.argv) > 1 && inv.argv[1].lit {
		sub = inv.argv[1].s
	}
	switch sub {
	case "version", "doc", "list", "help":
		if goReadFlags(c, inv, sub, inv.argv[2:]) {
			return inv.cwd
		}
	case "mod":
		// go mod graph and why read go.mod and the module cache.
		if len(inv.argv) > 2 && inv.argv[2].lit && (inv.argv[2].s == "graph" || inv.argv[2].s == "why") &&
			goReadFlags(c, inv, "mod "+inv.argv[2].s, inv.argv[3:]) {
			return inv.cwd
		}
	case "env":
		for _, w := range inv.argv[2:] {
			if w.lit && (w.s == "-w" || w.s == "-u") {
				return runsCode(0)(c, inv)
			}
		}
		c.need(inv, pRead)
		return inv.cwd
	}
	for i, w := range inv.argv {
		if w.lit && (w.s == "-toolexec" || w.s == "--toolexec" || w.s == "-exec" || w.s == "--exec" ||
			strings.HasPrefix(w.s, "-toolexec=") || strings.HasPrefix(w.s, "-exec=")) {
			v := w
			if !strings.Contains(w.s, "=") && i+1 < len(inv.argv) {
				v = inv.argv[i+1]
			} else {
				_, val, _ := strings.Cut(w.s, "=")
				v = litWord(val)
			}
			c.optionCommand(inv, opt{name: "-toolexec", val: &v})
			if c.deny != nil {
				return inv.cwd
			}
		}
	}
	return runsCode(0)(c, inv)
}

// goReadFlag is how a flag of go list, doc, version or help is read: a
// boolean, a value, a path it reads, or a directory it runs in.
type goReadFlag uint8

const (
	goNotRead goReadFlag = iota
	goBool
	goValue
	goPath
	goDir
)

// goReadFlagKind says how sub reads its flag name; goNotRead for a flag
// that does more than read (go list -export and -compiled build, -toolexec
// runs a program, go doc -http serves and downloads) or that sub does not
// have.
func goReadFlagKind(sub, name string) goReadFlag {
	switch sub + " " + name {
	case "list e", "list deps", "list test", "list find", "list m", "list u", "list versions", "list retracted",
		"list json", "list v", "list trimpath", "list race", "list msan", "list asan", "list x", "list n",
		"doc all", "doc c", "doc cmd", "doc short", "doc src", "doc u",
		"version m", "version v", "version json", "mod graph x", "mod why m", "mod why vendor":
		return goBool
	case "list f", "list tags", "list mod", "list compiler", "mod graph go":
		return goValue
	case "list modfile", "list overlay", "list reuse":
		return goPath
	case "list C", "doc C":
		return goDir
	}
	return goNotRead
}

// goReadFlags checks go list, doc, version, help, mod graph or mod why
// (sub) with args when every flag is one that only reads, and reports
// whether it did: false leaves the command to be checked as one that runs
// code.
func goReadFlags(c *checker, inv *invocation, sub string, args []word) bool {
	var paths, dirs, operands []word
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case !w.lit || !strings.HasPrefix(w.s, "-") || w.s == "-":
			operands = append(operands, w)
			continue
		case w.s == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(w.s, "-"), "=")
		kind := goReadFlagKind(sub, name)
		if kind == goNotRead {
			return false
		}
		if kind == goBool {
			continue // -json=Dir,Name takes its fields after "="
		}
		v := litWord(val)
		if !hasVal {
			if i+1 >= len(args) {
				return false
			}
			i++
			v = args[i]
		}
		switch {
		case name == "mod" && (!v.lit || v.s == "mod"):
			// -mod=mod rewrites go.mod and go.sum.
			return false
		case kind == goPath:
			paths = append(paths, v)
		case kind == goDir:
			dirs = append(dirs, v)
		}
	}
	if !c.need(inv, pRead) {
		return true
	}
	cwd := inv.cwd
	for _, d := range dirs {
		if cwd = c.chdir(inv, d, cwd); c.deny != nil {
			return true
		}
	}
	in := c.invocation(invocation{name: inv.name, argv: inv.argv, cwd: cwd, sub: inv.sub})
	for _, p := range paths {
		c.usePath(in, p, pathUse{acc: accRead})
	}
	if c.deny == nil {
		c.pathLikeArgs(in, operands)
	}
	return true
}
