//! SQL planned by the core and executed by an adapter (D1 in the Worker, engines in tests).
//!
//! A [`Stmt`] is SQL text plus positional parameters. The core decides from what comes back: rows as
//! JSON objects keyed by column name ([`Row`]) and the number of rows each statement changed.
//! Statements here are the SQLite dialect that D1 executes (`?N` placeholders).

pub mod run_sql;

use serde_json::{Map, Value};

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

/// One statement with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    pub sql: &'static str,
    pub params: Vec<SqlValue>,
}

impl Stmt {
    pub fn new(sql: &'static str, params: Vec<SqlValue>) -> Self {
        Self { sql, params }
    }
}

/// A result row: column name to value.
pub type Row = Map<String, Value>;

/// What one executed statement produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub rows: Vec<Row>,
    pub changes: u64,
}

/// Errors from executing statements, as the core needs to tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbError {
    /// A UNIQUE or PRIMARY KEY constraint refused a write; `target` is `table.column` when known.
    Duplicate { target: String },
    /// Anything else: an infrastructure failure.
    Other(String),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duplicate { target } => write!(f, "duplicate key on {target}"),
            Self::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DbError {}

/// Classifies a SQLite / D1 error message. SQLite reports `UNIQUE constraint failed: t.c` for both
/// UNIQUE indexes and primary keys; D1 wraps it in its own prefix and suffix.
pub fn classify_sqlite_error(message: &str) -> DbError {
    const MARK: &str = "UNIQUE constraint failed: ";
    match message.find(MARK) {
        Some(at) => {
            let rest = &message[at + MARK.len()..];
            let target: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                .collect();
            DbError::Duplicate { target }
        }
        None => DbError::Other(message.to_owned()),
    }
}

/// Reads an integer column, accepting integral floats (JS numbers) and numeric strings.
pub fn get_i64(row: &Row, col: &str) -> Result<i64, String> {
    match row.get(col) {
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() <= JS_SAFE_INT as f64)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| format!("column {col}: {n} is not an integer")),
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| format!("column {col}: {s:?} is not an integer")),
        other => Err(format!("column {col}: expected an integer, got {other:?}")),
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
    fn d1_unique_errors_name_their_table_and_column() {
        let msg = "D1_ERROR: UNIQUE constraint failed: task_active.session_id: SQLITE_CONSTRAINT";
        assert_eq!(
            classify_sqlite_error(msg),
            DbError::Duplicate {
                target: "task_active.session_id".into()
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
