// Package admin serves Switchyard's admin API under /api/v1: work items and
// their jobs, routing explanations, and ignored events. Later capabilities
// (agents, runs, approvals, audit, the web UI) mount their routes beside
// these.
package admin
