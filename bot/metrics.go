package bot

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the core's Prometheus collectors. They are registered on the
// registry the daemon passes in, never on a global one.
type Metrics struct {
	Events          *prometheus.CounterVec   // by source and kind
	Duplicates      *prometheus.CounterVec   // by source
	Ignored         *prometheus.CounterVec   // by source and reason
	Routes          *prometheus.CounterVec   // by reason kind
	JobDuration     *prometheus.HistogramVec // by agent and outcome
	Jobs            *prometheus.CounterVec   // by outcome
	OutboxSent      *prometheus.CounterVec   // by source and kind
	OutboxFailures  *prometheus.CounterVec   // by source and whether the message died
	OutboxFound     *prometheus.CounterVec   // by source: messages an interrupted attempt had posted, adopted
	SinkUp          *prometheus.GaugeVec     // by destination: 1 while deliveries go through, 0 while it is down
	ScheduleFirings *prometheus.CounterVec   // by schedule
	RunsAwaiting    prometheus.Gauge         // runs waiting for a person, holding no worker
}

// NewMetrics creates the collectors and registers them on reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_events_total", Help: "Events received, by source and kind.",
		}, []string{"source", "kind"}),
		Duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_events_duplicate_total", Help: "Duplicate deliveries that changed nothing, by source.",
		}, []string{"source"}),
		Ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_events_ignored_total", Help: "Events kept as ingress records, by source and reason.",
		}, []string{"source", "reason"}),
		Routes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_route_decisions_total", Help: "Routing decisions, by kind (mention, command, rule, thread, keyword, default, handoff, schedule).",
		}, []string{"kind"}),
		JobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_job_duration_seconds", Help: "Job run time, by agent and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}, []string{"agent", "outcome"}),
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_jobs_total", Help: "Jobs ended, by outcome (succeeded, failed, cancelled, released, abandoned).",
		}, []string{"outcome"}),
		OutboxSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_outbox_delivered_total", Help: "Outbox deliveries, by sink and message kind.",
		}, []string{"sink", "kind"}),
		OutboxFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_outbox_failures_total", Help: "Failed outbox deliveries, by sink; dead=true when the message was given up.",
		}, []string{"sink", "dead"}),
		OutboxFound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_outbox_found_total",
			Help: "Outbox messages an interrupted attempt had already posted, found on the platform and updated instead of posted again, by sink.",
		}, []string{"sink"}),
		SinkUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_sink_up",
			Help: "Whether outbox messages reach a destination (1) or it is down and its messages wait (0), by destination: github/<owner> (one GitHub App installation), slack, local.",
		}, []string{"sink"}),
		ScheduleFirings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_schedule_firings_total", Help: "Schedule firings, by schedule.",
		}, []string{"schedule"}),
		RunsAwaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_runs_awaiting", Help: "Runs waiting for a person (an approval) without holding a worker.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Events, m.Duplicates, m.Ignored, m.Routes, m.JobDuration, m.Jobs,
			m.OutboxSent, m.OutboxFailures, m.OutboxFound, m.SinkUp, m.ScheduleFirings, m.RunsAwaiting)
	}
	return m
}
