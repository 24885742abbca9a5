package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
)

// passwordCost is the bcrypt cost of the hashes hash-password makes.
const passwordCost = 12

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "The admin web UI (/admin/)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "hash-password",
		Short: "Read a password on standard input and print its bcrypt hash for admin.users[].password_hash",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return withCode(exitFailure, fmt.Errorf("read the password: %w", err))
			}
			password := strings.TrimRight(line, "\r\n")
			switch {
			case password == "":
				return withCode(exitUsage, errors.New("no password on standard input: write it as its first line"))
			case len(password) > 72:
				return withCode(exitUsage, errors.New("password too long: bcrypt reads at most 72 bytes"))
			}
			hash, err := bcrypt.GenerateFromPassword([]byte(password), passwordCost)
			if err != nil {
				return withCode(exitFailure, fmt.Errorf("hash the password: %w", err))
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(hash))
			return nil
		},
	})
	return cmd
}
