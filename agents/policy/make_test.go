package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeIsHeldToTheRulesOfItsRecipes runs make in a workspace whose
// makefile the repository holds: the recipes of the targets asked for,
// their prerequisites' and the makefile's variables are held to the
// profile's deny and approval rules, so make clean is rm -rf where that
// is denied, and a target that runs no denied command stays allowed.
func TestMakeIsHeldToTheRulesOfItsRecipes(t *testing.T) {
	f := newFixture(t, deployerConfig())
	makefile := "BIN = build/app\n\nall: test\n\ntest: vet\n\tgo test ./...\n\nvet:\n\tgo vet ./...\n\n" +
		"clean:\n\trm -rf build\n\ndist: clean \\\n  test\n\ttar czf app.tgz $(BIN)\n\n" +
		"deploy: ; kubectl apply -f deploy.yaml\n\n%.o: %.c\n\tcc -c $<\n"
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "Makefile"), []byte(makefile), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(f.ws, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.ws, "sub", "GNUmakefile"), []byte("x:\n\trm -rf ../build\n"), 0o644))
	for _, tc := range []struct{ cmd, want string }{
		{"make clean", "DAAAD"},
		{"make dist", "DAAAD"},
		{"make -k clean test", "DAAAD"},
		{"make deploy", "DDDAN"},
		{"make -f Makefile clean", "DAAAD"},
		{"make --file=Makefile deploy", "DDDAN"},
		{"cd sub && make", "DAAAD"},
		{"make -C sub", "DAAAD"},
		{"make --directory=sub x", "DAAAD"},
		{"make -Csub", "DAAAD"},
		{"make -C ../outside", "DDDDD"},
		{"make", "DAAAA"},
		{"make test", "DAAAA"},
		{"make vet test", "DAAAA"},
		{"make x.o", "DDDAD"},
		{"make -n all", "DAAAA"},
	} {
		got := make([]byte, len(corpusProfiles))
		for i, p := range corpusProfiles {
			got[i] = letter(f.bash(t, p, tc.cmd).Verdict)
		}
		require.Equal(t, tc.want, string(got), tc.cmd)
	}
}
