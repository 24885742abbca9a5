package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v60/github"

	"github.com/switchyard/switchyard/bot"
)

// Permission is a person's role on a repository, in GitHub's order: read <
// triage < write < maintain < admin.
type Permission string

const (
	PermissionNone     Permission = "none"
	PermissionRead     Permission = "read"
	PermissionTriage   Permission = "triage"
	PermissionWrite    Permission = "write"
	PermissionMaintain Permission = "maintain"
	PermissionAdmin    Permission = "admin"
)

// DefaultMinPermission is what a person needs on a repository before a
// mention or a command of theirs makes a work item.
const DefaultMinPermission = PermissionWrite

// ParsePermission reads the min_permission setting; "" is
// DefaultMinPermission.
func ParsePermission(s string) (Permission, error) {
	if s == "" {
		return DefaultMinPermission, nil
	}
	p := Permission(strings.ToLower(strings.TrimSpace(s)))
	if p.rank() <= 0 {
		return "", bot.Errorf(bot.EINVALID, "permission %q: want read, triage, write, maintain or admin", s)
	}
	return p, nil
}

// rank orders permissions; 0 is none, -1 unknown.
func (p Permission) rank() int {
	switch p {
	case PermissionNone:
		return 0
	case PermissionRead:
		return 1
	case PermissionTriage:
		return 2
	case PermissionWrite:
		return 3
	case PermissionMaintain:
		return 4
	case PermissionAdmin:
		return 5
	}
	return -1
}

// AtLeast reports whether p grants min. Nothing grants an invalid min.
func (p Permission) AtLeast(min Permission) bool { return min.rank() > 0 && p.rank() >= min.rank() }

// repoPermission is the answer of GET /repos/{o}/{r}/collaborators/{u}/permission.
// go-github v60 does not decode role_name, which is the only field that tells
// triage and maintain apart from read and write.
type repoPermission struct {
	Permission string `json:"permission"`
	RoleName   string `json:"role_name"`
}

// lookupPermission asks GitHub for login's role on owner/repo. A login GitHub
// does not know has none.
func lookupPermission(ctx context.Context, c *gh.Client, owner, repo, login string) (Permission, error) {
	u := fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", url.PathEscape(owner), url.PathEscape(repo), url.PathEscape(login))
	req, err := c.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("permission of %s on %s/%s: %w", login, owner, repo, err)
	}
	var rp repoPermission
	if _, err := c.Do(ctx, req, &rp); err != nil {
		var er *gh.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound {
			return PermissionNone, nil
		}
		return "", fmt.Errorf("permission of %s on %s/%s: %w", login, owner, repo, err)
	}
	// role_name is a custom role's name for organisations that define them;
	// permission is then the base role it extends.
	if p := Permission(rp.RoleName); p.rank() >= 0 {
		return p, nil
	}
	if p := Permission(rp.Permission); p.rank() >= 0 {
		return p, nil
	}
	return PermissionNone, nil
}

// permissionCache remembers permission answers for a while, so a busy thread
// does not cost an API call per comment. Losing a role takes effect within
// the TTL.
type permissionCache struct {
	ttl time.Duration
	max int

	mu      sync.Mutex
	entries map[string]permissionEntry
}

type permissionEntry struct {
	perm    Permission
	expires time.Time
}

func newPermissionCache(ttl time.Duration, max int) *permissionCache {
	return &permissionCache{ttl: ttl, max: max, entries: map[string]permissionEntry{}}
}

func permissionKey(repo, login string) string {
	return strings.ToLower(repo) + "\x00" + strings.ToLower(login)
}

func (c *permissionCache) get(key string, now time.Time) (Permission, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || now.After(e.expires) {
		return "", false
	}
	return e.perm, true
}

func (c *permissionCache) put(key string, p Permission, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.max {
			// Everything is fresh: a flood of distinct commenters. Starting
			// over costs lookups, never correctness.
			clear(c.entries)
		}
	}
	c.entries[key] = permissionEntry{perm: p, expires: now.Add(c.ttl)}
}
