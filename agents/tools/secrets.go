package tools

import "strings"

// SecretLooking reports whether a workspace path (slash-separated) names a
// file that looks like it holds credentials: .env files, credential stores
// of package managers, private keys. Reading one needs the secrets
// permission; the policy decides that for read_file, and the tools that
// read many files at once (search_files) never read one.
//
// Names are compared without case: on a file system that ignores it (macOS,
// Windows) ".ENV" opens .env.
func SecretLooking(rel string) bool {
	rel = strings.ToLower(rel)
	base := rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		base = rel[i+1:]
	}
	switch base {
	case ".env", ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".htpasswd", ".pgpass",
		"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519":
		return true
	case ".env.example", ".env.sample", ".env.template", ".env.dist", ".env.defaults":
		return false
	}
	if strings.HasPrefix(base, ".env.") {
		return true
	}
	for _, ext := range []string{".pem", ".key", ".p12", ".pfx", ".kdbx", ".keystore", ".jks"} {
		if strings.HasSuffix(base, ext) {
			return true
		}
	}
	return strings.HasSuffix(rel, ".aws/credentials") || strings.HasSuffix(rel, ".docker/config.json") ||
		strings.HasSuffix(rel, ".kube/config")
}
