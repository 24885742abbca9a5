package postgres_test

import (
	"context"

	"github.com/jackc/pgx/v5"
)

func pgxConnect(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) }
