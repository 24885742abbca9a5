package bot

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// MaxRuleName is the most characters a routing rule's name may have, and
// MaxRuleText the most bytes of its regular expression over the text: the
// name is recorded with every decision the rule makes, and every event is
// matched against the expression.
const (
	MaxRuleName = 200
	MaxRuleText = 4096
)

// unreadable says why s cannot be a rule's value as written, "" when it
// can: it is not UTF-8, or it holds a control character (a tab and line
// ends allowed when lines is set, as a regular expression written over
// lines has) or one that changes the direction text is shown in, so that
// what is shown is not what is matched or recorded.
func unreadable(s string, lines bool) string {
	if !utf8.ValidString(s) {
		return "not UTF-8 text"
	}
	i := strings.IndexFunc(s, func(r rune) bool {
		if lines && (r == '\t' || r == '\n' || r == '\r') {
			return false
		}
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	})
	if i < 0 {
		return ""
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return fmt.Sprintf("holds the control character U+%04X", r)
}

// fallbackAgent receives what nothing else routes when the routing config
// names no default agent.
const fallbackAgent = "triage"

// Router decides which agent handles an event. It is compiled once from the
// routing config and is safe for concurrent use: Route only reads.
//
// The order of precedence is: an explicit mention of a known agent, a command
// with a mapping, the rules by priority, a content keyword, the default agent.
type Router struct {
	agents   map[string]routerAgent // by lower-cased name
	commands map[string]routerCommand
	rules    []compiledRule // evaluation order: the config's and the stored rules
	// configRules are the config file's rules in file order, and
	// configNames their names (name → index); WithStoredRules merges
	// stored rules with them into rules.
	configRules []compiledRule
	configNames map[string]int
	// stored maps a stored rule's name to its id, for the duplicate check
	// of rules made later.
	stored       map[string]StoredRule
	content      []contentKeyword
	defaultAgent string
	needsPaths   bool
	names        []string // the agents' names, sorted
	threadWindow time.Duration
	// Packages' entry points (WithEntrypoints): their commands, their
	// event kinds in evaluation order, and all of them for listings.
	entryCommands map[string]entryCommand
	entries       []*compiledEntry
	entryInfos    []*compiledEntry
}

var _ Decider = (*Router)(nil)

// The reasons are built at compile time so that Route does not format
// strings on the hot path.
type routerAgent struct {
	name    string
	mention string // "mention @coder"
}

type routerCommand struct {
	agent  string
	reason string // "command /deploy"
}

type contentKeyword struct {
	agent   string
	keyword string // lower-cased
	reason  string // `content: keyword "deploy"`
	// wordStart and wordEnd say whether the keyword begins or ends with a
	// word character; only then must its neighbour in the text be a non-word
	// character, so "c++" still matches in "c++,".
	wordStart, wordEnd bool
}

type compiledRule struct {
	info   RuleInfo
	reason string // `rule "bugs" (priority 100)`
	origin string // a stored rule's origin, for its decisions; "" for the config's

	// Conditions, checked cheapest first. A nil slice means "not present".
	sources  []string
	kinds    []glob // lower-cased
	channels []string
	actors   []string
	repos    []glob // lower-cased
	labels   []string
	paths    []glob
	text     *textMatcher
}

// RuleInfo describes a compiled rule for listings such as
// `switchyard rules list`.
type RuleInfo struct {
	Name     string `json:"name"`
	Priority int    `json:"priority"`
	Agent    string `json:"agent"`
	// Match is a one-line summary of the conditions, for people.
	Match string `json:"match"`
	// Origin is where the rule comes from: the config file and line
	// ("config.yaml:12", or "config" when the line is not known),
	// "stored:<id>" for a rule made through the API or the admin UI, or
	// "package:<name>" for a package's entry point.
	Origin string `json:"origin"`
	// ID, the author and the times are a stored rule's.
	ID        string     `json:"id,omitempty"`
	CreatedBy string     `json:"created_by,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	UpdatedBy string     `json:"updated_by,omitempty"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// NewRouter compiles cfg for the given agents. It validates every name,
// regular expression and glob and reports each problem as a *FieldError whose
// Field is the config path ("routing.rules[2].agent"); several problems are
// joined with errors.Join, in config order.
//
// Every rule must have a name, unique within the config: the name is stored
// with each decision the rule makes, so it has to mean something to a person
// and stay stable when rules are reordered.
//
// Commands from cfg override the built-in ones (DefaultCommands); a built-in
// command whose agent is not among agents is dropped silently, so a team that
// removes the docs agent does not have to remove /docs as well.
func NewRouter(cfg RoutingConfig, agents []AgentInfo) (*Router, error) {
	r := &Router{
		agents:   make(map[string]routerAgent, len(agents)),
		commands: map[string]routerCommand{},
	}
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}

	for _, a := range agents {
		if a.Name == "" {
			continue
		}
		key := strings.ToLower(a.Name)
		if _, dup := r.agents[key]; dup {
			continue
		}
		r.agents[key] = routerAgent{name: a.Name, mention: "mention @" + a.Name}
	}
	for _, a := range r.agents {
		r.names = append(r.names, a.name)
	}
	slices.Sort(r.names)
	known := func(name string) bool {
		a, ok := r.agents[strings.ToLower(name)]
		return ok && a.name == name
	}

	switch {
	case cfg.ThreadWindow < 0:
		fail("routing.thread_window", "%s is negative", cfg.ThreadWindow)
	case cfg.ThreadWindow == 0:
		r.threadWindow = DefaultThreadWindow
	default:
		r.threadWindow = cfg.ThreadWindow
	}
	r.defaultAgent = cfg.DefaultAgent
	if r.defaultAgent == "" {
		r.defaultAgent = fallbackAgent
	}
	if !known(r.defaultAgent) {
		fail("routing.default_agent", "unknown agent %q", r.defaultAgent)
	}

	for name, agent := range DefaultCommands() {
		if known(agent) {
			r.commands[name] = routerCommand{agent: agent, reason: "command /" + name}
		}
	}
	custom := make(map[string]string, len(cfg.Commands)) // lower-cased → as written
	for _, name := range slices.Sorted(maps.Keys(cfg.Commands)) {
		agent := cfg.Commands[name]
		field := "routing.commands" + keyPath(name)
		lower := strings.ToLower(name)
		switch {
		case strings.HasPrefix(name, "/"):
			fail(field, "bad command name %q: write it without the slash", name)
			continue
		case !isPlainKey(name):
			fail(field, "bad command name %q: want letters, digits, - and _", name)
			continue
		}
		if prev, dup := custom[lower]; dup {
			fail(field, "duplicate command %q (also %q; command names are case-insensitive)", name, prev)
			continue
		}
		custom[lower] = name
		switch {
		case agent == "":
			fail(field, "no agent given")
		case !known(agent):
			fail(field, "unknown agent %q", agent)
		default:
			r.commands[lower] = routerCommand{agent: agent, reason: "command /" + lower}
		}
	}

	r.configNames = make(map[string]int, len(cfg.Rules))
	for i, rule := range cfg.Rules {
		at := fmt.Sprintf("routing.rules[%d]", i)
		cr, ruleErrs := compileRule(at, rule, known)
		errs = append(errs, ruleErrs...)
		if rule.Name != "" {
			if j, dup := r.configNames[rule.Name]; dup {
				errs = append(errs, duplicateRule(at, rule.Name, fmt.Sprintf("routing.rules[%d]", j)))
				continue
			}
			r.configNames[rule.Name] = i
		}
		if len(ruleErrs) == 0 {
			r.configRules = append(r.configRules, cr)
			r.needsPaths = r.needsPaths || cr.paths != nil
		}
	}
	r.rules = mergeRules(r.configRules, nil)

	for _, a := range agents {
		if a.Name == "" {
			continue
		}
		for _, kw := range a.Keywords {
			kw = strings.ToLower(strings.TrimSpace(kw))
			if kw == "" {
				continue
			}
			first, _ := utf8.DecodeRuneInString(kw)
			last, _ := utf8.DecodeLastRuneInString(kw)
			r.content = append(r.content, contentKeyword{
				agent:     a.Name,
				keyword:   kw,
				reason:    "content: keyword " + strconv.Quote(kw),
				wordStart: isWordRune(first),
				wordEnd:   isWordRune(last),
			})
		}
	}

	if len(errs) > 0 {
		if len(errs) == 1 {
			return nil, errs[0]
		}
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// compileRule checks and compiles one rule, of the config or stored: every
// problem is a *FieldError whose Field is at followed by the rule's field
// (".agent", ".match.text"); at is "routing.rules[2]" for the config's,
// "" for a rule on its own, whose fields are then named alone ("agent").
// It is the one check of a rule, so both read the same.
func compileRule(at string, rule Rule, known func(string) bool) (compiledRule, []error) {
	var errs []error
	fail := func(field, format string, args ...any) {
		path := at + field
		if at == "" {
			path = strings.TrimPrefix(field, ".")
		}
		errs = append(errs, &FieldError{Field: path, Msg: fmt.Sprintf(format, args...)})
	}

	switch n := utf8.RuneCountInString(rule.Name); {
	case strings.TrimSpace(rule.Name) == "":
		fail(".name", "a rule needs a name (it is recorded with every decision the rule makes)")
	case n > MaxRuleName:
		fail(".name", "%d characters, over the %d a rule's name may have (it is recorded with every decision the rule makes)", n, MaxRuleName)
	default:
		if why := unreadable(rule.Name, false); why != "" {
			fail(".name", "%s: a rule's name is shown to people and recorded as written", why)
		}
	}
	switch {
	case rule.Agent == "":
		fail(".agent", "a rule needs an agent")
	case !known(rule.Agent):
		fail(".agent", "unknown agent %q", rule.Agent)
	}

	m := rule.Match
	origin := cmp.Or(rule.Origin, OriginConfig)
	cr := compiledRule{
		info:   RuleInfo{Name: rule.Name, Priority: rule.Priority, Agent: rule.Agent, Match: Summarize(m), Origin: origin},
		reason: fmt.Sprintf("rule %q (priority %d)", rule.Name, rule.Priority),
	}
	if strings.HasPrefix(origin, OriginStored) {
		cr.reason = fmt.Sprintf("rule %q (priority %d, %s)", rule.Name, rule.Priority, origin)
		cr.origin = origin
	}
	strs := func(field string, in []string, norm func(string) string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, 0, len(in))
		for j, s := range in {
			s = norm(s)
			if s == "" {
				fail(fmt.Sprintf(".match.%s[%d]", field, j), "empty value")
				continue
			}
			if why := unreadable(s, false); why != "" {
				fail(fmt.Sprintf(".match.%s[%d]", field, j), "%s", why)
				continue
			}
			out = append(out, s)
		}
		return out
	}
	globs := func(field string, in []string, lower bool) []glob {
		if in == nil {
			return nil
		}
		out := make([]glob, 0, len(in))
		for j, p := range in {
			if why := unreadable(p, false); why != "" {
				fail(fmt.Sprintf(".match.%s[%d]", field, j), "%s", why)
				continue
			}
			g, err := compileGlob(p, lower)
			if err != nil {
				fail(fmt.Sprintf(".match.%s[%d]", field, j), "%v", err)
				continue
			}
			out = append(out, g)
		}
		return out
	}
	trim := strings.TrimSpace

	cr.sources = strs("sources", m.Sources, func(s string) string { return strings.ToLower(trim(s)) })
	for j, s := range cr.sources {
		switch s {
		case SourceLocal, SourceGitHub, SourceSlack, SourceSchedule:
		default:
			fail(fmt.Sprintf(".match.sources[%d]", j), "unknown source %q (want local, github, slack or schedule)", s)
		}
	}
	cr.kinds = globs("kinds", m.Kinds, true)
	cr.channels = strs("channels", m.Channels, func(s string) string { return strings.TrimPrefix(trim(s), "#") })
	cr.actors = strs("actors", m.Actors, func(s string) string { return strings.TrimPrefix(trim(s), "@") })
	cr.repos = globs("repos", m.Repos, true)
	cr.labels = strs("labels", m.Labels, trim)
	cr.paths = globs("paths", m.Paths, false)
	switch why := unreadable(m.Text, true); {
	case len(m.Text) > MaxRuleText:
		fail(".match.text", "%d bytes, over the %d a rule's regular expression may have (every event is matched against it)", len(m.Text), MaxRuleText)
	case why != "":
		fail(".match.text", "%s", why)
	case m.Text != "":
		tm, err := compileText(m.Text)
		if err != nil {
			why := err.Error()
			var se *syntax.Error
			if errors.As(err, &se) {
				why = string(se.Code)
			}
			fail(".match.text", "bad regular expression %q: %s", m.Text, why)
		}
		cr.text = tm
	}
	return cr, errs
}

// Route decides the agent for ev. It never fails: an event nothing else
// claims goes to the default agent.
func (r *Router) Route(ev *Event) Route {
	for _, m := range ev.Mentions {
		if a, ok := r.agents[strings.ToLower(m)]; ok {
			return Route{Agent: a.name, Kind: RouteMention, Reason: a.mention}
		}
	}
	route := r.routeUnmentioned(ev)
	if len(ev.Mentions) > 0 {
		// The text named someone, but no agent.
		route.Unknown = ev.Mentions
		switch route.Kind {
		case RouteDefault:
			route.Reason = "default: " + NoAgent(ev.Mentions, r.names)
		case RouteKeyword:
			// A guess from the words, so the name the person gave is
			// worth saying too.
			route.Reason += "; " + NoAgent(ev.Mentions, r.names)
		}
	}
	return route
}

// routeUnmentioned routes an event that mentions no agent.
func (r *Router) routeUnmentioned(ev *Event) Route {
	if ev.Command != "" {
		name := strings.ToLower(ev.Command)
		if c, ok := r.commands[name]; ok {
			return Route{Agent: c.agent, Kind: RouteCommand, Reason: c.reason}
		}
		if route, ok := r.entryCommandRoute(ev, name); ok {
			return route
		}
	}
	// strings.ToLower returns its argument when there is nothing to lower,
	// so the common case allocates nothing.
	in := routeInput{ev: ev, kind: strings.ToLower(ev.Kind), repo: strings.ToLower(ev.Repo)}
	for i := range r.rules {
		if cr := &r.rules[i]; cr.matches(&in) {
			return Route{Agent: cr.info.Agent, Kind: RouteRule, Reason: cr.reason, Rule: cr.info.Name, Origin: cr.origin}
		}
	}
	if route, ok := r.entryRuleRoute(&in); ok {
		return route
	}
	if len(r.content) > 0 && ev.Text != "" {
		text, _ := in.lowerText()
		for i := range r.content {
			if c := &r.content[i]; c.in(text) {
				return Route{Agent: c.agent, Kind: RouteKeyword, Reason: c.reason}
			}
		}
	}
	return Route{Agent: r.defaultAgent, Kind: RouteDefault, Reason: string(RouteDefault)}
}

// NoAgent says that names are no agents' and suggests the agents people
// probably meant: `no agent "@codr" (did you mean @coder?)`.
func NoAgent(names, agents []string) string {
	var b strings.Builder
	b.WriteString("no agent ")
	seen := map[string]bool{}
	for _, n := range names {
		key := strings.ToLower(n)
		if seen[key] {
			continue
		}
		if len(seen) > 0 {
			b.WriteString(", ")
		}
		seen[key] = true
		b.WriteString(strconv.Quote("@" + n))
		if s := SuggestAgent(n, agents); s != "" {
			b.WriteString(" (did you mean @" + s + "?)")
		}
	}
	return b.String()
}

// SuggestAgent returns the agent whose name is closest to name, at most
// two edits away and closer than the name is long, or "".
func SuggestAgent(name string, agents []string) string {
	name = strings.ToLower(name)
	best, bestDist := "", 3
	for _, a := range agents {
		if d := editDistance(name, strings.ToLower(a)); d < bestDist && d < utf8.RuneCountInString(name) {
			best, bestDist = a, d
		}
	}
	return best
}

// Agents returns the names of the agents the router knows, sorted.
func (r *Router) Agents() []string { return slices.Clone(r.names) }

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours, by rune.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	prev2 := make([]int, len(y)+1)
	prev := make([]int, len(y)+1)
	cur := make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}

// routeInput is what Route derives from an event once, for every rule.
type routeInput struct {
	ev         *Event
	kind, repo string // lower-cased

	lowered bool
	lower   string // ev.Text lower-cased, once asked for
	ascii   bool

	indexed bool
	paths   pathIndex
}

// pathIndex holds the distinct first segments and extensions of an event's
// changed paths, so a path glob that needs a segment or extension the pull
// request does not touch is rejected without looking at each path. The
// arrays keep it off the heap; a pull request with more distinct values than
// fit is simply not indexed.
type pathIndex struct {
	segs, exts   [16]string
	nSegs, nExts int
	full         bool
}

func (in *routeInput) anyPath(gs []glob) bool {
	if !in.indexed {
		in.indexed = true
		in.paths.build(in.ev.Paths)
	}
	for i := range gs {
		g := &gs[i]
		if !in.paths.full && (g.seg != "" && !in.paths.hasSeg(g.seg) || g.ext != "" && !in.paths.hasExt(g.ext)) {
			continue
		}
		for _, p := range in.ev.Paths {
			if g.match(p) {
				return true
			}
		}
	}
	return false
}

func (x *pathIndex) build(paths []string) {
	for _, p := range paths {
		seg, _, _ := strings.Cut(p, "/")
		ext := pathExt(p)
		if !slices.Contains(x.segs[:x.nSegs], seg) {
			if x.nSegs == len(x.segs) {
				x.full = true
				return
			}
			x.segs[x.nSegs] = seg
			x.nSegs++
		}
		if !slices.Contains(x.exts[:x.nExts], ext) {
			if x.nExts == len(x.exts) {
				x.full = true
				return
			}
			x.exts[x.nExts] = ext
			x.nExts++
		}
	}
}

func (x *pathIndex) hasSeg(s string) bool { return slices.Contains(x.segs[:x.nSegs], s) }
func (x *pathIndex) hasExt(s string) bool { return slices.Contains(x.exts[:x.nExts], s) }

// pathExt returns what follows the last dot of the last segment of p, or "".
func pathExt(p string) string {
	base := p[strings.LastIndexByte(p, '/')+1:]
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		return base[i+1:]
	}
	return ""
}

// lowerText returns the event's text lower-cased, and whether it is ASCII.
func (in *routeInput) lowerText() (string, bool) {
	if !in.lowered {
		in.lowered = true
		in.lower = strings.ToLower(in.ev.Text)
		in.ascii = isASCII(in.ev.Text)
	}
	return in.lower, in.ascii
}

// Rules returns the compiled rules in evaluation order: the config's,
// then the event kinds of packages' entry points.
func (r *Router) Rules() []RuleInfo {
	out := make([]RuleInfo, len(r.rules), len(r.rules)+len(r.entries))
	for i := range r.rules {
		out[i] = r.rules[i].info
	}
	for _, e := range r.entries {
		out = append(out, e.info)
	}
	return out
}

// Commands returns the command table, built-in, configured and those of
// packages' entry points (which route only where their package is
// enabled), by command name (lower-cased, without the slash) to agent.
func (r *Router) Commands() map[string]string {
	out := make(map[string]string, len(r.commands)+len(r.entryCommands))
	for name, c := range r.commands {
		out[name] = c.agent
	}
	for name, c := range r.entryCommands {
		out[name] = c.entry.agent
	}
	return out
}

// ThreadWindow returns how long a finished agent keeps its thread
// (routing.thread_window).
func (r *Router) ThreadWindow() time.Duration { return r.threadWindow }

// DefaultAgent returns the agent that receives what nothing else routes.
func (r *Router) DefaultAgent() string { return r.defaultAgent }

// NeedsPaths reports whether any rule matches on changed paths. Sources that
// must make an extra request to learn a pull request's files (GitHub) do so
// only then.
func (r *Router) NeedsPaths() bool { return r.needsPaths }

func (cr *compiledRule) matches(in *routeInput) bool {
	ev := in.ev
	if cr.sources != nil && !containsFold(cr.sources, ev.Source) {
		return false
	}
	if cr.kinds != nil && !anyGlob(cr.kinds, in.kind) {
		return false
	}
	if cr.channels != nil && !containsFold(cr.channels, ev.Channel) {
		return false
	}
	if cr.actors != nil && !containsFold(cr.actors, ev.Actor) {
		return false
	}
	if cr.repos != nil && !anyGlob(cr.repos, in.repo) {
		return false
	}
	if cr.labels != nil && !anyFold(cr.labels, ev.Labels) {
		return false
	}
	if cr.paths != nil && !in.anyPath(cr.paths) {
		return false
	}
	if cr.text != nil && !cr.text.match(in) {
		return false
	}
	return true
}

func containsFold(list []string, s string) bool {
	if s == "" {
		return false
	}
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func anyFold(want, have []string) bool {
	for _, h := range have {
		if containsFold(want, h) {
			return true
		}
	}
	return false
}

func anyGlob(gs []glob, s string) bool {
	for i := range gs {
		if gs[i].match(s) {
			return true
		}
	}
	return false
}

// in reports whether the keyword occurs in text as a whole word. Both are
// lower-cased.
func (c *contentKeyword) in(text string) bool {
	for off := 0; off < len(text); {
		i := strings.Index(text[off:], c.keyword)
		if i < 0 {
			return false
		}
		start := off + i
		end := start + len(c.keyword)
		before, _ := utf8.DecodeLastRuneInString(text[:start])
		after, _ := utf8.DecodeRuneInString(text[end:])
		if (!c.wordStart || start == 0 || !isWordRune(before)) &&
			(!c.wordEnd || end == len(text) || !isWordRune(after)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(text[start:])
		off = start + size
	}
	return false
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// glob is a doublestar pattern with fast paths for the shapes rules use
// most: a literal ("github.issues.opened") and a literal prefix followed by a
// single star ("github.pull_request.*"). Any other pattern is first checked
// against the literal text every match must start and end with, which
// rejects most paths of a large pull request without running the general
// matcher. Every path answers exactly as doublestar.Match would.
type glob struct {
	pattern string
	shape   globShape
	prefix  string // every match starts with it
	suffix  string // every match ends with it (globGeneral only)
	// seg is the first path segment every match has, ext the extension
	// (see pathExt); "" when the pattern does not fix them.
	seg, ext string
}

type globShape uint8

const (
	globGeneral globShape = iota
	globLiteral
	globPrefixStar
)

const globMeta = `*?[]{}\`

func compileGlob(pattern string, lower bool) (glob, error) {
	if lower {
		pattern = strings.ToLower(pattern)
	}
	if strings.TrimSpace(pattern) == "" {
		return glob{}, errors.New("empty value")
	}
	if !doublestar.ValidatePattern(pattern) {
		return glob{}, fmt.Errorf("bad glob %q: %v", pattern, doublestar.ErrBadPattern)
	}
	g := glob{pattern: pattern}
	first := strings.IndexAny(pattern, globMeta)
	last := strings.LastIndexAny(pattern, globMeta)
	switch {
	case first < 0:
		g.shape = globLiteral
	case first == len(pattern)-1 && pattern[first] == '*':
		g.shape = globPrefixStar
		g.prefix = pattern[:first]
	default:
		// "a/**" also matches "a", so the separator before a meta
		// character is not part of the guaranteed prefix; "**/x.md" also
		// matches "x.md", so the suffix starts after the last separator.
		g.prefix = strings.TrimSuffix(pattern[:first], "/")
		g.suffix = pattern[last+1:]
		if i := strings.LastIndexByte(g.suffix, '/'); i >= 0 {
			g.suffix = g.suffix[i+1:]
		}
	}
	switch g.shape {
	case globLiteral:
		g.seg, _, _ = strings.Cut(pattern, "/")
		g.ext = pathExt(pattern)
	default:
		if seg, _, ok := strings.Cut(pattern[:first], "/"); ok {
			g.seg = seg
		}
		if i := strings.LastIndexByte(g.suffix, '.'); i >= 0 {
			g.ext = g.suffix[i+1:]
		}
	}
	return g, nil
}

func (g *glob) match(s string) bool {
	switch g.shape {
	case globLiteral:
		return s == g.pattern
	case globPrefixStar:
		return strings.HasPrefix(s, g.prefix) && strings.IndexByte(s[len(g.prefix):], '/') < 0
	}
	if !strings.HasPrefix(s, g.prefix) || !strings.HasSuffix(s, g.suffix) {
		return false
	}
	return doublestar.MatchUnvalidated(g.pattern, s)
}

// textMatcher is a rule's regular expression with a cheap test in front:
// literals of which the text must contain at least one for the expression to
// match at all, found in the parsed expression ("deploy" for `deploy\b`,
// "incident" or "outage" for `incident|outage`). Most rules' texts are
// rejected by substring searches instead of a run of the regexp engine.
type textMatcher struct {
	re *regexp.Regexp
	// any is empty when no literal can be named.
	any []requiredLit
}

// requiredLit is one literal the text may contain. When fold is set the
// expression matches lit case-insensitively and lit is lower-cased ASCII.
type requiredLit struct {
	lit  string
	fold bool
	// pivot is the index of lit's rarest byte in English text: searching
	// for it first skips most candidate positions ("ticket-42" is looked
	// for by its "-", not by each "t" of the text).
	pivot int
}

func compileText(expr string) (*textMatcher, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	tm := &textMatcher{re: re}
	if parsed, err := syntax.Parse(expr, syntax.Perl); err == nil {
		tm.any = requiredLits(parsed)
	}
	for i := range tm.any {
		rl := &tm.any[i]
		for j := range len(rl.lit) {
			if byteRarity(rl.lit[j]) > byteRarity(rl.lit[rl.pivot]) {
				rl.pivot = j
			}
		}
	}
	return tm, nil
}

// requiredLits returns literals of which every text re matches contains at
// least one, or nil when it cannot name such a set.
func requiredLits(re *syntax.Regexp) []requiredLit {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLits(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLits(re.Sub[0])
		}
	case syntax.OpLiteral:
		lit := string(re.Rune)
		fold := re.Flags&syntax.FoldCase != 0
		if fold && !isASCII(lit) {
			// Unicode case folding is wider than lower-casing (ſ folds
			// to s); leave such literals to the engine.
			return nil
		}
		if fold {
			lit = strings.ToLower(lit)
		}
		return []requiredLit{{lit: lit, fold: fold}}
	case syntax.OpConcat:
		// Every part is required: keep the set whose shortest literal is
		// longest, the most selective.
		var best []requiredLit
		for _, sub := range re.Sub {
			if set := requiredLits(sub); set != nil && (best == nil || shortest(set) > shortest(best)) {
				best = set
			}
		}
		return best
	case syntax.OpAlternate:
		// One branch matches: each must name a literal.
		var out []requiredLit
		for _, sub := range re.Sub {
			set := requiredLits(sub)
			if set == nil {
				return nil
			}
			out = append(out, set...)
		}
		return out
	}
	return nil
}

func shortest(set []requiredLit) int {
	n := len(set[0].lit)
	for _, rl := range set[1:] {
		n = min(n, len(rl.lit))
	}
	return n
}

// byteRarity ranks how seldom b occurs in English text: space and the
// letters by frequency, then everything else.
func byteRarity(b byte) int {
	const common = " etaoinsrhldcumfpgwybvkxjqz"
	if b >= 'A' && b <= 'Z' {
		b += 'a' - 'A'
	}
	if i := strings.IndexByte(common, b); i >= 0 {
		return i
	}
	return len(common)
}

// containsPivot reports whether s contains lit, scanning s for lit's byte at
// pivot.
func containsPivot(s, lit string, pivot int) bool {
	c := lit[pivot]
	// Positions of c in s that leave room for lit around it.
	for i, last := pivot, len(s)-len(lit)+pivot; i <= last; {
		j := strings.IndexByte(s[i:last+1], c)
		if j < 0 {
			return false
		}
		i += j
		if s[i-pivot:i-pivot+len(lit)] == lit {
			return true
		}
		i++
	}
	return false
}

func (tm *textMatcher) match(in *routeInput) bool {
	if len(tm.any) == 0 || tm.mayMatch(in) {
		return tm.re.MatchString(in.ev.Text)
	}
	return false
}

// mayMatch reports whether the text contains one of the required literals.
func (tm *textMatcher) mayMatch(in *routeInput) bool {
	text := in.ev.Text
	for _, rl := range tm.any {
		if !rl.fold {
			if containsPivot(text, rl.lit, rl.pivot) {
				return true
			}
			continue
		}
		// For ASCII text, lower-casing is exactly the regexp's case
		// folding; other text goes to the engine unfiltered.
		l, ascii := in.lowerText()
		if !ascii || containsPivot(l, rl.lit, rl.pivot) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Summarize renders a match for people: "kinds github.issues.*; labels bug, defect".
func Summarize(m Match) string {
	var parts []string
	add := func(name string, vals []string) {
		if vals != nil {
			parts = append(parts, name+" "+strings.Join(vals, ", "))
		}
	}
	add("sources", m.Sources)
	add("kinds", m.Kinds)
	add("channels", m.Channels)
	add("actors", m.Actors)
	add("repos", m.Repos)
	add("labels", m.Labels)
	add("paths", m.Paths)
	if m.Text != "" {
		parts = append(parts, "text /"+m.Text+"/")
	}
	if len(parts) == 0 {
		return "any event"
	}
	return strings.Join(parts, "; ")
}

// isPlainKey reports whether s is made of ASCII letters, digits, "-" and
// "_" only: the spelling of command names and of map keys a config path
// writes without quotes.
func isPlainKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

// keyPath spells a map key in a config path the way the config loader does:
// ".deploy" for a plain key, `["a b"]` for anything else.
func keyPath(key string) string {
	if isPlainKey(key) {
		return "." + key
	}
	return "[" + strconv.Quote(key) + "]"
}
