package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
)

// The GitHub App's installations live in one top-level bucket of their own,
// created by the first write, so files written before the GitHub integration
// existed need no migration:
//
//	github_installations/by_id   id (8 bytes) → installationRecord JSON
//	github_installations/by_repo lower-case owner/name → id (8 bytes)
//
// by_repo is the index outbound messages read; by_id keeps each
// installation's repositories so a deletion removes exactly its own.
var (
	bucketInstallations = []byte("github_installations")
	installationsByID   = []byte("by_id")
	installationsByRepo = []byte("by_repo")
)

type installationRecord struct {
	ID        int64     `json:"id"`
	Account   string    `json:"account"`
	Suspended bool      `json:"suspended,omitempty"`
	Repos     []string  `json:"repos"` // owner/name as GitHub spells them
	UpdatedAt time.Time `json:"updated_at"`
}

func installationKey(id int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(id))
}

func repoKey(repo string) ([]byte, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, bot.Errorf(bot.EINVALID, "repository %q: want owner/name", repo)
	}
	return []byte(strings.ToLower(repo)), nil
}

// installationBuckets returns the two inner buckets, creating them in a
// writable transaction. In a read-only one they are nil until the first
// installation is saved.
func installationBuckets(tx *bolt.Tx) (byID, byRepo *bolt.Bucket, err error) {
	if !tx.Writable() {
		top := tx.Bucket(bucketInstallations)
		if top == nil {
			return nil, nil, nil
		}
		return top.Bucket(installationsByID), top.Bucket(installationsByRepo), nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketInstallations)
	if err != nil {
		return nil, nil, fmt.Errorf("create bucket %s: %w", bucketInstallations, err)
	}
	if byID, err = top.CreateBucketIfNotExists(installationsByID); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s/%s: %w", bucketInstallations, installationsByID, err)
	}
	if byRepo, err = top.CreateBucketIfNotExists(installationsByRepo); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s/%s: %w", bucketInstallations, installationsByRepo, err)
	}
	return byID, byRepo, nil
}

func getInstallation(byID *bolt.Bucket, id int64) (*installationRecord, error) {
	raw := byID.Get(installationKey(id))
	if raw == nil {
		return nil, nil
	}
	var rec installationRecord
	if err := unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("decode installation %d: %w", id, err)
	}
	return &rec, nil
}

// dropRepo removes repo from rec's list, comparing case-insensitively.
func (rec *installationRecord) dropRepo(repo string) {
	rec.Repos = slices.DeleteFunc(rec.Repos, func(r string) bool { return strings.EqualFold(r, repo) })
}

// SaveInstallation creates or updates installation id of account and adds
// and removes repositories (owner/name), in one transaction. A repository
// added here that another installation covered moves to this one. An empty
// account keeps the recorded one.
func (s *Store) SaveInstallation(ctx context.Context, id int64, account string, suspended bool, added, removed []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id <= 0 {
		return bot.Errorf(bot.EINVALID, "installation id %d: want a positive id", id)
	}
	addKeys, err := repoKeys(added)
	if err != nil {
		return err
	}
	removeKeys, err := repoKeys(removed)
	if err != nil {
		return err
	}
	return s.update("save github installation", func(t txn) error {
		byID, byRepo, err := installationBuckets(t.tx)
		if err != nil {
			return err
		}
		rec, err := getInstallation(byID, id)
		if err != nil {
			return err
		}
		if rec == nil {
			rec = &installationRecord{ID: id}
		}
		if account != "" {
			rec.Account = account
		}
		rec.Suspended = suspended
		rec.UpdatedAt = utc(time.Now())
		// Other installations that lose a repository to this one, written
		// once each after the loop.
		moved := map[int64]*installationRecord{}
		for i, key := range addKeys {
			if prev := byRepo.Get(key); prev != nil {
				if other := int64(binary.BigEndian.Uint64(prev)); other != id {
					o := moved[other]
					if o == nil {
						if o, err = getInstallation(byID, other); err != nil {
							return err
						}
					}
					if o != nil {
						o.dropRepo(added[i])
						moved[other] = o
					}
				}
			}
			if err := byRepo.Put(key, installationKey(id)); err != nil {
				return err
			}
			rec.dropRepo(added[i])
			rec.Repos = append(rec.Repos, added[i])
		}
		for i, key := range removeKeys {
			if prev := byRepo.Get(key); prev != nil && int64(binary.BigEndian.Uint64(prev)) == id {
				if err := byRepo.Delete(key); err != nil {
					return err
				}
			}
			rec.dropRepo(removed[i])
		}
		for other, o := range moved {
			if err := putJSON(byID, installationKey(other), o); err != nil {
				return err
			}
		}
		return putJSON(byID, installationKey(id), rec)
	})
}

func repoKeys(repos []string) ([][]byte, error) {
	keys := make([][]byte, len(repos))
	for i, r := range repos {
		k, err := repoKey(r)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// DeleteInstallation forgets installation id and the repositories it
// covers. Deleting an unknown installation is not an error: GitHub may
// deliver the deletion more than once.
func (s *Store) DeleteInstallation(ctx context.Context, id int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("delete github installation", func(t txn) error {
		byID, byRepo, err := installationBuckets(t.tx)
		if err != nil {
			return err
		}
		rec, err := getInstallation(byID, id)
		if err != nil || rec == nil {
			return err
		}
		for _, repo := range rec.Repos {
			key := []byte(strings.ToLower(repo))
			if prev := byRepo.Get(key); prev != nil && int64(binary.BigEndian.Uint64(prev)) == id {
				if err := byRepo.Delete(key); err != nil {
					return err
				}
			}
		}
		return byID.Delete(installationKey(id))
	})
}

// InstallationForRepo returns the installation covering repo (owner/name,
// any case), or 0 when none is recorded.
func (s *Store) InstallationForRepo(ctx context.Context, repo string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	key, err := repoKey(repo)
	if err != nil {
		return 0, err
	}
	var id int64
	err = s.view("github installation for repo", func(t txn) error {
		_, byRepo, err := installationBuckets(t.tx)
		if err != nil || byRepo == nil {
			return err
		}
		if v := byRepo.Get(key); len(v) == 8 {
			id = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return id, err
}
