//! The store contract suite: the same test bodies on SQLite (the SQL D1 runs), PostgreSQL and
//! MariaDB, through the core's `SqlStore`, plus schema parity and query-plan checks.
//! PostgreSQL and MariaDB are the servers scripts/test starts on loopback.

mod contract;
mod exec_mysql;
mod exec_postgres;
mod exec_sqlite;
mod harness;
mod parity;
mod plan;
