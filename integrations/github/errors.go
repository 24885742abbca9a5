package github

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

// defaultRetryAfter is how long to wait after a rate-limit answer that says
// nothing of when to come back; GitHub's guidance is at least a minute.
const defaultRetryAfter = time.Minute

// closeTokenError closes the body ghinstallation leaves open when the token
// exchange is answered with an error status, and returns err.
func closeTokenError(err error) error {
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) && he.Response != nil && he.Response.Body != nil {
		he.Response.Body.Close()
	}
	return err
}

// deliveryError classifies an API error for the outbox: rate limits hold
// every message of the installation as long as GitHub asks, server and
// network errors are retried with backoff, and so is a token exchange
// GitHub refuses (the App's key is refused, the installation is
// suspended), which no message can get past until the App or its
// installation is put right; any other refusal is permanent.
func deliveryError(err error, now time.Time) error {
	if err == nil {
		return nil
	}
	closeTokenError(err)
	var rle *gh.RateLimitError
	if errors.As(err, &rle) {
		return &bot.DeliveryError{Err: err, RetryAfter: until(rle.Rate.Reset.Time, now), Destination: true}
	}
	var are *gh.AbuseRateLimitError
	if errors.As(err, &are) {
		wait := defaultRetryAfter
		if are.RetryAfter != nil && *are.RetryAfter > 0 {
			wait = *are.RetryAfter
		}
		return &bot.DeliveryError{Err: err, RetryAfter: wait, Destination: true}
	}
	resp := errorResponse(err)
	if resp == nil {
		return err // network: retried with backoff
	}
	var he *ghinstallation.HTTPError
	tokenExchange := errors.As(err, &he)
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusForbidden && isRateLimited(resp.Header):
		return &bot.DeliveryError{Err: err, RetryAfter: retryAfter(resp.Header, now), Destination: true}
	case code >= 500:
		return err
	case code == http.StatusUnauthorized && !tokenExchange, code == http.StatusNotFound && tokenExchange:
		// The installation's token was refused, or the installation is
		// gone: the client forgot both (refusalTransport), and the next
		// attempt exchanges a new token or asks GitHub which
		// installation covers the repository now.
		return err
	case tokenExchange && (code == http.StatusUnauthorized || code == http.StatusForbidden):
		// No token for the installation: GitHub refused the App's JWT
		// (a key rotated or revoked) or the installation is suspended.
		// That is the whole installation's, not the message's: its
		// messages wait, their destination down, until it is put right.
		return err
	case code >= 400:
		return &bot.DeliveryError{Err: err, Permanent: true}
	}
	return err
}

// apiError is an answer of GitHub's REST API that refused a request, in
// words: its status and GitHub's own explanation, where go-github's text
// carries the request's URL and Go's rendering of the details ("404 Not
// Found []"). It is what a message given up says.
type apiError struct{ er *gh.ErrorResponse }

func (e *apiError) Error() string {
	code := 0
	if e.er.Response != nil {
		code = e.er.Response.StatusCode
	}
	msg := githubMessage(e.er)
	if msg == "" {
		msg = ": " + http.StatusText(code)
	}
	return fmt.Sprintf("GitHub answered %d%s", code, msg)
}

func (e *apiError) Unwrap() error { return e.er }

// inWords returns err with a refusal of GitHub's REST API in words (see
// apiError); the refusal stays in its chain for errors.As.
func inWords(err error) error {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && err == error(er) {
		return &apiError{er: er}
	}
	return err
}

// errorResponse returns the HTTP answer behind err: an API error or a failed
// token exchange.
func errorResponse(err error) *http.Response {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response
	}
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		return he.Response
	}
	return nil
}

func isRateLimited(h http.Header) bool {
	return h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0"
}

// retryAfter reads Retry-After (seconds) or X-RateLimit-Reset (epoch
// seconds), in GitHub's order of preference.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if s, err := strconv.ParseInt(h.Get("Retry-After"), 10, 64); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && s > 0 {
		return until(time.Unix(s, 0), now)
	}
	return defaultRetryAfter
}

// until is how long from now to t, at least a second so a reset that has
// just passed does not turn into a busy loop.
func until(t, now time.Time) time.Duration {
	if t.IsZero() {
		return defaultRetryAfter
	}
	return max(t.Sub(now), time.Second)
}
