//! The schema version this code was written for, and the judgement of what a database reports.
//!
//! The schema lives in `schema/<dialect>/NNNN_<name>.sql`, the same numbered files in each dialect;
//! the version is the number of the last file. D1 records the files applied in wrangler's own
//! [`D1_LEDGER`]; PostgreSQL records them in [`POSTGRES_LEDGER`], written by `scripts/migrate-postgres`
//! in the same transaction as each file. An adapter reads the recorded version once (per isolate)
//! before it serves from a database and refuses with [`DbError::SchemaMismatch`] when it differs.

use crate::sql::{DbError, Stmt};

/// The schema version the store's statements expect: the last migration file's number.
pub const VERSION: i64 = 6;

/// PostgreSQL's migration ledger: one row per applied file (`version`, `name`, `applied_at`).
pub const POSTGRES_LEDGER: &str = "sema_schema_migrations";

/// The highest version the PostgreSQL ledger records (0 when it is empty).
pub fn postgres_version() -> Stmt {
    Stmt::new(
        "SELECT COALESCE(MAX(version), 0)::BIGINT AS version FROM sema_schema_migrations",
        vec![],
    )
}

/// SQLSTATE `42P01` (undefined_table) on reading the ledger: no migration was ever applied.
pub fn postgres_ledger_missing(sqlstate: &str) -> bool {
    sqlstate == "42P01"
}

/// wrangler's own ledger of the D1 migrations it applied (`wrangler d1 migrations apply`): one row
/// per file, by name (wrangler.toml sets no `migrations_table`, so the default name holds).
pub const D1_LEDGER: &str = "d1_migrations";

/// The names of the files D1's ledger records as applied.
pub fn d1_applied() -> Stmt {
    Stmt::new("SELECT name FROM d1_migrations", vec![])
}

/// The version D1's ledger records: the highest version among the applied files' names (0 when
/// none is). Names that carry no number (not ours) are ignored.
pub fn d1_version<'a>(names: impl IntoIterator<Item = &'a str>) -> i64 {
    names
        .into_iter()
        .filter_map(file_version)
        .max()
        .unwrap_or(0)
}

/// D1's error on reading a ledger that does not exist: no migration was ever applied.
pub fn d1_ledger_missing(message: &str) -> bool {
    message.contains("no such table: d1_migrations")
}

/// The version a migration file's name carries (`0005_leader_children.sql` → 5).
pub fn file_version(name: &str) -> Option<i64> {
    let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether a database at version `found` may be served from.
pub fn judge(found: i64) -> Result<(), DbError> {
    if found == VERSION {
        Ok(())
    } else {
        Err(DbError::schema_mismatch(VERSION, found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn versions(dialect: &str) -> Vec<i64> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../schema")
            .join(dialect);
        let mut out: Vec<i64> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|f| file_version(&f.ok()?.file_name().to_string_lossy()))
            .collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn the_expected_version_is_the_last_migration_file_of_every_dialect() {
        for d in ["sqlite", "postgres", "mysql"] {
            let v = versions(d);
            assert_eq!(v, (1..=VERSION).collect::<Vec<_>>(), "schema/{d}");
        }
    }

    #[test]
    fn the_d1_version_is_the_highest_numbered_file_wrangler_applied() {
        assert_eq!(d1_version([]), 0);
        assert_eq!(
            d1_version([
                "0001_runs.sql",
                "0003_reaper_tick.sql",
                "0002_ledger_leader.sql"
            ]),
            3
        );
        assert_eq!(d1_version(["notes.sql", "0005_leader_children.sql"]), 5);
        assert!(d1_ledger_missing(
            "D1_ERROR: no such table: d1_migrations: SQLITE_ERROR"
        ));
        assert!(!d1_ledger_missing("no such table: task_run"));
    }

    #[test]
    fn only_the_expected_version_is_served_from() {
        assert_eq!(judge(VERSION), Ok(()));
        for found in [0, VERSION - 1, VERSION + 1] {
            assert_eq!(judge(found), Err(DbError::schema_mismatch(VERSION, found)));
        }
    }

    #[test]
    fn file_names_carry_their_version() {
        assert_eq!(file_version("0005_leader_children.sql"), Some(5));
        assert_eq!(file_version("README"), None);
    }
}
