// Package admin serves Switchyard's admin API under /api/v1: work items and
// their jobs, routing explanations, ignored events, agents and rules, the run
// ledger, skills and packages, approvals, the audit log, thread resets and
// config reloads. It sits above bot and httpapi, so imports point down.
package admin
