package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/switchyard/switchyard/internal/filekind"
)

// DigestPrefix starts every digest: the algorithm.
const DigestPrefix = "sha256:"

// Digest returns the digest of a package tree: "sha256:" and the hex
// SHA-256 of its entries in lexical path order (fs.WalkDir's), each written
// as
//
//	d <path> NUL                          a directory
//	f <path> NUL <x> <size> NUL <content>  a regular file; x is 1 when executable
//
// with paths relative to the package's top, '/'-separated. Anything other
// than directories and regular files (links, devices) is refused: packages
// hold neither.
func Digest(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			fmt.Fprintf(h, "d %s\x00", p)
		case info.Mode().IsRegular():
			exec := 0
			if info.Mode()&0o111 != 0 {
				exec = 1
			}
			fmt.Fprintf(h, "f %s\x00%d %s\x00", p, exec, strconv.FormatInt(info.Size(), 10))
			f, err := fsys.Open(p)
			if err != nil {
				return err
			}
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			if n != info.Size() {
				return fmt.Errorf("%s changed while it was read", p)
			}
		default:
			return fmt.Errorf("%s is a %s; a package holds only directories and regular files", p, filekind.Of(info.Mode()))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// LoadInstalled loads an installed package from its directory, checking
// that its files are still those the lock's digest says and that it is the
// package the record names. Its errors do not repeat the package's name:
// whoever reports them names it ("package x is installed but does not
// load: its files … changed").
func LoadInstalled(rec InstalledPackage, opts LoadOptions) (*Package, error) {
	root, err := os.OpenRoot(rec.Dir)
	if err != nil {
		return nil, fmt.Errorf("its directory: %w", err)
	}
	defer root.Close()
	fsys := root.FS()
	digest, err := Digest(fsys)
	if err != nil {
		return nil, fmt.Errorf("its files in %s: %w", rec.Dir, err)
	}
	if digest != rec.Digest {
		return nil, fmt.Errorf("its files in %s changed since it was installed (digest %s, the lock says %s)", rec.Dir, digest, rec.Digest)
	}
	opts.Dir = rec.Dir
	p, err := LoadPackage(fsys, opts)
	if err != nil {
		return nil, err
	}
	if p.Name() != rec.Name || p.Version() != rec.Version {
		return nil, fmt.Errorf("%s holds %s %s, the lock says %s %s", rec.Dir, p.Name(), p.Version(), rec.Name, rec.Version)
	}
	return p, nil
}
