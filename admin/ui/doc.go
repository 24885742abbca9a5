// Package ui serves Switchyard's admin web UI under /admin/: pages rendered
// on the server with html/template, their CSS and scripts embedded, signed
// in to with a named API token or a configured user's password.
//
// # Security
//
// Every page but the sign-in form needs a session: an opaque random id in
// a cookie (HttpOnly, SameSite=Strict, Secure under TLS or an https
// public URL) naming a session the daemon keeps in memory, with an expiry.
// The session's identity is who every action runs as: approvals are
// decided as it and every change is audited with it (httpapi.IdentityFrom
// reads it, as for an API request). Every POST, PUT and DELETE carries the
// session's CSRF token (the form field csrf_token, or the X-CSRF-Token
// header) and is refused without it; the sign-in form carries a token of
// its own (a cookie and the same value in the form). Every answer has a
// strict Content-Security-Policy (no inline script or style, no framing),
// X-Content-Type-Options and Referrer-Policy, and every page is masked by
// the daemon's one redactor before it is sent. The daemon puts
// httpapi.Guard (Host and Origin) in front of all of it.
//
// # Adding a page
//
// A page is one file, rules.go, with its template, templates/rules.html,
// and one line in UI.pages, whose order is the navigation's. The file has
// a method returning the page:
//
//	func (u *UI) rulesPage() page {
//		return page{Nav: "Rules", Path: "/admin/rules", Mount: func(m *http.ServeMux) {
//			m.HandleFunc("GET /admin/rules", u.rules)
//			m.HandleFunc("POST /admin/rules", u.createRule)
//		}}
//	}
//
// The template defines "title" and "content", and any fragment the page
// refreshes live; a form includes {{template "csrf" $}}. Handlers use the
// helpers of render.go: u.render (the page in the layout), u.fragment (one
// named template alone, for an element with data-live="URL", which
// static/live.js reloads every few seconds), u.fail (an error as a page
// with its status), u.refusal (an error's status and message, for a page
// that shows it above its form), identity (who is signed in), u.audit
// (record a change with who made it) and u.record (audit a change already
// made, logging a failure to). CSRF is checked before a handler runs, so a
// handler never checks it itself.
package ui
