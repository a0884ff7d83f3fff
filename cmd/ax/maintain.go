package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/history"
)

// addHistoryFlags adds the retention flags `ax serve` and `ax maintain`
// share, defaulting to their AX_HISTORY_… variables.
func addHistoryFlags(fs *flag.FlagSet, h *history.Config) error {
	retention, errRetention := envDuration("AX_HISTORY_RETENTION", history.DefaultRetention)
	failedRetention, errFailedRetention := envDuration("AX_HISTORY_FAILED_RETENTION", history.DefaultFailedRetention)
	width, errWidth := envDuration("AX_HISTORY_PARTITION_WIDTH", history.DefaultPartitionWidth)
	fs.DurationVar(&h.Retention, "history-retention", retention,
		"how long succeeded and cancelled runs are kept after they end (AX_HISTORY_RETENTION)")
	fs.DurationVar(&h.FailedRetention, "history-failed-retention", failedRetention,
		"how long failed and timed-out runs are kept after they end (AX_HISTORY_FAILED_RETENTION)")
	fs.DurationVar(&h.PartitionWidth, "history-partition-width", width,
		"time range of one history partition: runs are removed up to this long after their retention; for tests (AX_HISTORY_PARTITION_WIDTH)")
	return errors.Join(errRetention, errFailedRetention, errWidth)
}

// newMaintainCommand is `ax maintain`: one history maintenance pass as the
// owner of ax's tables, for the owner/runtime split, where replicas run
// as a role that may not make or drop partitions.
func newMaintainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "maintain", Short: "Make history partitions ahead and drop passed ones, as the owner role (DATABASE_URL)",
		Long: "Run one history maintenance pass: store the retention settings, make the partitions ahead\n" +
			"and drop those past their retention. Replicas do this themselves when their role owns ax's\n" +
			"tables; with the owner/runtime split (ax serve --no-migrate as a runtime role) run it as\n" +
			"the owner at least daily, e.g. from cron. Flags default to their AX_… environment variables.",
		Args: noArgs,
	}
	fs := flag.NewFlagSet("ax maintain", flag.ContinueOnError)
	var url, direct string
	fs.StringVar(&url, "database-url", envOr("DATABASE_URL", ""), "Postgres URL of the owner role (DATABASE_URL)")
	fs.StringVar(&direct, "direct-database-url", envOr("AX_DIRECT_DATABASE_URL", ""),
		"the database itself when DATABASE_URL is a transaction pooler: detaches go there (AX_DIRECT_DATABASE_URL)")
	var cfg history.Config
	envErr := addHistoryFlags(fs, &cfg)
	cmd.Flags().AddGoFlagSet(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if envErr != nil {
			return usageErr(envErr)
		}
		if err := cfg.Validate(); err != nil {
			return usageErr(err)
		}
		target := cmp.Or(direct, url)
		if target == "" {
			return usageErr(errors.New("no database: set DATABASE_URL or --database-url"))
		}
		ctx := cmd.Context()
		pool, err := db.Open(ctx, target)
		if err != nil {
			return err
		}
		defer pool.Close()
		owned, owner, err := db.HistoryOwned(ctx, pool)
		if err != nil {
			return err
		}
		if !owned {
			return fmt.Errorf("this role may not make or drop history partitions: run ax maintain as %s, their owner", owner)
		}
		cfg.Logger = newLogger(true)
		// Storing new settings makes the partitions they need: counted
		// with the pass's, which makes only what came due since.
		made, madeKeyed, err := history.ApplyCounting(ctx, pool, cfg)
		if err != nil {
			return err
		}
		rep, err := history.Maintain(ctx, pool, cfg)
		if rep != nil {
			rep.Made, rep.MadeKeyed = rep.Made+made, rep.MadeKeyed+madeKeyed
			fmt.Fprintf(cmd.OutOrStdout(), "made %d history partitions ahead and %d keyed ones; moved %d ended runs\n",
				rep.Made, rep.MadeKeyed, rep.Moved)
			tables := make([]string, 0, len(rep.Dropped))
			for t := range rep.Dropped {
				tables = append(tables, t)
			}
			slices.Sort(tables)
			for _, t := range tables {
				fmt.Fprintf(cmd.OutOrStdout(), "dropped %d rows of %s\n", rep.Dropped[t], t)
			}
			if rep.Waiting > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%d makes or drops waited too long for a lock: run again later\n", rep.Waiting)
			}
		}
		return err
	}
	return cmd
}
