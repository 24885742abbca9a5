package github

import (
	"context"
	"fmt"
)

// InstallationStore records the App's installations and the repositories
// (owner/name) each covers, so outbound messages find their installation
// without asking GitHub. storage/bolt implements it. Repository names compare
// case-insensitively, as on GitHub.
type InstallationStore interface {
	// SaveInstallation creates or updates installation id of account (the
	// organisation or user it is installed on) and adds and removes
	// repositories, in one transaction. A repository belongs to one
	// installation at a time: adding it moves it.
	SaveInstallation(ctx context.Context, id int64, account string, suspended bool, added, removed []string) error
	// DeleteInstallation forgets installation id and its repositories.
	DeleteInstallation(ctx context.Context, id int64) error
	// InstallationForRepo returns the installation covering repo, or 0.
	// Suspension is recorded, not acted on: GitHub refuses a suspended
	// installation's token, which the caller sees as a permanent error.
	InstallationForRepo(ctx context.Context, repo string) (int64, error)
}

// record applies an installation event to the store.
func (ch *installationChange) record(ctx context.Context, s InstallationStore) error {
	if ch.deleted {
		if err := s.DeleteInstallation(ctx, ch.id); err != nil {
			return fmt.Errorf("delete github installation %d: %w", ch.id, err)
		}
		return nil
	}
	if err := s.SaveInstallation(ctx, ch.id, ch.account, ch.suspended, ch.added, ch.removed); err != nil {
		return fmt.Errorf("save github installation %d: %w", ch.id, err)
	}
	return nil
}
