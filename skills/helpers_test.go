package skills_test

import (
	"testing"

	"github.com/switchyard/switchyard/internal/yamldecode"
)

func yamldecodeNew(t *testing.T, src string, v any) error {
	t.Helper()
	d := yamldecode.New("t.yaml", yamldecode.Options{})
	d.Document([]byte(src), v)
	return d.Err()
}
