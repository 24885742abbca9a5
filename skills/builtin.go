package skills

import (
	"embed"
	"fmt"
	"io/fs"
)

// The built-in packages ship in the binary, one directory each.
//
//go:embed builtin
var builtinFS embed.FS

// Builtins loads the built-in packages. They are enabled everywhere unless
// a setting disables them, and cannot be uninstalled.
func Builtins(opts LoadOptions) ([]*Package, error) {
	entries, err := fs.ReadDir(builtinFS, "builtin")
	if err != nil {
		return nil, fmt.Errorf("built-in packages: %w", err)
	}
	opts.Builtin, opts.Dir = true, ""
	var out []*Package
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub, err := fs.Sub(builtinFS, "builtin/"+e.Name())
		if err != nil {
			return nil, err
		}
		p, err := LoadPackage(sub, opts)
		if err != nil {
			return nil, fmt.Errorf("built-in package %s: %w", e.Name(), err)
		}
		out = append(out, p)
	}
	return out, nil
}
