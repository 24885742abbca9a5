package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/bot"
)

// routerWithRules builds a router of n rules of every kind, none of which
// matches benchEvent, so Route has to try them all: the worst case.
func routerWithRules(b *testing.B, n int) *bot.Router {
	b.Helper()
	agents := []string{"coder", "reviewer", "ops", "triage", "docs"}
	cfg := bot.RoutingConfig{}
	for i := range n {
		m := bot.Match{}
		switch i % 6 {
		case 0:
			m.Labels = []string{fmt.Sprintf("label-%d", i), fmt.Sprintf("area/%d", i)}
		case 1:
			m.Kinds = []string{fmt.Sprintf("github.check_run.%d*", i)}
		case 2:
			m.Repos = []string{fmt.Sprintf("org-%d/*", i)}
		case 3:
			m.Kinds = []string{"github.pull_request.*"}
			m.Paths = []string{fmt.Sprintf("services/svc-%d/**/*.go", i), fmt.Sprintf("**/migrations/%d_*.sql", i)}
		case 4:
			m.Text = fmt.Sprintf(`(?i)\bincident-%d\b|\bpage-%d\b`, i, i)
		case 5:
			m.Sources = []string{"slack"}
			m.Channels = []string{fmt.Sprintf("C%06d", i)}
		}
		cfg.Rules = append(cfg.Rules, bot.Rule{Name: fmt.Sprintf("rule-%d", i), Priority: i % 10, Agent: agents[i%len(agents)], Match: m})
	}
	infos := make([]bot.AgentInfo, len(agents))
	for i, a := range agents {
		infos[i] = bot.AgentInfo{Name: a}
	}
	r, err := bot.NewRouter(cfg, infos)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// benchEvent is a pull request with 30 changed files and a long body.
func benchEvent() *bot.Event {
	paths := make([]string, 30)
	for i := range paths {
		paths[i] = fmt.Sprintf("internal/pkg%d/file_%d.go", i%7, i)
	}
	ev := &bot.Event{
		Source: bot.SourceGitHub, Kind: "github.pull_request.opened", Repo: "acme/api", Org: "acme",
		Number: 42, Actor: "ana", Labels: []string{"enhancement", "needs-review"}, Paths: paths,
		Text: strings.Repeat("This change refactors the session cache and adds tests. ", 8),
	}
	ev.FillFromText()
	return ev
}

func measureRoute(r *bot.Router, ev *bot.Event, n int) latencies {
	lat := make(latencies, n)
	for i := range n {
		t0 := time.Now()
		r.Route(ev)
		lat[i] = time.Since(t0)
	}
	return lat
}

// BenchmarkRouter1000Rules measures routing decisions with 1,000 rules
// (target p99 under 100 µs) against a router with one rule, in the same run.
func BenchmarkRouter1000Rules(b *testing.B) {
	for range b.N {
		ev := benchEvent()
		big, small := routerWithRules(b, 1000), routerWithRules(b, 1)
		if got := big.Route(ev); got.Reason != "default" {
			b.Fatalf("the benchmark event must match no rule, got %+v", got)
		}
		measureRoute(big, ev, 2000) // warm up
		base := measureRoute(small, ev, 50000)
		lat := measureRoute(big, ev, 50000)
		p99 := lat.quantile(0.99)
		b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns")
		report(b, "router: decisions with 1,000 rules (none matching: every rule is tried)",
			fmt.Sprintf("1,000 rules: p50 %s, p99 %s", lat.quantile(0.5), p99),
			fmt.Sprintf("baseline, 1 rule: p50 %s, p99 %s; 1,000 rules cost %.0fx the baseline at p99",
				base.quantile(0.5), base.quantile(0.99), float64(p99)/float64(max(base.quantile(0.99), 1))),
			fmt.Sprintf("p99 is %.2f of the 100µs target: %s", float64(p99)/float64(100*time.Microsecond), verdict(p99 < 100*time.Microsecond)),
		)
	}
}
