package github

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKey is the App's key, generated once per test binary: RSA generation
// is slow enough to matter when every test needs one.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func testKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey())})
}

const testAppID = 4242

// failure is a canned error answer, served instead of the real one.
type failure struct {
	hang bool // answer nothing until the client gives up
	// after serves the request first and then answers with the failure
	// (or hangs): GitHub did the work, its answer was lost.
	after  bool
	status int
	header map[string]string
	body   string
	// then runs once the request was served (after) or refused, before
	// the answer: a test kills the process making the request there.
	then func()
	// drop closes the connection instead of answering.
	drop bool
}

type fakeComment struct {
	ID      int64  `json:"id"`
	Body    string `json:"body"`
	User    ghUser `json:"user"`
	Updated string `json:"updated_at"`
}

type ghUser struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

type fakeReaction struct {
	ID      int64
	Path    string // the reactions endpoint it was posted to
	Content string
}

// fakeGitHub speaks the parts of GitHub's REST API Switchyard uses, checking
// authentication as GitHub does: a JWT signed with the App's key for /app
// endpoints, an installation token for everything else.
type fakeGitHub struct {
	t      testing.TB
	srv    *httptest.Server
	prefix string // "/api/v3" for GitHub Enterprise Server
	mux    *http.ServeMux
	// route adds an API endpoint, served under prefix with the same call
	// counting, canned failures and authentication as the built-in ones.
	route func(pattern string, jwt bool, h http.HandlerFunc)

	mu          sync.Mutex
	tokenTTL    time.Duration
	tokens      map[string]int64 // token → installation
	exchanges   map[int64]int    // token exchanges per installation
	installs    map[string]int64 // owner/repo → installation
	gone        map[int64]bool   // installations removed
	perms       map[string]repoPermission
	files       map[string][]string // owner/repo#n → changed files
	comments    map[string][]*fakeComment
	reactions   []fakeReaction
	nextID      int64
	calls       map[string]int // "METHOD pattern" → requests served
	failures    map[string][]failure
	botLogin    string
	lastAuthBad string // set when a request failed authentication

	// intercept, when set, is asked about every request before the canned
	// failures, with mu held, and may answer with a failure of its own.
	intercept func(pattern string) *failure
	// refuse, when set, is asked about every request first, without mu,
	// and may answer with a failure of its own: GitHub refusing one
	// installation, or one repository, while serving the others.
	refuse atomic.Pointer[func(r *http.Request, pattern string) *failure]
}

func newFakeGitHub(t testing.TB, prefix string) *fakeGitHub {
	f := &fakeGitHub{
		t: t, prefix: prefix, tokenTTL: time.Hour,
		tokens: map[string]int64{}, exchanges: map[int64]int{}, installs: map[string]int64{}, gone: map[int64]bool{},
		perms: map[string]repoPermission{}, files: map[string][]string{}, comments: map[string][]*fakeComment{},
		nextID: 1000, calls: map[string]int{}, failures: map[string][]failure{}, botLogin: "switchyard[bot]",
	}
	mux := http.NewServeMux()
	route := func(pattern string, jwt bool, h http.HandlerFunc) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+prefix+path, func(w http.ResponseWriter, r *http.Request) {
			var fail *failure
			if refuse := f.refuse.Load(); refuse != nil {
				fail = (*refuse)(r, pattern)
			}
			f.mu.Lock()
			f.calls[pattern]++
			if f.intercept != nil && fail == nil {
				fail = f.intercept(pattern)
			}
			if q := f.failures[pattern]; fail == nil && len(q) > 0 {
				fail, f.failures[pattern] = &q[0], q[1:]
			}
			f.mu.Unlock()
			if fail != nil && fail.after && f.authorised(r, jwt) {
				h(httptest.NewRecorder(), r)
			}
			if fail != nil && fail.then != nil {
				fail.then()
			}
			if fail != nil && fail.drop {
				if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
					_ = conn.Close()
				}
				return
			}
			if fail != nil && fail.hang {
				<-r.Context().Done()
				return
			}
			if fail != nil {
				for k, v := range fail.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(fail.status)
				fmt.Fprint(w, fail.body)
				return
			}
			if !f.authorised(r, jwt) {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
				return
			}
			h(w, r)
		})
	}
	f.mux, f.route = mux, route
	route("POST /app/installations/{id}/access_tokens", true, f.accessToken)
	route("GET /repos/{owner}/{repo}/installation", true, f.repoInstallation)
	route("GET /users/{username}/installation", true, f.userInstallation)
	route("GET /app", true, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"id": testAppID, "slug": strings.TrimSuffix(f.botLogin, "[bot]")})
	})
	route("GET /repos/{owner}/{repo}/collaborators/{user}/permission", false, f.permission)
	route("GET /repos/{owner}/{repo}/pulls/{number}/files", false, f.pullFiles)
	route("GET /repos/{owner}/{repo}/issues/{number}/comments", false, f.listComments)
	route("POST /repos/{owner}/{repo}/issues/{number}/comments", false, f.createComment)
	route("PATCH /repos/{owner}/{repo}/issues/comments/{id}", false, f.editComment)
	route("POST /repos/{owner}/{repo}/issues/{number}/reactions", false, f.react)
	route("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", false, f.react)
	route("POST /repos/{owner}/{repo}/pulls/comments/{id}/reactions", false, f.react)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("fake GitHub: unexpected %s %s", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) url() string { return f.srv.URL + f.prefix + "/" }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// revokeTokens makes GitHub refuse every installation token handed out so
// far, as when a token is revoked or expires by GitHub's clock before the
// client's.
func (f *fakeGitHub) revokeTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.tokens)
}

// uninstall removes installation id: its tokens are refused, no new one is
// handed out, and the repositories it covered are covered by nothing,
// until install.
func (f *fakeGitHub) uninstall(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone[id] = true
	for tok, tid := range f.tokens {
		if tid == id {
			delete(f.tokens, tok)
		}
	}
	for repo, rid := range f.installs {
		if rid == id {
			delete(f.installs, repo)
		}
	}
}

// install covers repo by installation id.
func (f *fakeGitHub) install(repo string, id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs[repo] = id
}

// fail queues answers served, in order, instead of the next requests to
// pattern.
func (f *fakeGitHub) fail(pattern string, fs ...failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[pattern] = append(f.failures[pattern], fs...)
}

func (f *fakeGitHub) callCount(pattern string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[pattern]
}

func (f *fakeGitHub) setPermission(repo, login, permission, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.perms[repo+"/"+login] = repoPermission{Permission: permission, RoleName: role}
}

func (f *fakeGitHub) authorised(r *http.Request, jwt bool) bool {
	auth := r.Header.Get("Authorization")
	if jwt {
		tok, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || verifyJWT(tok, &testKey().PublicKey) != nil {
			f.mu.Lock()
			f.lastAuthBad = r.URL.Path
			f.mu.Unlock()
			return false
		}
		return true
	}
	tok, ok := strings.CutPrefix(auth, "token ")
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, known := f.tokens[tok]; !ok || !known {
		f.lastAuthBad = r.URL.Path
		return false
	}
	return true
}

// verifyJWT checks an RS256 JWT as GitHub does for an App: signature,
// issuer and expiry.
func verifyJWT(tok string, pub *rsa.PublicKey) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return err
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	var claims struct {
		Iss string `json:"iss"`
		Exp int64  `json:"exp"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		return err
	}
	if claims.Iss != strconv.Itoa(testAppID) || time.Unix(claims.Exp, 0).Before(time.Now()) {
		return fmt.Errorf("wrong issuer or expired")
	}
	return nil
}

func (f *fakeGitHub) accessToken(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	if f.gone[id] {
		f.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	f.exchanges[id]++
	tok := fmt.Sprintf("ghs_fake_%d_%d", id, f.exchanges[id])
	f.tokens[tok] = id
	ttl := f.tokenTTL
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": time.Now().Add(ttl).UTC().Format(time.RFC3339)})
}

func (f *fakeGitHub) repoInstallation(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	id, ok := f.installs[r.PathValue("owner")+"/"+r.PathValue("repo")]
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "account": map[string]string{"login": r.PathValue("owner")}})
}

// userInstallation answers the installation on an account: one that
// covers any of its repositories.
func (f *fakeGitHub) userInstallation(w http.ResponseWriter, r *http.Request) {
	account := r.PathValue("username")
	f.mu.Lock()
	var id int64
	for repo, rid := range f.installs {
		if owner, _, _ := strings.Cut(repo, "/"); strings.EqualFold(owner, account) {
			id = rid
			break
		}
	}
	f.mu.Unlock()
	if id == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "account": map[string]string{"login": account}})
}

func (f *fakeGitHub) permission(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	p, ok := f.perms[r.PathValue("owner")+"/"+r.PathValue("repo")+"/"+r.PathValue("user")]
	f.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"permission": p.Permission, "role_name": p.RoleName, "user": map[string]string{"login": r.PathValue("user")}})
}

// pageOf serves one page of n items the way GitHub does: per_page, page and a
// Link header naming the next page.
func pageOf(w http.ResponseWriter, r *http.Request, n int) (from, to int) {
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page <= 0 {
		page = 1
	}
	from, to = min((page-1)*per, n), min(page*per, n)
	if to < n {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		next := *r.URL
		next.RawQuery = q.Encode()
		next.Scheme, next.Host = "http", r.Host
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next.String()))
	}
	return from, to
}

func (f *fakeGitHub) pullFiles(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	files := f.files[r.PathValue("owner")+"/"+r.PathValue("repo")+"#"+r.PathValue("number")]
	f.mu.Unlock()
	from, to := pageOf(w, r, len(files))
	out := []map[string]string{}
	for _, name := range files[from:to] {
		old, renamed := strings.CutPrefix(name, "renamed:")
		if renamed {
			prev, cur, _ := strings.Cut(old, "->")
			out = append(out, map[string]string{"filename": cur, "previous_filename": prev, "status": "renamed"})
			continue
		}
		out = append(out, map[string]string{"filename": name, "status": "modified"})
	}
	writeJSON(w, http.StatusOK, out)
}

func threadOf(r *http.Request) string {
	return r.PathValue("owner") + "/" + r.PathValue("repo") + "#" + r.PathValue("number")
}

func (f *fakeGitHub) listComments(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	all := append([]*fakeComment(nil), f.comments[threadOf(r)]...)
	f.mu.Unlock()
	from, to := pageOf(w, r, len(all))
	writeJSON(w, http.StatusOK, all[from:to])
}

// addComment puts a comment on a thread as if someone had posted it.
func (f *fakeGitHub) addComment(thread, body string, user ghUser) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.comments[thread] = append(f.comments[thread], &fakeComment{
		ID: f.nextID, Body: body, User: user, Updated: time.Now().UTC().Format(time.RFC3339),
	})
	return f.nextID
}

func (f *fakeGitHub) threadComments(thread string) []fakeComment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeComment
	for _, c := range f.comments[thread] {
		out = append(out, *c)
	}
	return out
}

func (f *fakeGitHub) createComment(w http.ResponseWriter, r *http.Request) {
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
		return
	}
	id := f.addComment(threadOf(r), in.Body, ghUser{Login: f.botLogin, Type: "Bot"})
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "body": in.Body})
}

func (f *fakeGitHub) editComment(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cs := range f.comments {
		for _, c := range cs {
			if c.ID == id {
				c.Body = in.Body
				writeJSON(w, http.StatusOK, c)
				return
			}
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
}

func (f *fakeGitHub) react(w http.ResponseWriter, r *http.Request) {
	var in struct{ Content string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	path := strings.TrimPrefix(r.URL.Path, f.prefix)
	f.mu.Lock()
	defer f.mu.Unlock()
	// GitHub answers an existing reaction of the same user and content with
	// 200 instead of adding another.
	for _, x := range f.reactions {
		if x.Path == path && x.Content == in.Content {
			writeJSON(w, http.StatusOK, map[string]any{"id": x.ID, "content": x.Content})
			return
		}
	}
	f.nextID++
	f.reactions = append(f.reactions, fakeReaction{ID: f.nextID, Path: path, Content: in.Content})
	writeJSON(w, http.StatusCreated, map[string]any{"id": f.nextID, "content": in.Content})
}

func (f *fakeGitHub) reactionList() []fakeReaction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReaction(nil), f.reactions...)
}
