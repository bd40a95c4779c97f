//! SQL planned by the core and executed by an adapter (D1 in the Worker, engines in tests).
//!
//! A [`Stmt`] is SQL text plus positional parameters. The core decides from what comes back: rows as
//! JSON objects keyed by column name ([`Row`]) and the number of rows each statement changed.
//! Every statement exists in three dialects: SQLite / D1 (`?N` placeholders), PostgreSQL (`$N`) and
//! MySQL / MariaDB (`?`, one per occurrence, so a parameter used twice is bound twice). Where the
//! dialects differ only in placeholders, one `?N` text is written and rendered per dialect
//! ([`Stmt::portable`]); where they truly differ, the twins are written side by side
//! ([`Stmt::pick`]), the MySQL twin also in `?N` notation and rendered, so no per-occurrence
//! parameter list is kept by hand. No placeholder ever sits inside a quoted literal (tested).
//!
//! JSON values travel as text. PostgreSQL casts them (`$n::jsonb`, and `::text` when read);
//! MySQL / MariaDB take the text as a plain parameter (MySQL parses it into its JSON type, MariaDB's
//! JSON is LONGTEXT checked by `json_valid`; MariaDB has no `CAST(... AS JSON)`) and are read back
//! with `CAST(col AS CHAR)`.

pub mod claim_sql;
pub mod event_sql;
pub mod gate_sql;
pub mod leader_sql;
pub mod run_sql;
pub mod runner_sql;
pub mod session_sql;

use crate::json::{JsonText, Map, Quoted, Value};
use std::borrow::Cow;

/// The SQL dialects the store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// SQLite, exactly as D1 executes it.
    Sqlite,
    Postgres,
    /// MySQL and MariaDB.
    Mysql,
}

impl Dialect {
    pub const ALL: [Dialect; 3] = [Dialect::Sqlite, Dialect::Postgres, Dialect::Mysql];

    /// `self`, as this build can meet it. Each dialect but SQLite is a feature of this crate (both
    /// on by default); a build without one has no executor of it (the Worker's D1 build has
    /// neither), so every statement it writes is SQLite's. Every choice of text goes through here,
    /// so in such a build the choice is a constant and the other dialects' texts and paths are not
    /// compiled in (in the Worker, 24 KB of the module, 4 KB gzipped). Meeting a dialect the build
    /// left out is a programming error: it panics.
    #[inline(always)]
    pub fn built(self) -> Dialect {
        match self {
            Dialect::Sqlite => Dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Dialect::Postgres => Dialect::Postgres,
            #[cfg(feature = "mysql")]
            Dialect::Mysql => Dialect::Mysql,
            #[allow(unreachable_patterns)]
            other => panic!("{other:?} is not in this build"),
        }
    }

    /// The one of `[sqlite, postgres, mysql]` that is this dialect's.
    #[inline(always)]
    pub fn of<T>(self, [sqlite, postgres, mysql]: [T; 3]) -> T {
        match self.built() {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
            Dialect::Mysql => mysql,
        }
    }
}

/// A bound parameter. Integers must fit in ±2^53 to cross D1's JS-number binding unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlValue {
    Null,
    Int(i64),
    Text(String),
}

impl From<&str> for SqlValue {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}
impl From<String> for SqlValue {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}
impl From<i64> for SqlValue {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// Largest integer magnitude that survives a JS number (2^53 - 1).
pub const JS_SAFE_INT: i64 = (1 << 53) - 1;

/// One statement with its parameters, in one dialect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    pub sql: Cow<'static, str>,
    pub params: Vec<SqlValue>,
}

impl Stmt {
    pub fn new(sql: impl Into<Cow<'static, str>>, params: Vec<SqlValue>) -> Self {
        Self {
            sql: sql.into(),
            params,
        }
    }

    /// One text for every dialect, when they differ only in placeholders. `sql` numbers its
    /// parameters `?1, ?2, …` (a parameter may appear several times, in any order); it is rendered
    /// as is for SQLite, with `$N` for PostgreSQL, and with one `?` per occurrence for MySQL, the
    /// parameters laid out in occurrence order. Quoted literals are copied verbatim.
    pub fn portable(d: Dialect, sql: &'static str, params: Vec<SqlValue>) -> Self {
        match d.built() {
            Dialect::Sqlite => Self::new(sql, params),
            _ => Self::rendered(d, sql, params),
        }
    }

    /// Hand-written twins, where the dialects truly differ (casts, `FROM DUAL`, NULL-safe equality,
    /// `CAST(... AS CHAR)`, upserts). The SQLite text uses `?N`, the PostgreSQL text `$N`; the MySQL
    /// text is also written with `?N` and rendered as [`Stmt::portable`] renders it, so no
    /// per-occurrence index list is kept by hand.
    pub fn pick(
        d: Dialect,
        sqlite: &'static str,
        postgres: &'static str,
        mysql: &'static str,
        params: Vec<SqlValue>,
    ) -> Self {
        Self::chosen(d, d.of([sqlite, postgres, mysql]), params)
    }

    /// Dialect `d`'s text, chosen from its twins ([`Dialect::of`]); a MySQL text is written in `?N`
    /// notation and rendered, as [`Stmt::pick`]'s.
    pub fn chosen(d: Dialect, text: &'static str, params: Vec<SqlValue>) -> Self {
        match d.built() {
            Dialect::Mysql => Self::rendered(Dialect::Mysql, text, params),
            _ => Self::new(text, params),
        }
    }

    /// [`Stmt::pick`] for a text composed at run time: `text` composes the chosen dialect's (in
    /// `?N` notation for MySQL, as [`Stmt::pick`]'s), and only that one is composed.
    pub fn composed(
        d: Dialect,
        text: impl FnOnce(Dialect) -> String,
        params: Vec<SqlValue>,
    ) -> Self {
        let d = d.built();
        let sql = text(d);
        match d {
            Dialect::Mysql => Self::rendered(d, &sql, params),
            _ => Self::new(sql, params),
        }
    }

    fn rendered(d: Dialect, sql: &str, params: Vec<SqlValue>) -> Self {
        let (text, order) = render(d, sql);
        let params = match d {
            Dialect::Mysql => order
                .iter()
                .map(|i| {
                    params
                        .get(i - 1)
                        .unwrap_or_else(|| panic!("?{i} has no parameter in: {sql}"))
                        .clone()
                })
                .collect(),
            _ => params,
        };
        Self::new(text, params)
    }

    /// The table an `INSERT INTO <table>` writes, used to name the target of a duplicate-key error.
    pub fn insert_target(&self) -> Option<&str> {
        let rest = self.sql.trim_start().strip_prefix("INSERT INTO ")?;
        rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
    }

    /// Whether the statement returns rows (as opposed to a change count).
    pub fn is_query(&self) -> bool {
        let head = self.sql.trim_start();
        head.starts_with("SELECT") || head.starts_with("WITH")
    }

    /// Whether the statement answers with rows: a query, or a write with a `RETURNING` clause (the
    /// lease and the append in SQLite and PostgreSQL). An executor reads such a write's rows and
    /// its changes both.
    pub fn returns_rows(&self) -> bool {
        self.is_query() || self.sql.contains(" RETURNING ")
    }

    /// Checks that the placeholders of the text match the parameters for dialect `d` (a test aid).
    pub fn placeholders_match(&self, d: Dialect) -> Result<(), String> {
        let n = self.params.len();
        let max_numbered = |mark: char| {
            let mut max = 0usize;
            for (i, c) in self.sql.char_indices() {
                if c == mark {
                    let digits: String = self.sql[i + 1..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    if let Ok(k) = digits.parse::<usize>() {
                        max = max.max(k);
                    }
                }
            }
            max
        };
        let found = match d {
            Dialect::Sqlite => max_numbered('?'),
            Dialect::Postgres => max_numbered('$'),
            Dialect::Mysql => {
                if max_numbered('?') > 0 {
                    return Err(format!(
                        "MySQL text keeps a numbered placeholder: {}",
                        self.sql
                    ));
                }
                self.sql.matches('?').count()
            }
        };
        if found == n {
            Ok(())
        } else {
            Err(format!(
                "{d:?}: text uses {found} parameters, {n} bound: {}",
                self.sql
            ))
        }
    }
}

/// Renders a text whose placeholders are `?N` for dialect `d` (`?N` kept for SQLite, `$N` for
/// PostgreSQL, `?` for MySQL), returning the text and the 1-based parameter each placeholder binds,
/// in order. Text inside single-quoted literals is copied verbatim. Panics on a bare `?` or a `$`
/// outside a literal: the statement texts are constants, so that is a programming error.
pub fn render(d: Dialect, sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut order = vec![];
    let mut in_literal = false;
    let mut chars = sql.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if in_literal {
            in_literal = c != '\'';
            out.push(c);
            continue;
        }
        match c {
            '\'' => {
                in_literal = true;
                out.push(c);
            }
            '?' => {
                let digits: String = sql[i + 1..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let n: usize = digits
                    .parse()
                    .unwrap_or_else(|_| panic!("placeholder without a number at {i}: {sql}"));
                assert!(n > 0, "placeholders count from ?1: {sql}");
                for _ in 0..digits.len() {
                    chars.next();
                }
                order.push(n);
                match d {
                    Dialect::Sqlite => out.push_str(&format!("?{n}")),
                    Dialect::Postgres => out.push_str(&format!("${n}")),
                    Dialect::Mysql => out.push('?'),
                }
            }
            '$' => panic!("`$` outside a literal in a ?N text: {sql}"),
            _ => out.push(c),
        }
    }
    assert!(!in_literal, "unterminated literal: {sql}");
    (out, order)
}

/// The single-quoted literals of a statement text (a test aid: no placeholder may hide in one).
pub fn literals(sql: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut start = None;
    for (i, c) in sql.char_indices() {
        if c == '\'' {
            match start.take() {
                None => start = Some(i + 1),
                Some(s) => out.push(&sql[s..i]),
            }
        }
    }
    out
}

/// Builds a statement whose shape depends on optional filters, numbering placeholders for its dialect.
/// Used where composing fragments is clearer than listing every combination of filters.
#[derive(Debug)]
pub struct Builder {
    dialect: Dialect,
    sql: String,
    params: Vec<SqlValue>,
}

impl Builder {
    pub fn new(dialect: Dialect, head: &str) -> Self {
        Self {
            dialect,
            sql: head.to_owned(),
            params: Vec::new(),
        }
    }

    pub fn push(&mut self, text: &str) -> &mut Self {
        self.sql.push_str(text);
        self
    }

    /// Appends a placeholder bound to `value`.
    pub fn bind(&mut self, value: impl Into<SqlValue>) -> &mut Self {
        self.params.push(value.into());
        match self.dialect.built() {
            Dialect::Sqlite => self.sql.push_str(&format!("?{}", self.params.len())),
            Dialect::Postgres => self.sql.push_str(&format!("${}", self.params.len())),
            Dialect::Mysql => self.sql.push('?'),
        }
        self
    }

    /// Appends `(p1, p2, …)` binding each of `values` (not empty: `IN ()` is not SQL).
    pub fn bind_list(&mut self, values: &[&str]) -> &mut Self {
        self.push("(");
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(*v);
        }
        self.push(")")
    }

    pub fn build(self) -> Stmt {
        Stmt::new(self.sql, self.params)
    }
}

/// A result row: column name to value.
pub type Row = Map;

/// What one executed statement produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub changes: u64,
}

/// Errors from executing statements, as the core needs to tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbError {
    /// A UNIQUE or PRIMARY KEY constraint refused a write to `table`. The table is enough: every
    /// insert the store makes can only collide on one key of its table.
    Duplicate { table: String },
    /// The database's schema is not the version this code was written for (see [`crate::schema`]):
    /// nothing is served from it until the migrations are applied.
    /// Boxed: a store's `Result`s carry this type, and a pointer keeps them narrow.
    SchemaMismatch(Box<SchemaVersions>),
    /// Anything else: an infrastructure failure.
    Other(String),
}

/// The schema version a store's code expects, and the one its database is at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaVersions {
    pub expected: i64,
    pub found: i64,
}

impl DbError {
    pub fn schema_mismatch(expected: i64, found: i64) -> Self {
        Self::SchemaMismatch(Box::new(SchemaVersions { expected, found }))
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duplicate { table } => write!(f, "duplicate key in {table}"),
            Self::SchemaMismatch(v) => write!(
                f,
                "the database schema is at version {}, this code needs version {}",
                v.found, v.expected
            ),
            Self::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DbError {}

impl DbError {
    /// The refusal a caller sees for this failure when it is a deployment's state rather than an
    /// outage of ours: a schema mismatch is a 503 `store.schema_mismatch` saying what to apply.
    /// `None`: an infrastructure failure (an opaque 500) or a duplicate the store decides from.
    pub fn refusal(&self) -> Option<crate::ApiError> {
        match self {
            Self::SchemaMismatch(v) => Some(crate::ApiError::schema_mismatch(v.expected, v.found)),
            Self::Duplicate { .. } | Self::Other(_) => None,
        }
    }
}

/// Duplicate-key detection, SQLite / D1: the message `UNIQUE constraint failed: <table>.<column>`
/// (D1 wraps it in its own prefix and suffix). Returns the table.
pub fn sqlite_duplicate(message: &str) -> Option<String> {
    const MARK: &str = "UNIQUE constraint failed: ";
    let rest = &message[message.find(MARK)? + MARK.len()..];
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect(),
    )
}

/// Duplicate-key detection, PostgreSQL: SQLSTATE `23505` (unique_violation).
pub fn postgres_is_duplicate(sqlstate: &str) -> bool {
    sqlstate == "23505"
}

/// Classifies a PostgreSQL error from its SQLSTATE (absent when the failure is not the server's, e.g.
/// a broken connection), the table the server names, and its text. A unique violation is
/// [`DbError::Duplicate`]; everything else, serialization failures included (`40001`, which the
/// store's plans never provoke at the default READ COMMITTED), is [`DbError::Other`] for the caller's
/// infrastructure path. Both executors (the native test one and the Worker's) use this, so the store
/// decides the same way on either.
pub fn classify_postgres_error(
    sqlstate: Option<&str>,
    table: Option<&str>,
    text: String,
) -> DbError {
    match sqlstate {
        Some(code) if postgres_is_duplicate(code) => DbError::Duplicate {
            table: table.unwrap_or_default().to_owned(),
        },
        _ => DbError::Other(text),
    }
}

/// Duplicate-key detection, MySQL / MariaDB: error 1062 (`ER_DUP_ENTRY`).
pub fn mysql_is_duplicate(errno: u16) -> bool {
    errno == 1062
}

/// Classifies a SQLite / D1 error message.
pub fn classify_sqlite_error(message: &str) -> DbError {
    match sqlite_duplicate(message) {
        Some(table) => DbError::Duplicate { table },
        None => DbError::Other(message.to_owned()),
    }
}

/// A row's columns read one after another, keeping the first misfit: after one, every read returns
/// a placeholder (an empty string, zero, `None`). A reader of many columns is then its reads in a
/// row, with no early exit per column that must drop the columns read so far (code the module
/// would carry for every column of every reader); [`Cols::done`] answers for all of them.
pub struct Cols<'r> {
    row: &'r Row,
    misfit: Option<String>,
}

impl<'r> Cols<'r> {
    pub fn new(row: &'r Row) -> Self {
        Self { row, misfit: None }
    }

    fn keep<T: Default>(&mut self, read: Result<T, String>) -> T {
        match read {
            Ok(v) => v,
            Err(e) => {
                self.misfit.get_or_insert(e);
                T::default()
            }
        }
    }

    /// A NOT NULL text column ([`get_str`]).
    pub fn str(&mut self, col: &str) -> String {
        let read = get_str(self.row, col);
        self.keep(read)
    }

    /// A text column that may be NULL ([`get_opt_str`]).
    pub fn opt_str(&mut self, col: &str) -> Option<String> {
        let read = get_opt_str(self.row, col);
        self.keep(read)
    }

    /// An integer column ([`get_i64`]).
    pub fn i64(&mut self, col: &str) -> i64 {
        let read = get_i64(self.row, col);
        self.keep(read)
    }

    /// An integer column that may be NULL or absent ([`get_opt_i64`]).
    pub fn opt_i64(&mut self, col: &str) -> Option<i64> {
        let read = get_opt_i64(self.row, col);
        self.keep(read)
    }

    /// What `f` reads from `row` through one `Cols`: the value, or the first misfit.
    pub fn read<T>(row: &'r Row, f: impl FnOnce(&mut Cols<'r>) -> T) -> Result<T, String> {
        let mut cols = Cols::new(row);
        let value = f(&mut cols);
        cols.done().map(|()| value)
    }

    /// Whether every read fitted; otherwise the first misfit.
    pub fn done(self) -> Result<(), String> {
        match self.misfit {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// An integral number written with a fraction of zeros (`5.0`, as a driver writes a float column),
/// within a JavaScript number's exact integers.
fn integral(text: &str) -> Option<i64> {
    let (whole, zeros) = text.split_once('.')?;
    if zeros.is_empty() || !zeros.bytes().all(|b| b == b'0') {
        return None;
    }
    whole
        .parse::<i64>()
        .ok()
        .filter(|i| i.unsigned_abs() <= JS_SAFE_INT as u64)
}

/// Reads an integer column, accepting integral floats (JS numbers) and numeric strings.
pub fn get_i64(row: &Row, col: &str) -> Result<i64, String> {
    match row.get(col) {
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| integral(n.other()?))
            .ok_or_else(|| format!("column {col}: {n} is not an integer")),
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| format!("column {col}: {} is not an integer", Quoted(s))),
        Some(other) => Err(format!(
            "column {col}: expected an integer, got {}",
            other.json_text()
        )),
        None => Err(format!("column {col}: missing")),
    }
}

/// Reads an integer column that may be NULL or absent.
pub fn get_opt_i64(row: &Row, col: &str) -> Result<Option<i64>, String> {
    match row.get(col) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => get_i64(row, col).map(Some),
    }
}

/// Reads a text column that may be NULL.
pub fn get_opt_str(row: &Row, col: &str) -> Result<Option<String>, String> {
    match row.get(col) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("column {col}: expected text, got {other}")),
    }
}

/// Reads a NOT NULL text column.
pub fn get_str(row: &Row, col: &str) -> Result<String, String> {
    get_opt_str(row, col)?.ok_or_else(|| format!("column {col}: unexpected NULL"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pick_lays_out_mysql_parameters_per_occurrence() {
        let s = Stmt::pick(
            Dialect::Mysql,
            "SELECT ?1, ?2, ?1",
            "SELECT $1, $2, $1",
            "SELECT ?1, ?2, ?1",
            vec![SqlValue::Int(7), SqlValue::Int(8)],
        );
        assert_eq!(
            s.params,
            vec![SqlValue::Int(7), SqlValue::Int(8), SqlValue::Int(7)]
        );
        assert_eq!(s.sql, "SELECT ?, ?, ?");
        assert!(s.placeholders_match(Dialect::Mysql).is_ok());
    }

    #[test]
    fn portable_texts_render_per_dialect_and_leave_literals_alone() {
        let sql = "SELECT 'a?1$2' AS x FROM t WHERE b = ?2 AND c = ?1 OR d = ?2 AND e = 'it''s ?'";
        let params = || vec![SqlValue::Int(1), SqlValue::Text("two".into())];
        let lite = Stmt::portable(Dialect::Sqlite, sql, params());
        assert_eq!(lite.sql, sql);
        let pg = Stmt::portable(Dialect::Postgres, sql, params());
        assert_eq!(
            pg.sql,
            "SELECT 'a?1$2' AS x FROM t WHERE b = $2 AND c = $1 OR d = $2 AND e = 'it''s ?'"
        );
        assert_eq!(pg.params, params());
        let my = Stmt::portable(Dialect::Mysql, sql, params());
        assert_eq!(
            my.sql,
            "SELECT 'a?1$2' AS x FROM t WHERE b = ? AND c = ? OR d = ? AND e = 'it''s ?'"
        );
        assert_eq!(
            my.params,
            vec![
                SqlValue::Text("two".into()),
                SqlValue::Int(1),
                SqlValue::Text("two".into())
            ]
        );
        // Multi-digit numbers are one placeholder.
        let (text, order) = render(Dialect::Postgres, "SELECT ?10, ?1");
        assert_eq!((text.as_str(), order), ("SELECT $10, $1", vec![10, 1]));
        assert_eq!(literals("a 'x' b 'it''s'"), vec!["x", "it", "s"]);
    }

    #[test]
    #[should_panic(expected = "without a number")]
    fn a_bare_question_mark_in_a_portable_text_is_refused() {
        Stmt::portable(Dialect::Mysql, "SELECT ?", vec![]);
    }

    #[test]
    #[should_panic(expected = "outside a literal")]
    fn a_dollar_in_a_portable_text_is_refused() {
        Stmt::portable(Dialect::Postgres, "SELECT $1", vec![]);
    }

    #[test]
    fn insert_targets_and_queries_are_recognised() {
        let s = Stmt::new("INSERT INTO task_active (a) VALUES (?1)", vec![]);
        assert_eq!(s.insert_target(), Some("task_active"));
        assert!(!s.is_query() && !s.returns_rows());
        assert!(Stmt::new(" SELECT 1", vec![]).is_query());
        let returning = Stmt::new("UPDATE t SET a = 1 WHERE b = 2 RETURNING a", vec![]);
        assert!(!returning.is_query() && returning.returns_rows());
        for d in [Dialect::Sqlite, Dialect::Postgres] {
            let lease = &crate::sql::runner_sql::try_lease(d, "t", "r", 1);
            assert!(
                lease[crate::sql::runner_sql::lease_read(d)].returns_rows(),
                "{d:?}"
            );
        }
    }

    #[test]
    fn each_dialect_has_one_duplicate_key_rule() {
        assert!(postgres_is_duplicate("23505") && !postgres_is_duplicate("23503"));
        assert!(mysql_is_duplicate(1062) && !mysql_is_duplicate(1452));
        assert_eq!(
            sqlite_duplicate("UNIQUE constraint failed: leader_run.idem_key").as_deref(),
            Some("leader_run")
        );
        assert_eq!(sqlite_duplicate("NOT NULL constraint failed: t.c"), None);
    }

    #[test]
    fn postgres_unique_violations_name_their_table_and_all_else_is_infrastructure() {
        assert_eq!(
            classify_postgres_error(Some("23505"), Some("task_active"), "dup".into()),
            DbError::Duplicate {
                table: "task_active".into()
            }
        );
        assert_eq!(
            classify_postgres_error(Some("40001"), None, "serialize".into()),
            DbError::Other("serialize".into())
        );
        assert_eq!(
            classify_postgres_error(None, None, "connection closed".into()),
            DbError::Other("connection closed".into())
        );
    }

    #[test]
    fn d1_unique_errors_name_their_table_and_column() {
        let msg = "D1_ERROR: UNIQUE constraint failed: task_active.session_id: SQLITE_CONSTRAINT";
        assert_eq!(
            classify_sqlite_error(msg),
            DbError::Duplicate {
                table: "task_active".into()
            }
        );
        assert!(matches!(
            classify_sqlite_error("no such table: x"),
            DbError::Other(_)
        ));
    }

    #[test]
    fn integers_read_from_js_numbers_and_reject_fractions() {
        let row: Row = serde_json::from_str(r#"{"a":5,"b":5.0,"c":5.5,"d":"7","e":null}"#).unwrap();
        assert_eq!(get_i64(&row, "a"), Ok(5));
        assert_eq!(get_i64(&row, "b"), Ok(5));
        assert!(get_i64(&row, "c").is_err());
        assert_eq!(get_i64(&row, "d"), Ok(7));
        assert!(get_i64(&row, "e").is_err());
        assert_eq!(get_opt_str(&row, "e"), Ok(None));
    }
}

#[cfg(test)]
mod placeholder_tests {
    use super::*;

    /// Every statement the store plans, with sample arguments, in dialect `d`.
    fn all_statements(d: Dialect) -> Vec<Stmt> {
        let new = run_sql::NewRun {
            task_id: "t",
            session_id: "s",
            owner: Some("o"),
            instance_id: "i",
            objective: "obj",
            objective_preview: "obj",
            meta_json: "{}",
            queue: crate::queue::DEFAULT_QUEUE,
            now: 1,
            idempotency: Some(("k", "f", 202, "{}")),
        };
        let events = [event_sql::NewEvent {
            kind: "text_delta",
            data: "{}",
            event_id: Some("e"),
        }; 3];
        let tick = claim_sql::Tick {
            id: "tick",
            now: 2,
            limit: 10,
        };
        let mut v = run_sql::admit(d, &new);
        v.extend(run_sql::cancel(d, "t", 1));
        v.extend(run_sql::set_terminal(
            d,
            &run_sql::Terminal {
                task_id: "t",
                status: crate::status::TerminalStatus::Failed,
                result_json: Some("{}"),
                error: Some("e"),
                error_code: Some("c"),
                now: 1,
            },
        ));
        v.extend(run_sql::request_cancel(d, "t", None, 1));
        v.extend(run_sql::delete_by_session(d, "s"));
        v.extend(session_sql::delete_session(
            d,
            &session_sql::SessionDelete {
                session_id: "s",
                owner: Some("o"),
                marker: "m",
                leader_run_id: "l",
                now: 1,
            },
        ));
        v.push(session_sql::select_view(d, "s"));
        v.push(session_sql::purge_candidates(d, 1, 5));
        v.extend(session_sql::purge_runs(d, &["a", "b"], 1));
        v.extend(claim_sql::reap_stale(
            d,
            &tick,
            &claim_sql::StaleCutoffs { held: 1, queued: 3 },
        ));
        v.extend(claim_sql::requeue_unacked_leases(d, &tick, 1));
        v.extend(claim_sql::record_tick(
            d,
            &claim_sql::TickRecord {
                tick_id: "tick",
                started_at: 1,
                finished_at: 2,
                report_json: "{}",
            },
            5,
        ));
        v.push(claim_sql::recent_ticks(d, 5));
        let snapshot = crate::run::RunSnapshot {
            status: "running".into(),
            task_id: "old".into(),
            lease_epoch: 2,
            heartbeat_at: Some(7),
            held_by: Some("r".into()),
        };
        v.extend(run_sql::fail_if_unchanged(
            d,
            &run_sql::GuardedFail {
                snapshot: &snapshot,
                error: "e",
                error_code: Some("c"),
                now: 1,
            },
        ));
        v.extend(run_sql::take_over(
            d,
            &run_sql::Takeover {
                snapshot: &snapshot,
                reason: "r",
                new: &new,
            },
        ));
        v.extend(claim_sql::fail_parked_with_expired_checkpoint(d, &tick));
        v.extend(claim_sql::reap_parked_older_than(d, &tick, 1));
        v.extend(claim_sql::sweep_claims(
            d,
            "tick",
            &claim_sql::SweepWindow {
                after: "s",
                limit: 100,
            },
        ));
        // The statements every dialect's batch has: MySQL's append ends with a read, and its lease
        // reads back in two more, where SQLite's and PostgreSQL's writes return their rows.
        v.extend(
            event_sql::append(
                d,
                &event_sql::Append {
                    task_id: "t",
                    lease_epoch: 1,
                    runner_id: "r",
                    events: &events,
                    now: 1,
                },
            )
            .into_iter()
            .take(1 + events.len()),
        );
        v.push(event_sql::events_after(
            d,
            "t",
            0,
            10,
            event_sql::EVENT_PAGE_MAX_BYTES,
        ));
        v.push(event_sql::select_last_seq(d, "t"));
        v.extend(gate_sql::park(
            d,
            &gate_sql::Park {
                task_id: "t",
                lease_epoch: 1,
                runner_id: "r",
                checkpoint_id: "c",
                gate_kind: "human",
                status: crate::status::ParkStatus::Suspended,
                card_json: "{}",
                event_json: "{}",
                expires_at: Some(5),
                now: 1,
            },
        ));
        v.push(gate_sql::pending_gate(d, "s"));
        v.push(gate_sql::latest_gate(d, gate_sql::GateScope::Session("s")));
        v.push(gate_sql::latest_gate(d, gate_sql::GateScope::Task("t")));
        v.push(gate_sql::void_pending_of(d, "t", 1));
        v.push(gate_sql::resume_of(d, "t", "r"));
        for effect in [
            gate_sql::Effect::Resume { event_json: "{}" },
            gate_sql::Effect::End {
                status: crate::status::TerminalStatus::Cancelled,
                result_json: Some("{}"),
                error: Some("e"),
                error_code: Some("c"),
                done_json: "{}",
            },
        ] {
            v.extend(gate_sql::resolve(
                d,
                &gate_sql::ResolveWrite {
                    checkpoint_id: "c",
                    task_id: "t",
                    resolution_id: "rid",
                    decision: "approve",
                    reason: Some("why"),
                    effect,
                    now: 1,
                },
            ));
        }
        v.push(run_sql::select_run(d, "t"));
        v.push(run_sql::select_cancel_requested(d, "t", Some("o")));
        v.push(run_sql::release_claim_of(d, "t"));
        v.push(run_sql::select_idempotency(d, "k"));
        v.push(run_sql::select_session(d, "s"));
        v.push(run_sql::select_claim_holder(d, "s"));
        v.push(run_sql::select_claim_by_task(d, "t"));
        v.push(runner_sql::lease_candidates(d, "q", 5));
        v.push(runner_sql::leasable_since(d, 1, 5));
        v.push(runner_sql::release_lease(d, "t", "r", 1, 2));
        v.push(runner_sql::unacked_leases(d, &["t", "u"]));
        v.extend(runner_sql::try_lease(d, "t", "r", 1).into_iter().take(1));
        v.extend(runner_sql::heartbeat(
            d,
            &runner_sql::Heartbeat {
                task_id: "t",
                lease_epoch: 1,
                runner_id: "r",
                delivery_id: "dv",
                steer_page: 16,
                now: 1,
            },
        ));
        v.extend(runner_sql::finish(
            d,
            &runner_sql::Finish {
                task_id: "t",
                lease_epoch: 1,
                runner_id: "r",
                status: crate::status::TerminalStatus::Completed,
                result_json: Some("{}"),
                error: None,
                error_code: None,
                done_json: "{}",
                now: 1,
            },
        ));
        v.extend(runner_sql::add_steer(
            d,
            &runner_sql::NewSteer {
                task_id: "t",
                message: "m",
                now: 1,
                max_messages: 64,
                max_bytes: 1 << 20,
            },
        ));
        for scope in [
            run_sql::ListScope::Owner(Some("o")),
            run_sql::ListScope::Owner(None),
            run_sql::ListScope::All,
        ] {
            v.push(run_sql::list_runs(
                d,
                &scope,
                Some("s"),
                Some("running"),
                Some((1, "t")),
                5,
            ));
            v.push(run_sql::list_runs(d, &scope, None, None, None, 5));
            v.push(run_sql::list_sessions(d, &scope, Some((1, "s")), 5));
            v.push(session_sql::list_views(d, &scope, Some((1, "s")), 5));
            v.push(gate_sql::list_pending(
                d,
                &scope,
                Some("s"),
                Some((1, "s")),
                5,
            ));
            v.push(gate_sql::list_pending(d, &scope, None, None, 5));
        }
        v.push(leader_sql::insert(d, "l", Some("k"), None, "p", 1));
        v.push(leader_sql::select_by_id(d, "l"));
        v.push(leader_sql::select_by_idem(d, "k"));
        v.push(leader_sql::finish(
            d,
            "l",
            crate::leader::LeaderFinish::Completed,
            None,
            None,
            1,
        ));
        v.extend(leader_sql::reap_stale_running(d, "tick", "r", 10, 5));
        v.extend(run_sql::admit_guarded(
            d,
            &new,
            Some(run_sql::TaskGuard {
                table: "leader_child",
            }),
        ));
        v.push(leader_sql::insert_plan(d, "l", 2, Some(9), Some("fp"), 1));
        v.push(leader_sql::insert_plan(d, "l", 2, None, None, 1));
        v.push(leader_sql::insert_child(
            d,
            "l",
            0,
            "leader-l-0",
            "o",
            "{}",
            1,
        ));
        v.push(leader_sql::select_plan(d, "l"));
        for scope in [
            run_sql::ListScope::Owner(Some("o")),
            run_sql::ListScope::Owner(None),
            run_sql::ListScope::All,
        ] {
            v.push(leader_sql::list(
                d,
                &scope,
                Some("running"),
                Some((1, "l")),
                5,
            ));
            v.push(leader_sql::list(d, &scope, None, None, 5));
        }
        v.push(leader_sql::running_ids(d, "l", 5));
        v.push(leader_sql::select_children(d, "l"));
        v.extend(leader_sql::start_child(d, "l", 0, &new));
        v.push(leader_sql::skip_child(d, "l", 0, "timeout"));
        v.push(leader_sql::request_cancel(d, "l"));
        v.push(leader_sql::backdate_started_at(d, "l", 1));
        v.push(leader_sql::force_status(d, "l", "paused"));
        v
    }

    #[test]
    fn every_statement_binds_exactly_the_parameters_its_text_uses_in_every_dialect() {
        for d in Dialect::ALL {
            for s in all_statements(d) {
                s.placeholders_match(d).unwrap();
            }
        }
    }

    #[test]
    fn no_placeholder_hides_in_a_quoted_literal() {
        for d in Dialect::ALL {
            for s in all_statements(d) {
                for lit in literals(&s.sql) {
                    assert!(
                        !lit.contains('?') && !lit.contains('$'),
                        "{d:?}: placeholder mark inside '{lit}': {}",
                        s.sql
                    );
                }
            }
        }
    }

    #[test]
    fn the_dialects_plan_the_same_statements_with_the_same_values() {
        let texts: Vec<Vec<Stmt>> = Dialect::ALL.iter().map(|d| all_statements(*d)).collect();
        assert!(texts.iter().all(|t| t.len() == texts[0].len()));
        for (i, ((sqlite, postgres), mysql)) in
            texts[0].iter().zip(&texts[1]).zip(&texts[2]).enumerate()
        {
            // MySQL may repeat a parameter; the values it binds are the same values.
            for v in &mysql.params {
                assert!(
                    sqlite.params.contains(v),
                    "statement {i}: {v:?} only in MySQL"
                );
            }
            assert_eq!(sqlite.params, postgres.params, "statement {i}");
        }
    }
}
