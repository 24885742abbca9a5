package github

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

// DefaultAPIURL is GitHub.com's REST API root.
const DefaultAPIURL = "https://api.github.com/"

// ClientOptions configure a Client: the github section of the config.
type ClientOptions struct {
	// AppID is the GitHub App's numeric id.
	AppID int64
	// PrivateKey is the App's private key, PEM (PKCS#1 as GitHub issues it,
	// or PKCS#8). Exactly one of PrivateKey and PrivateKeyFile is set.
	PrivateKey     bot.Secret
	PrivateKeyFile string
	// APIURL is the REST API root: DefaultAPIURL when empty, or
	// https://HOST/api/v3/ for GitHub Enterprise Server.
	APIURL string
	// Transport carries every request, shared by all installations so
	// connections are reused; http.DefaultTransport when nil.
	Transport http.RoundTripper
	// Installations resolves a repository to the installation that covers
	// it; when nil, or when it does not know the repository, GitHub is asked.
	Installations InstallationStore
	// AppSlug is github.app_slug: the App's slug, which AppSlug answers
	// without asking GitHub. Empty: GitHub is asked once.
	AppSlug string
	Logger  *slog.Logger
}

// Client authenticates as a GitHub App and hands out one go-github client
// per installation. Installation tokens are fetched, cached and refreshed by
// ghinstallation; a client (and its rate-limit state) lives as long as the
// Client. It is safe for concurrent use.
type Client struct {
	appID         int64
	jwt           *appJWT
	base          *url.URL
	tr            http.RoundTripper
	installations InstallationStore
	logger        *slog.Logger
	app           *gh.Client

	mu      sync.Mutex
	clients map[int64]*installationClient
	repos   map[string]int64 // repositories GitHub resolved, when there is no store
	// failed remembers, by repository, a lookup that failed, for
	// lookupRetry: a backlog of messages to a repository GitHub cannot
	// resolve asks once, not once a message.
	failed map[string]failedLookup
	// accounts remembers, by account, whether the App is installed there,
	// for lookupRetry (see installedOn).
	accounts map[string]accountLookup
	// lost are the accounts whose installation went away while this
	// process ran (uninstalled, as GitHub's answers or a webhook said):
	// what waits for one waits for the App to be installed there again.
	lost map[string]bool
	// owners are the accounts of the installations ForRepo handed out.
	owners map[int64]string
	// started is when the client was made: what was made before waited,
	// or was about to be sent, in an earlier process (see Sink.forRepo).
	started time.Time
	slug    string // the App's, once known
	now     func() time.Time
}

// lookupRetry is how long a failed installation lookup is answered from
// memory: long enough that a burst of deliveries, permission checks or
// tool calls for a repository asks once, short enough that a destination
// coming back (the deliverer tries it after 1 s, 2 s, 4 s …) is noticed.
const lookupRetry = 5 * time.Second

type failedLookup struct {
	err   error
	until time.Time
}

type accountLookup struct {
	installed bool
	until     time.Time
}

type installationClient struct {
	tr *ghinstallation.Transport
	gh *gh.Client
}

// NewClient returns a Client. Its errors name the setting at fault and never
// carry key material.
func NewClient(opts ClientOptions) (*Client, error) {
	if opts.AppID <= 0 {
		return nil, bot.Errorf(bot.EINVALID, "github.app_id: required")
	}
	pemBytes, err := privateKeyPEM(opts)
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(pemBytes, keyField(opts.PrivateKeyFile))
	if err != nil {
		return nil, err
	}
	base, err := parseAPIURL(opts.APIURL)
	if err != nil {
		return nil, err
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		appID: opts.AppID, jwt: &appJWT{key: key, appID: opts.AppID, now: time.Now}, base: base, tr: opts.Transport,
		installations: opts.Installations, logger: opts.Logger,
		clients: map[int64]*installationClient{}, repos: map[string]int64{}, failed: map[string]failedLookup{},
		accounts: map[string]accountLookup{}, lost: map[string]bool{}, owners: map[int64]string{}, now: time.Now,
		started: time.Now(), slug: opts.AppSlug,
	}
	atr, err := c.appsTransport()
	if err != nil {
		return nil, err
	}
	c.app = c.newGitHubClient(atr)
	return c, nil
}

func privateKeyPEM(opts ClientOptions) ([]byte, error) {
	switch {
	case opts.PrivateKey.IsSet() && opts.PrivateKeyFile != "":
		return nil, bot.Errorf(bot.EINVALID, "github: set private_key or private_key_file, not both")
	case opts.PrivateKey.IsSet():
		return []byte(opts.PrivateKey.Reveal()), nil
	case opts.PrivateKeyFile != "":
		b, err := os.ReadFile(opts.PrivateKeyFile)
		if err != nil {
			return nil, &bot.FieldError{Field: "github.private_key_file", Msg: "cannot read it: " + pathError(err)}
		}
		return b, nil
	}
	return nil, bot.Errorf(bot.EINVALID, "github: private_key or private_key_file is required")
}

// pathError says why a file could not be read, without Go's "open <path>:"
// prefix when the setting already names it.
func pathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// CheckPrivateKey reads and parses the App's key, inline or from its file,
// as NewClient does: for the checks of a config, which must refuse what
// serve would. A problem is a *bot.FieldError naming the setting at fault
// (github.private_key or github.private_key_file), never key material.
func CheckPrivateKey(key bot.Secret, file string) error {
	b, err := privateKeyPEM(ClientOptions{PrivateKey: key, PrivateKeyFile: file})
	if err != nil {
		return err
	}
	_, err = parsePrivateKey(b, keyField(file))
	return err
}

// keyField is the setting the key came from.
func keyField(file string) string {
	if file != "" {
		return "github.private_key_file"
	}
	return "github.private_key"
}

// parsePrivateKey reads an RSA key from PEM. Its errors name field and say
// what is wrong with the key, never what is in it.
func parsePrivateKey(b []byte, field string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, &bot.FieldError{Field: field, Msg: "not a PEM-encoded private key"}
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, &bot.FieldError{Field: field, Msg: "not a PKCS#1 or PKCS#8 RSA private key"}
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, &bot.FieldError{Field: field, Msg: keyKind(k) + " key; a GitHub App's key is RSA"}
	}
	return rk, nil
}

// keyKind names a private key's algorithm for people.
func keyKind(k any) string {
	switch k.(type) {
	case *ecdsa.PrivateKey:
		return "an ECDSA"
	case ed25519.PrivateKey:
		return "an Ed25519"
	case *ecdh.PrivateKey:
		return "an ECDH"
	default:
		return "a non-RSA"
	}
}

func parseAPIURL(s string) (*url.URL, error) {
	if s == "" {
		s = DefaultAPIURL
	}
	// The value is echoed only once parsed, and redacted: a URL with
	// credentials in it must not reach a log.
	const want = "want an http(s) URL without credentials, such as " + DefaultAPIURL + " or https://HOST/api/v3/"
	u, err := url.Parse(s)
	if err != nil {
		return nil, bot.Errorf(bot.EINVALID, "github.api_url: %s", want)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, bot.Errorf(bot.EINVALID, "github.api_url %q: %s", u.Redacted(), want)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// newGitHubClient returns a go-github client on rt speaking to the API root.
func (c *Client) newGitHubClient(rt http.RoundTripper) *gh.Client {
	g := gh.NewClient(&http.Client{Transport: rt})
	base := *c.base
	g.BaseURL = &base
	// Uploads are not used; pointing them at the API root keeps every request
	// on the configured host.
	upload := *c.base
	g.UploadURL = &upload
	return g
}

// appsTransport authenticates as the App, with its shared JWT.
func (c *Client) appsTransport() (*ghinstallation.AppsTransport, error) {
	atr, err := ghinstallation.NewAppsTransportWithOptions(c.tr, c.appID, ghinstallation.WithSigner(c.jwt))
	if err != nil {
		return nil, fmt.Errorf("github app %d: %w", c.appID, err)
	}
	return atr, nil
}

// App returns a client authenticated as the App itself (a JWT), for the
// /app endpoints.
func (c *Client) App() *gh.Client { return c.app }

// AppSlug returns the App's slug, the name its comments carry as
// "<slug>[bot]": ClientOptions.AppSlug, or GitHub's answer, asked once.
func (c *Client) AppSlug(ctx context.Context) (string, error) {
	c.mu.Lock()
	slug := c.slug
	c.mu.Unlock()
	if slug != "" {
		return slug, nil
	}
	app, _, err := c.app.Apps.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("get github app %d: %w", c.appID, inWords(closeTokenError(err)))
	}
	if app.GetSlug() == "" {
		return "", fmt.Errorf("get github app %d: GitHub answered without a slug", c.appID)
	}
	c.mu.Lock()
	c.slug = app.GetSlug()
	c.mu.Unlock()
	return app.GetSlug(), nil
}

// Installation returns the client of installation id, creating its token
// transport on first use.
func (c *Client) Installation(id int64) (*gh.Client, error) {
	ic, err := c.installation(id)
	if err != nil {
		return nil, err
	}
	return ic.gh, nil
}

func (c *Client) installation(id int64) (*installationClient, error) {
	if id <= 0 {
		return nil, bot.Errorf(bot.EINVALID, "github installation id %d: want a positive id", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ic, ok := c.clients[id]; ok {
		return ic, nil
	}
	// Each installation gets its own AppsTransport: ghinstallation writes to
	// it while refreshing a token, under the installation's own lock. They
	// share the App's JWT.
	atr, err := c.appsTransport()
	if err != nil {
		return nil, err
	}
	tr := ghinstallation.NewFromAppsTransport(atr, id)
	tr.BaseURL = strings.TrimSuffix(c.base.String(), "/")
	ic := &installationClient{tr: tr}
	ic.gh = c.newGitHubClient(&refusalTransport{next: tr, refused: func(gone bool) { c.refused(id, ic, gone) }})
	c.clients[id] = ic
	return ic, nil
}

// refusalTransport watches an installation's requests for GitHub refusing
// its credentials: a 401 to a request made with the installation's token
// (revoked, or expired by GitHub's clock before ghinstallation's), or a
// 404 to the token exchange (the installation is gone).
type refusalTransport struct {
	next    http.RoundTripper
	refused func(gone bool)
}

func (t *refusalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	var he *ghinstallation.HTTPError
	switch {
	case err == nil && resp.StatusCode == http.StatusUnauthorized:
		t.refused(false)
	case errors.As(err, &he) && he.Response != nil && he.Response.StatusCode == http.StatusNotFound:
		t.refused(true)
	}
	return resp, err
}

// refused forgets installation id's token, so the next request exchanges a
// new one; when the installation is gone, the repositories recorded as
// its are forgotten too, so the next request for one of them asks GitHub
// which installation covers it now (the App may have been installed
// again, under a new id, while no webhook reached the daemon).
func (c *Client) refused(id int64, ic *installationClient, gone bool) {
	c.mu.Lock()
	if c.clients[id] == ic {
		delete(c.clients, id)
	}
	if gone {
		for repo, rid := range c.repos {
			if rid == id {
				delete(c.repos, repo)
			}
		}
		if account, ok := c.owners[id]; ok {
			c.lost[account] = true
			delete(c.accounts, account)
		}
	}
	c.mu.Unlock()
	if !gone || c.installations == nil {
		return
	}
	// The request that was refused may have been cancelled; forgetting
	// the installation is not its to cut short.
	ctx, cancel := context.WithTimeout(context.Background(), lookupRetry)
	defer cancel()
	if err := c.installations.DeleteInstallation(ctx, id); err != nil {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "forget github installation", slog.Int64("installation", id), slog.String("error", err.Error()))
	}
}

// Token returns a valid installation access token for id, for the few
// callers that cannot go through the client (git over HTTPS).
func (c *Client) Token(ctx context.Context, id int64) (bot.Secret, error) {
	ic, err := c.installation(id)
	if err != nil {
		return "", err
	}
	tok, err := ic.tr.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("github installation %d token: %w", id, closeTokenError(err))
	}
	return bot.Secret(tok), nil
}

// ForRepo returns the client of the installation that covers owner/repo.
func (c *Client) ForRepo(ctx context.Context, owner, repo string) (*gh.Client, int64, error) {
	id, err := c.InstallationForRepo(ctx, owner, repo)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	c.owners[id] = strings.ToLower(owner)
	c.mu.Unlock()
	g, err := c.Installation(id)
	return g, id, err
}

// markLost records that the App's installation on account went away.
func (c *Client) markLost(account string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost[strings.ToLower(account)] = true
	delete(c.accounts, strings.ToLower(account))
}

// wasLost reports whether the App's installation on account went away
// while this process ran, and it has not been seen installed since.
func (c *Client) wasLost(account string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost[strings.ToLower(account)]
}

// before reports whether t, a time a message was made, is before the
// client was: in an earlier process.
func (c *Client) before(t time.Time) bool {
	return !t.IsZero() && t.Before(c.started)
}

// installedOn reports whether the App is installed on account (a user or
// an organisation), asking GitHub and remembering its answer for
// lookupRetry. A repository no installation covers is either left out of
// the account's installation (nothing sent there will get through) or on
// an account the App was removed from or never installed on (what waits
// for it gets through once it is installed again).
func (c *Client) installedOn(ctx context.Context, account string) (bool, error) {
	key := strings.ToLower(account)
	c.mu.Lock()
	known, ok := c.accounts[key]
	c.mu.Unlock()
	if ok && c.now().Before(known.until) {
		return known.installed, nil
	}
	_, _, err := c.app.Apps.FindUserInstallation(ctx, account)
	installed := err == nil
	if err != nil {
		var er *gh.ErrorResponse
		if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusNotFound {
			return false, fmt.Errorf("installation on %s: %w", account, inWords(err))
		}
	}
	c.mu.Lock()
	c.accounts[key] = accountLookup{installed: installed, until: c.now().Add(lookupRetry)}
	if installed {
		delete(c.lost, key)
	}
	c.mu.Unlock()
	return installed, nil
}

// InstallationForRepo finds the installation that covers owner/repo: first
// in the store the webhook keeps up to date, then by asking GitHub, whose
// answer is recorded.
func (c *Client) InstallationForRepo(ctx context.Context, owner, repo string) (int64, error) {
	full := owner + "/" + repo
	if c.installations != nil {
		id, err := c.installations.InstallationForRepo(ctx, full)
		if err != nil {
			return 0, fmt.Errorf("installation of %s: %w", full, err)
		}
		if id > 0 {
			return id, nil
		}
	} else {
		c.mu.Lock()
		id := c.repos[strings.ToLower(full)]
		c.mu.Unlock()
		if id > 0 {
			return id, nil
		}
	}
	key := strings.ToLower(full)
	c.mu.Lock()
	f, failed := c.failed[key]
	c.mu.Unlock()
	if failed && c.now().Before(f.until) {
		return 0, f.err
	}
	inst, _, err := c.app.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		var er *gh.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound {
			err = bot.Errorf(bot.ENOTFOUND, "the GitHub App is not installed on %s", full)
		} else {
			err = fmt.Errorf("installation of %s: %w", full, inWords(err))
		}
		if ctx.Err() == nil {
			c.mu.Lock()
			c.failed[key] = failedLookup{err: err, until: c.now().Add(lookupRetry)}
			c.mu.Unlock()
		}
		return 0, err
	}
	c.mu.Lock()
	delete(c.failed, key)
	c.mu.Unlock()
	id := inst.GetID()
	if id <= 0 {
		return 0, fmt.Errorf("installation of %s: GitHub answered without an id", full)
	}
	if c.installations != nil {
		err := c.installations.SaveInstallation(ctx, id, inst.GetAccount().GetLogin(), inst.SuspendedAt != nil, []string{full}, nil)
		if err != nil {
			// The answer is good for this call; the next one asks again.
			c.logger.LogAttrs(ctx, slog.LevelWarn, "record github installation",
				slog.Int64("installation", id), slog.String("repo", full), slog.String("error", err.Error()))
		}
	} else {
		c.mu.Lock()
		c.repos[strings.ToLower(full)] = id
		c.mu.Unlock()
	}
	return id, nil
}
