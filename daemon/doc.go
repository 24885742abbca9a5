// Package daemon assembles Switchyard from its parts — store, router,
// intake, dispatcher, reporter and outbox, schedules, integrations, HTTP
// surface — and owns every long-running goroutine, stopping them in order at
// shutdown. cmd/switchyard stays a thin command line over it.
package daemon
