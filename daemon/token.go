package daemon

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/internal/filekind"
)

// APITokenFile is the file in the data directory that holds the API token
// the daemon makes at first start when none is configured. The CLI reads
// it from there.
const APITokenFile = "api-token"

// LoadAPIToken returns the token of the token file in dataDir, making the
// file first when there is none: 32 random bytes, URL-safe base64, mode
// 0600. Two daemons starting at once agree on one token.
func LoadAPIToken(dataDir string) (bot.Secret, error) {
	tok, err := ReadAPIToken(dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data directory: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make an API token: %w", err)
	}
	value := base64.RawURLEncoding.EncodeToString(b[:])
	// Written aside and linked into place, which fails when the file
	// exists: nobody reads a half-written token, and a daemon that lost
	// the race reads the winner's.
	tmp, err := os.CreateTemp(dataDir, APITokenFile+".*")
	if err != nil {
		return "", fmt.Errorf("write the API token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(value + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write the API token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write the API token: %w", err)
	}
	path := filepath.Join(dataDir, APITokenFile)
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ReadAPIToken(dataDir)
		}
		return "", fmt.Errorf("write the API token: %w", err)
	}
	return bot.Secret(value), nil
}

// ReadAPIToken returns the token of the token file in dataDir. The error
// wraps fs.ErrNotExist when there is no file. A file others may read, a
// link, and a file of another user are refused: the token lets its holder
// start agents, and one someone else put there is known to them.
func ReadAPIToken(dataDir string) (bot.Secret, error) {
	path := filepath.Join(dataDir, APITokenFile)
	link, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("read the API token: %w", err)
	}
	if !link.Mode().IsRegular() {
		// A link may have been planted by whoever can write the data
		// directory, to a token they know.
		return "", fmt.Errorf("%s is a %s, not a regular file: delete it and the daemon makes a new token at its next start", path, filekind.Of(link.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read the API token: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("read the API token: %w", err)
	}
	if !os.SameFile(link, st) {
		return "", fmt.Errorf("%s changed while it was read: delete it and the daemon makes a new token at its next start", path)
	}
	if owner, ok := fileOwner(st); ok && owner != os.Getuid() {
		return "", fmt.Errorf("%s belongs to uid %d, not to uid %d who reads it: only its own file is trusted", path, owner, os.Getuid())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s may be read by other users (mode %04o): run chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<10))
	if err != nil {
		return "", fmt.Errorf("read the API token %s: %w", path, err)
	}
	value := strings.TrimSpace(string(b))
	if value == "" {
		return "", fmt.Errorf("%s is empty: delete it and the daemon makes a new token at its next start", path)
	}
	return bot.Secret(value), nil
}
