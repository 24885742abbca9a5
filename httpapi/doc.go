// Package httpapi holds the conventions every JSON endpoint of Switchyard's
// API shares: domain error codes mapped to HTTP status (the only place that
// mapping happens), bounded and strict request decoding, and bearer-token
// authentication.
package httpapi
