package main

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// page is one page of a listing as the API answers it.
type page[T any] struct {
	Items []T    `json:"items"`
	Next  string `json:"next,omitempty"`
}

// addPagingFlags adds --limit and --cursor to a listing command. A limit
// outside 1 to max is refused as the flags are read, like any bad flag.
func addPagingFlags(cmd *cobra.Command, limit *int, cursor *string, max int) {
	cmd.Flags().Var(&pageLimit{n: limit, max: max}, "limit", fmt.Sprintf("at most this many a page, 1 to %d (default 100)", max))
	cmd.Flags().StringVar(cursor, "cursor", "", "the page after the one that printed this cursor")
}

// pageLimit is the value of --limit: a number from 1 to max.
type pageLimit struct {
	n   *int
	max int
}

func (l *pageLimit) String() string {
	if l.n == nil {
		return "0"
	}
	return strconv.Itoa(*l.n)
}

func (l *pageLimit) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > l.max {
		return fmt.Errorf("want a number from 1 to %d", l.max)
	}
	*l.n = n
	return nil
}

func (l *pageLimit) Type() string { return "int" }

// pagingQuery adds limit and cursor to q.
func pagingQuery(q url.Values, limit int, cursor string) {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
}

// printNext tells how to get the next page, when there is one: the same
// command with the same flags and the cursor.
func printNext(w io.Writer, cmd *cobra.Command, next string) {
	if next == "" {
		return
	}
	args := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "cursor" {
			return
		}
		if f.Value.Type() == "bool" {
			// --json=false given says so again, rather than --json.
			if f.Value.String() == "true" {
				args = append(args, "--"+f.Name)
			} else {
				args = append(args, "--"+f.Name+"="+shellWord(f.Value.String()))
			}
			return
		}
		args = append(args, "--"+f.Name, shellWord(f.Value.String()))
	})
	// The cursor is the server's, quoted like any value, so the line
	// works pasted into a shell whatever the cursor holds.
	args = append(args, "--cursor", shellWord(next))
	fmt.Fprintf(w, "More: %s\n", strings.Join(args, " "))
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
