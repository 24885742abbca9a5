package bot

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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
	// Schedules fire until Prepare's commit replaces them.
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
	opts SchedulerOptions
	wake chan struct{} // a commit replaced the schedules

	mu  sync.Mutex
	set []plannedSchedule
	// moved holds schedules a reload added or changed, with when: no
	// firing before then is made up, as for a schedule seen the first time.
	moved map[string]time.Time
}

// plannedSchedule is a schedule with its parsed spec.
type plannedSchedule struct {
	Schedule
	spec cron.Schedule
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
	set, err := planSchedules(opts.Schedules)
	if err != nil {
		return nil, err
	}
	return &Scheduler{opts: opts, wake: make(chan struct{}, 1), set: set, moved: map[string]time.Time{}}, nil
}

func planSchedules(list []Schedule) ([]plannedSchedule, error) {
	set := make([]plannedSchedule, 0, len(list))
	for _, sc := range list {
		p, err := cron.ParseStandard(sc.Spec)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: cron %q: %w", sc.Name, sc.Spec, err)
		}
		set = append(set, plannedSchedule{Schedule: sc, spec: p})
	}
	return set, nil
}

// Prepare parses list to replace the schedules when the config is
// reloaded; the returned commit makes the replacement and cannot fail. A
// schedule the commit adds or whose spec it changes counts from the commit,
// like a schedule seen for the first time: firings its new spec would have
// had before are not made up. An unchanged schedule keeps its times.
func (s *Scheduler) Prepare(list []Schedule) (commit func(), err error) {
	set, err := planSchedules(list)
	if err != nil {
		return nil, err
	}
	return func() {
		s.mu.Lock()
		old := make(map[string]string, len(s.set))
		for _, p := range s.set {
			old[p.Name] = p.Spec
		}
		now := s.opts.Now().UTC()
		for _, p := range set {
			if spec, ok := old[p.Name]; !ok || spec != p.Spec {
				s.moved[p.Name] = now
			}
		}
		s.set = set
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}, nil
}

// schedules returns the schedules in effect.
func (s *Scheduler) schedules() []plannedSchedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

// movedAt returns when a reload added or changed the schedule, if one did
// and its firing time has not been moved there yet.
func (s *Scheduler) movedAt(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.moved[name]
	return t, ok
}

func (s *Scheduler) settled(name string, at time.Time) {
	s.mu.Lock()
	if s.moved[name].Equal(at) {
		delete(s.moved, name)
	}
	s.mu.Unlock()
}

// Run fires schedules until ctx is cancelled.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		next := time.Time{}
		if len(s.schedules()) > 0 {
			var err error
			next, err = s.Tick(ctx)
			if err != nil && ctx.Err() == nil {
				s.opts.Logger.Error("schedules", slog.String("error", err.Error()))
				next = s.opts.Now().Add(10 * time.Second)
			}
		}
		var (
			timer *time.Timer
			due   <-chan time.Time
		)
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			due = timer.C
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// Tick fires every firing due by now and returns when the next one is due.
func (s *Scheduler) Tick(ctx context.Context) (time.Time, error) {
	now := s.opts.Now().UTC()
	earliest := now.Add(24 * time.Hour)
	for _, p := range s.schedules() {
		next, err := s.fireDue(ctx, p.Schedule, p.spec, now)
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
	if at, ok := s.movedAt(sc.Name); ok {
		if last.Before(at) {
			if err := s.opts.Store.SetLastFired(ctx, sc.Name, at); err != nil {
				return now, fmt.Errorf("schedule %q: %w", sc.Name, err)
			}
			last = at
		}
		s.settled(sc.Name, at)
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
