package bolt

import (
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/skills"
)

// Installed packages (the lock) and the skill settings made with the CLI or
// the API live in one top-level bucket of their own, created by the first
// write, so files written before packages existed need no migration:
//
//	skills/packages   package name → skills.InstalledPackage JSON
//	skills/settings   scope + 0x00 + name → skills.Setting JSON
//
// Both are small (one record per package, one per setting) and read whole
// when the daemon starts.
var (
	bucketSkills                = []byte("skills")
	skillsPackages              = []byte("packages")
	skillsSettings              = []byte("settings")
	_              skills.Store = (*Store)(nil)
)

// skillsBuckets returns the inner buckets, creating them in a writable
// transaction; in a read-only one they are nil until the first write.
func skillsBuckets(tx *bolt.Tx) (packages, settings *bolt.Bucket, err error) {
	if !tx.Writable() {
		top := tx.Bucket(bucketSkills)
		if top == nil {
			return nil, nil, nil
		}
		return top.Bucket(skillsPackages), top.Bucket(skillsSettings), nil
	}
	top, err := tx.CreateBucketIfNotExists(bucketSkills)
	if err != nil {
		return nil, nil, fmt.Errorf("create bucket %s: %w", bucketSkills, err)
	}
	if packages, err = top.CreateBucketIfNotExists(skillsPackages); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s/%s: %w", bucketSkills, skillsPackages, err)
	}
	if settings, err = top.CreateBucketIfNotExists(skillsSettings); err != nil {
		return nil, nil, fmt.Errorf("create bucket %s/%s: %w", bucketSkills, skillsSettings, err)
	}
	return packages, settings, nil
}

func settingKey(scope skills.Scope, name string) []byte {
	return []byte(scope.String() + "\x00" + name)
}

func validPackageRecord(p skills.InstalledPackage) error {
	if !skills.ValidName(p.Name) {
		return bot.Errorf(bot.EINVALID, "package %q: not a valid package name", p.Name)
	}
	if p.Version == "" || p.Digest == "" || p.Dir == "" {
		return bot.Errorf(bot.EINVALID, "package %s: a record needs its version, digest and directory", p.Name)
	}
	return nil
}

func validSetting(s skills.Setting) error {
	if s.Name == "" {
		return bot.Errorf(bot.EINVALID, "setting: no package or skill named")
	}
	if _, err := skills.ParseScope(s.Scope.String()); err != nil {
		return bot.Errorf(bot.EINVALID, "setting of %s: %v", s.Name, err)
	}
	if s.Origin != "" {
		return bot.Errorf(bot.EINVALID, "setting of %s: settings of the config file (%s) are not stored", s.Name, s.Origin)
	}
	return nil
}

// ListPackages returns every installed package's record, sorted by name.
func (s *Store) ListPackages(ctx context.Context) ([]skills.InstalledPackage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []skills.InstalledPackage
	err := s.view("list packages", func(t txn) error {
		packages, _, err := skillsBuckets(t.tx)
		if err != nil || packages == nil {
			return err
		}
		return packages.ForEach(func(k, v []byte) error {
			var p skills.InstalledPackage
			if err := unmarshal(v, &p); err != nil {
				return fmt.Errorf("decode package %s: %w", k, err)
			}
			out = append(out, p)
			return nil
		})
	})
	return out, err
}

// PutPackage records an installed package and the settings given, in one
// transaction, replacing a record of the same name.
func (s *Store) PutPackage(ctx context.Context, p skills.InstalledPackage, settings ...skills.Setting) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validPackageRecord(p); err != nil {
		return err
	}
	for _, st := range settings {
		if err := validSetting(st); err != nil {
			return err
		}
	}
	return s.update("record package", func(t txn) error {
		packages, sb, err := skillsBuckets(t.tx)
		if err != nil {
			return err
		}
		if err := putJSON(packages, []byte(p.Name), p); err != nil {
			return err
		}
		for _, st := range settings {
			if err := putJSON(sb, settingKey(st.Scope, st.Name), st); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeletePackage forgets a package and every stored setting naming any of
// names, in one transaction.
func (s *Store) DeletePackage(ctx context.Context, name string, names []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("forget package", func(t txn) error {
		packages, sb, err := skillsBuckets(t.tx)
		if err != nil {
			return err
		}
		if err := packages.Delete([]byte(name)); err != nil {
			return err
		}
		var doomed [][]byte
		err = sb.ForEach(func(k, v []byte) error {
			var st skills.Setting
			if err := unmarshal(v, &st); err != nil {
				return fmt.Errorf("decode setting %q: %w", k, err)
			}
			if slices.Contains(names, st.Name) {
				doomed = append(doomed, slices.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := sb.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListSettings returns every stored setting, by scope then name.
func (s *Store) ListSettings(ctx context.Context) ([]skills.Setting, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []skills.Setting
	err := s.view("list skill settings", func(t txn) error {
		_, sb, err := skillsBuckets(t.tx)
		if err != nil || sb == nil {
			return err
		}
		return sb.ForEach(func(k, v []byte) error {
			var st skills.Setting
			if err := unmarshal(v, &st); err != nil {
				return fmt.Errorf("decode setting %q: %w", k, err)
			}
			out = append(out, st)
			return nil
		})
	})
	return out, err
}

// PutSetting records a setting, replacing the one of the same scope and
// name.
func (s *Store) PutSetting(ctx context.Context, st skills.Setting) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validSetting(st); err != nil {
		return err
	}
	return s.update("record skill setting", func(t txn) error {
		_, sb, err := skillsBuckets(t.tx)
		if err != nil {
			return err
		}
		return putJSON(sb, settingKey(st.Scope, st.Name), st)
	})
}

// DeleteSetting forgets the setting of that scope and name, if any.
func (s *Store) DeleteSetting(ctx context.Context, scope skills.Scope, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.update("forget skill setting", func(t txn) error {
		_, sb, err := skillsBuckets(t.tx)
		if err != nil {
			return err
		}
		return sb.Delete(settingKey(scope, name))
	})
}
