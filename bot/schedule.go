package bot

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule creates a work item for Agent in Thread at every firing of Spec.
type Schedule struct {
	Name   string
	Spec   string // standard 5-field cron or a descriptor such as @hourly
	Agent  string
	Thread Thread
	Text   string
}

// RoutedIngester persists events whose route is already decided; *Intake
// implements it.
type RoutedIngester interface {
	IngestRouted(ctx context.Context, ev *Event, route Route, parentID string) (IngestResult, error)
}

// SchedulerOptions configure a Scheduler.
type SchedulerOptions struct {
	Schedules []Schedule
	Store     ScheduleStore
	Intake    RoutedIngester
	// MaxCatchUp bounds how many missed firings of one schedule are made up
	// after downtime; default 10. Older ones are skipped with a warning.
	MaxCatchUp int
	Metrics    *Metrics
	Logger     *slog.Logger
	Now        func() time.Time
}

// Scheduler fires schedules. The last firing of each is persisted, and each
// firing is an event whose delivery id is the schedule name and the firing
// time, so a restart neither skips a firing (missed ones are made up) nor
// doubles one (the intake deduplicates), and "@every" intervals count from
// the last firing, so a restart does not move them.
type Scheduler struct {
	opts   SchedulerOptions
	parsed []cron.Schedule
}

// NewScheduler parses the specs; an error names the schedule.
func NewScheduler(opts SchedulerOptions) (*Scheduler, error) {
	if opts.MaxCatchUp <= 0 {
		opts.MaxCatchUp = 10
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Scheduler{opts: opts}
	for _, sc := range opts.Schedules {
		p, err := cron.ParseStandard(sc.Spec)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: cron %q: %w", sc.Name, sc.Spec, err)
		}
		s.parsed = append(s.parsed, p)
	}
	return s, nil
}

// Run fires schedules until ctx is cancelled.
func (s *Scheduler) Run(ctx context.Context) error {
	if len(s.opts.Schedules) == 0 {
		<-ctx.Done()
		return nil
	}
	for {
		next, err := s.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			s.opts.Logger.Error("schedules", slog.String("error", err.Error()))
			next = s.opts.Now().Add(10 * time.Second)
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Tick fires every firing due by now and returns when the next one is due.
func (s *Scheduler) Tick(ctx context.Context) (time.Time, error) {
	now := s.opts.Now().UTC()
	earliest := now.Add(24 * time.Hour)
	for i, sc := range s.opts.Schedules {
		next, err := s.fireDue(ctx, sc, s.parsed[i], now)
		if err != nil {
			return now, err
		}
		if next.Before(earliest) {
			earliest = next
		}
	}
	return earliest, nil
}

func (s *Scheduler) fireDue(ctx context.Context, sc Schedule, p cron.Schedule, now time.Time) (time.Time, error) {
	last, ok, err := s.opts.Store.LastFired(ctx, sc.Name)
	if err != nil {
		return now, fmt.Errorf("schedule %q: %w", sc.Name, err)
	}
	if !ok {
		// First start with this schedule: begin from now, do not invent
		// firings from before it existed.
		if err := s.opts.Store.SetLastFired(ctx, sc.Name, now); err != nil {
			return now, fmt.Errorf("schedule %q: %w", sc.Name, err)
		}
		return p.Next(now), nil
	}
	var due []time.Time
	for t := p.Next(last); !t.After(now); t = p.Next(t) {
		due = append(due, t)
	}
	if len(due) > s.opts.MaxCatchUp {
		s.opts.Logger.Warn("schedule missed firings while down; making up the latest only",
			slog.String("schedule", sc.Name), slog.Int("missed", len(due)), slog.Int("made_up", s.opts.MaxCatchUp))
		due = due[len(due)-s.opts.MaxCatchUp:]
	}
	for _, at := range due {
		if err := s.fire(ctx, sc, at); err != nil {
			return now, err
		}
		if err := s.opts.Store.SetLastFired(ctx, sc.Name, at); err != nil {
			return now, fmt.Errorf("schedule %q: %w", sc.Name, err)
		}
		last = at
	}
	// The next firing follows the last one, not now: "@every 1h" after a
	// restart at 10:30 fires at 11:00 if it last fired at 10:00. For a cron
	// spec the two are the same time.
	return p.Next(last), nil
}

func (s *Scheduler) fire(ctx context.Context, sc Schedule, at time.Time) error {
	ev := &Event{
		Source: SourceSchedule, Kind: KindScheduleTick,
		DeliveryID: sc.Name + "@" + at.UTC().Format(time.RFC3339),
		Actor:      "schedule:" + sc.Name, Text: sc.Text, Thread: sc.Thread, ReceivedAt: at,
		Requester: Requester{Source: SourceSchedule, ID: sc.Name},
	}
	route := Route{Agent: sc.Agent, Kind: RouteSchedule, Reason: fmt.Sprintf("schedule %q", sc.Name), Rule: sc.Name}
	res, err := s.opts.Intake.IngestRouted(ctx, ev, route, "")
	if err != nil {
		return fmt.Errorf("schedule %q firing at %s: %w", sc.Name, at.Format(time.RFC3339), err)
	}
	s.opts.Metrics.ScheduleFirings.WithLabelValues(sc.Name).Inc()
	if res.WorkItem != nil && !res.Duplicate {
		s.opts.Logger.Info("schedule fired", slog.String("schedule", sc.Name),
			slog.Time("at", at), slog.String("work_item", res.WorkItem.ID))
	}
	return nil
}
