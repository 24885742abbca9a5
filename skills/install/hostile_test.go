package install_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/skills/install"
)

// rawTgz writes tar headers as given (their data zeros of their size), so
// a test can say what tgz would tidy away: metadata entries, an entry
// repeated.
func rawTgz(t *testing.T, files []entry, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.body))}))
		_, err := tw.Write([]byte(f.body))
		require.NoError(t, err)
	}
	for _, h := range hdrs {
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(make([]byte, h.Size))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// Archives that stay within the limits on files and bytes yet make the
// installer read without end: entries that add no file (a directory named
// again and again, archive-wide metadata) and metadata far larger than
// the files. Each is refused by its own limit and leaves nothing.
func TestInstallRefusesArchiveBombs(t *testing.T) {
	man := entry{name: "manifest.yaml", body: goodManifest}
	skill := entry{name: "SKILL.md", body: "Use it."}
	repeat := func(n int, h tar.Header) []*tar.Header {
		out := make([]*tar.Header, n)
		for i := range out {
			out[i] = &h
		}
		return out
	}
	dirs := func(n int) []byte {
		return rawTgz(t, []entry{man, skill}, repeat(n, tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755})...)
	}
	globals := func(n, size int) []byte {
		return rawTgz(t, []entry{man, skill}, repeat(n, tar.Header{Typeflag: tar.TypeXGlobalHeader,
			PAXRecords: map[string]string{"comment": strings.Repeat("x", size)}})...)
	}
	zipDirs := func(n int) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, f := range []entry{man, skill} {
			w, err := zw.Create(f.name)
			require.NoError(t, err)
			_, err = w.Write([]byte(f.body))
			require.NoError(t, err)
		}
		for range n {
			_, err := zw.Create("d/")
			require.NoError(t, err)
		}
		require.NoError(t, zw.Close())
		return buf.Bytes()
	}
	cases := []struct {
		name string
		data []byte
		want string // "" installs
	}{
		{"a directory named twice", dirs(2), ""},
		{"a directory named as often as the limit allows", dirs(38), ""},
		{"a directory named past the limit", dirs(39), "more than 40 entries"},
		{"a directory named 100,000 times", dirs(100_000), "more than 40 entries"},
		{"a zip naming a directory past the limit", zipDirs(39), "more than 40 entries"},
		{"a zip naming a directory 5,000 times", zipDirs(5_000), "more than 40 entries"},
		{"one global header, as git archive writes", globals(1, 40), ""},
		{"global headers past the limit", globals(39, 40), "more than 40 entries"},
		{"global headers of a megabyte each", globals(3, 1000<<10), "unpacks to more than 1212416 bytes"},
	}
	files := map[string][]byte{}
	for i, tc := range cases {
		files[fmt.Sprint(i)] = tc.data
	}
	srv := serve(t, files)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := envWithClient(t, srv, install.Limits{MaxBytes: 1 << 20, MaxFiles: 20})
			_, err := e.in.Install(context.Background(), install.Request{Source: fmt.Sprintf("%s/%d", srv.URL, i), SHA256: sum(tc.data)})
			if tc.want == "" {
				require.NoError(t, err)
				e.nothingLeft("arch-kit@1.0.0")
				return
			}
			require.ErrorContains(t, err, tc.want)
			e.nothingLeft()
		})
	}
}
