package github

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/bot"
)

func TestNewClientConfiguration(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, testKeyPEM(), 0o600))
	pkcs8, err := x509.MarshalPKCS8PrivateKey(testKey())
	require.NoError(t, err)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	require.NoError(t, err)
	garbage := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte("definitely not a key")})

	for _, tc := range []struct {
		name    string
		opts    ClientOptions
		wantErr string // "" for success
	}{
		{name: "PKCS#1 key", opts: ClientOptions{AppID: 1, PrivateKey: bot.Secret(testKeyPEM())}},
		{name: "PKCS#8 key", opts: ClientOptions{AppID: 1, PrivateKey: bot.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))}},
		{name: "key file", opts: ClientOptions{AppID: 1, PrivateKeyFile: keyFile}},
		{name: "enterprise URL", opts: ClientOptions{AppID: 1, PrivateKeyFile: keyFile, APIURL: "https://ghe.example.com/api/v3"}},
		{name: "no app id", opts: ClientOptions{PrivateKeyFile: keyFile}, wantErr: "github.app_id"},
		{name: "no key", opts: ClientOptions{AppID: 1}, wantErr: "private_key or private_key_file is required"},
		{name: "both keys", opts: ClientOptions{AppID: 1, PrivateKey: bot.Secret(testKeyPEM()), PrivateKeyFile: keyFile}, wantErr: "not both"},
		{name: "missing file", opts: ClientOptions{AppID: 1, PrivateKeyFile: filepath.Join(dir, "nope.pem")}, wantErr: "github.private_key_file: cannot read it: no such file or directory"},
		{name: "not PEM", opts: ClientOptions{AppID: 1, PrivateKey: "ghp_this-is-a-token-not-a-key"}, wantErr: "github.private_key: not a PEM-encoded private key"},
		{name: "PEM of garbage", opts: ClientOptions{AppID: 1, PrivateKey: bot.Secret(garbage)}, wantErr: "github.private_key: not a PKCS#1 or PKCS#8 RSA private key"},
		{name: "EC key", opts: ClientOptions{AppID: 1, PrivateKey: bot.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))}, wantErr: "github.private_key: an ECDSA key; a GitHub App's key is RSA"},
		{name: "ftp URL", opts: ClientOptions{AppID: 1, PrivateKeyFile: keyFile, APIURL: "ftp://example.com/"}, wantErr: "github.api_url"},
		{name: "URL with credentials", opts: ClientOptions{AppID: 1, PrivateKeyFile: keyFile, APIURL: "https://user:pw@example.com/"}, wantErr: "github.api_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.opts)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, c.App())
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
			require.Equal(t, bot.EINVALID, bot.ErrorCode(err), "bad input, exit status 2")
			for _, leak := range []string{"PRIVATE KEY", "ghp_this", "definitely", "pw@"} {
				require.NotContains(t, err.Error(), leak)
			}
		})
	}
}

// GitHub Enterprise Server serves the API under /api/v3: the token exchange
// and every API call go there.
func TestClientSpeaksToGitHubEnterpriseServer(t *testing.T) {
	fake := newFakeGitHub(t, "/api/v3")
	c, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.srv.URL + "/api/v3"})
	require.NoError(t, err)
	fake.installs["octo/hello"] = 5
	g, id, err := c.ForRepo(context.Background(), "octo", "hello")
	require.NoError(t, err)
	require.EqualValues(t, 5, id)
	_, _, err = g.Issues.CreateComment(context.Background(), "octo", "hello", 1, &gh.IssueComment{Body: gh.String("hi")})
	require.NoError(t, err)
	require.Equal(t, 1, fake.callCount("POST /app/installations/{id}/access_tokens"))
	require.Len(t, fake.threadComments("octo/hello#1"), 1)
}

func TestInstallationTokensAreCachedAndRefreshed(t *testing.T) {
	ctx := context.Background()
	fake := newFakeGitHub(t, "")
	c, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url()})
	require.NoError(t, err)
	const exchange = "POST /app/installations/{id}/access_tokens"

	// Several installations used at once, each repeatedly: one token each.
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for inst := int64(1); inst <= 3; inst++ {
		for range 4 {
			wg.Go(func() {
				g, err := c.Installation(inst)
				if err == nil {
					_, _, err = g.Issues.CreateComment(ctx, "octo", "hello", int(inst), &gh.IssueComment{Body: gh.String("x")})
				}
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 3, fake.callCount(exchange))
	first, err := c.Installation(1)
	require.NoError(t, err)
	second, err := c.Installation(1)
	require.NoError(t, err)
	require.Same(t, first, second, "one client per installation keeps its rate-limit state")

	// Tokens about to expire are replaced before use.
	fake.mu.Lock()
	fake.tokenTTL = 30 * time.Second
	fake.mu.Unlock()
	c2, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url()})
	require.NoError(t, err)
	for range 2 {
		tok, err := c2.Token(ctx, 9)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(tok.Reveal(), "ghs_fake_9_"))
		require.Equal(t, bot.Redacted, fmt.Sprint(tok))
	}
	require.Equal(t, 5, fake.callCount(exchange))

	_, err = c.Installation(0)
	require.Equal(t, bot.EINVALID, bot.ErrorCode(err))
}

// The App's slug is github.app_slug, or asked of GitHub until it answers,
// and then remembered.
func TestAppSlugIsAskedOfGitHub(t *testing.T) {
	ctx := context.Background()
	fake := newFakeGitHub(t, "")
	c, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url()})
	require.NoError(t, err)
	fake.fail("GET /app", failure{status: 401, body: `{"message":"A JSON web token could not be decoded"}`})
	_, err = c.AppSlug(ctx)
	require.ErrorContains(t, err, "401")
	for range 3 {
		slug, err := c.AppSlug(ctx)
		require.NoError(t, err)
		require.Equal(t, "switchyard", slug)
	}
	require.Equal(t, 2, fake.callCount("GET /app"))

	configured, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url(), AppSlug: "yard"})
	require.NoError(t, err)
	slug, err := configured.AppSlug(ctx)
	require.NoError(t, err)
	require.Equal(t, "yard", slug)
	require.Equal(t, 2, fake.callCount("GET /app"), "github.app_slug is not asked of GitHub")
}

// Neither the App's key nor an installation token appears in what a failed
// call returns.
func TestNoCredentialsInErrors(t *testing.T) {
	ctx := context.Background()
	fake := newFakeGitHub(t, "")
	c, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url()})
	require.NoError(t, err)
	g, err := c.Installation(1)
	require.NoError(t, err)
	_, _, err = g.Issues.CreateComment(ctx, "octo", "hello", 1, &gh.IssueComment{Body: gh.String("x")})
	require.NoError(t, err) // holds a token now

	fake.fail("POST /repos/{owner}/{repo}/issues/{number}/comments", failure{status: 422, body: `{"message":"Validation Failed"}`})
	_, _, apiErr := g.Issues.CreateComment(ctx, "octo", "hello", 1, &gh.IssueComment{Body: gh.String("x")})
	fake.fail("POST /app/installations/{id}/access_tokens", failure{status: 401, body: `{"message":"bad JWT"}`})
	_, tokErr := c.Token(ctx, 2)
	for _, err := range []error{apiErr, tokErr, deliveryError(apiErr, time.Now()), deliveryError(tokErr, time.Now())} {
		require.Error(t, err)
		msg := fmt.Sprintf("%v %+v", err, err)
		require.NotContains(t, msg, "ghs_")
		require.NotContains(t, msg, "PRIVATE KEY")
		require.NotContains(t, msg, "Bearer")
	}
}

// The App's JWT is signed once and used for its lifetime, by the App's own
// calls and every installation's token exchange alike, then renewed before
// it runs out.
func TestAppJWTIsSignedOnceAndRenewed(t *testing.T) {
	ctx := context.Background()
	fake := newFakeGitHub(t, "")
	c, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url()})
	require.NoError(t, err)
	now := time.Now()
	c.jwt.now = func() time.Time { return now }
	asApp := func() {
		t.Helper()
		_, _, err := c.App().Apps.Get(ctx, "")
		require.NoError(t, err)
	}
	for range 3 {
		asApp()
	}
	for id := int64(1); id <= 3; id++ {
		_, err := c.Token(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, 3, fake.callCount("POST /app/installations/{id}/access_tokens"))
	require.Equal(t, 1, c.jwt.signed, "one JWT for six calls as the App")

	now = now.Add(jwtLifetime - jwtRenew - time.Second)
	asApp()
	require.Equal(t, 1, c.jwt.signed)
	now = now.Add(2 * time.Second)
	asApp()
	require.Equal(t, 2, c.jwt.signed, "renewed a minute before it expires")
}

// A failed installation lookup is answered from memory for a while: a
// backlog of messages to a repository asks GitHub once, not once each.
func TestFailedInstallationLookupIsRememberedForAWhile(t *testing.T) {
	ctx := context.Background()
	fake := newFakeGitHub(t, "")
	fake.installs["octo/hello"] = 7
	c, err := NewClient(ClientOptions{AppID: testAppID, PrivateKey: bot.Secret(testKeyPEM()), APIURL: fake.url()})
	require.NoError(t, err)
	now := time.Now()
	c.now = func() time.Time { return now }
	const lookup = "GET /repos/{owner}/{repo}/installation"
	fake.fail(lookup, failure{status: 502, body: `{"message":"Server Error"}`})
	for range 5 {
		_, err := c.InstallationForRepo(ctx, "octo", "hello")
		require.ErrorContains(t, err, "installation of octo/hello")
	}
	require.Equal(t, 1, fake.callCount(lookup))

	now = now.Add(lookupRetry)
	id, err := c.InstallationForRepo(ctx, "octo", "hello")
	require.NoError(t, err)
	require.Equal(t, int64(7), id)
	_, err = c.InstallationForRepo(ctx, "octo", "hello")
	require.NoError(t, err)
	require.Equal(t, 2, fake.callCount(lookup), "a found installation is remembered")
}
