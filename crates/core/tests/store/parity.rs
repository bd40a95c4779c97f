//! Schema parity: the three DDL sets, applied to the real engines and read back from each engine's
//! catalogue, define the same tables, columns (in order), primary keys, unique constraints and indexes.
//! Types may differ.

use crate::exec_mysql::MyExec;
use crate::harness::{Fixture, MyFx, PgFx, SqliteFx};
use mysql::prelude::Queryable;
use std::collections::BTreeMap;

#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    columns: Vec<String>,
    primary_key: Vec<String>,
    /// index name → (unique, columns)
    indexes: BTreeMap<String, (bool, Vec<String>)>,
}

type Shape = BTreeMap<String, Table>;

fn sqlite_shape(fx: &SqliteFx) -> Shape {
    let exec = fx.connect();
    let conn = exec.conn();
    let strings = |sql: &str| -> Vec<Vec<String>> {
        let mut st = conn.prepare(sql).unwrap();
        let n = st.column_count();
        st.query_map([], |r| {
            (0..n)
                .map(|i| {
                    r.get_ref(i).map(|v| match v {
                        rusqlite::types::ValueRef::Integer(k) => k.to_string(),
                        rusqlite::types::ValueRef::Text(t) => {
                            String::from_utf8_lossy(t).into_owned()
                        }
                        _ => String::new(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    let mut shape = Shape::new();
    for t in strings("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name") {
        let name = t[0].clone();
        let mut table = Table::default();
        // table_info: cid, name, type, notnull, dflt_value, pk
        let mut pk: Vec<(i64, String)> = vec![];
        for c in strings(&format!("PRAGMA table_info({name})")) {
            table.columns.push(c[1].clone());
            let k: i64 = c[5].parse().unwrap();
            if k > 0 {
                pk.push((k, c[1].clone()));
            }
        }
        pk.sort();
        table.primary_key = pk.into_iter().map(|(_, c)| c).collect();
        // index_list: seq, name, unique, origin, partial
        for i in strings(&format!("PRAGMA index_list({name})")) {
            if i[3] == "pk" {
                continue;
            }
            let cols = strings(&format!("PRAGMA index_info({})", i[1])).into_iter().map(|r| r[2].clone()).collect();
            table.indexes.insert(i[1].clone(), (i[2] == "1", cols));
        }
        shape.insert(name, table);
    }
    shape
}

fn postgres_shape(fx: &PgFx) -> Shape {
    let exec = fx.connect();
    let mut client = exec.client();
    let mut shape = Shape::new();
    let tables = client
        .query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1", &[])
        .unwrap();
    for t in tables {
        let name: String = t.get(0);
        let mut table = Table::default();
        for c in client
            .query(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
                &[&name],
            )
            .unwrap()
        {
            table.columns.push(c.get(0));
        }
        for i in client
            .query(
                "SELECT ic.relname::text, ix.indisunique, ix.indisprimary, \
                 array(SELECT a.attname::text FROM unnest(ix.indkey::int2[]) WITH ORDINALITY k(attnum, ord) \
                 JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum ORDER BY k.ord) \
                 FROM pg_index ix JOIN pg_class ic ON ic.oid = ix.indexrelid \
                 JOIN pg_class tc ON tc.oid = ix.indrelid JOIN pg_namespace n ON n.oid = tc.relnamespace \
                 WHERE n.nspname = current_schema() AND tc.relname = $1",
                &[&name],
            )
            .unwrap()
        {
            let cols: Vec<String> = i.get(3);
            if i.get::<_, bool>(2) {
                table.primary_key = cols;
            } else {
                table.indexes.insert(i.get(0), (i.get(1), cols));
            }
        }
        shape.insert(name, table);
    }
    shape
}

fn mysql_shape(fx: &MyFx) -> Shape {
    let exec: MyExec = fx.connect();
    let mut conn = exec.conn();
    let mut shape = Shape::new();
    let tables: Vec<String> = conn
        .query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1")
        .unwrap();
    for name in tables {
        let mut table = Table {
            columns: conn
                .exec(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() \
                     AND table_name = ? ORDER BY ordinal_position",
                    (&name,),
                )
                .unwrap(),
            ..Table::default()
        };
        let rows: Vec<(String, i64, String)> = conn
            .exec(
                "SELECT index_name, non_unique, column_name FROM information_schema.statistics \
                 WHERE table_schema = DATABASE() AND table_name = ? ORDER BY index_name, seq_in_index",
                (&name,),
            )
            .unwrap();
        for (index, non_unique, column) in rows {
            if index == "PRIMARY" {
                table.primary_key.push(column);
            } else {
                table
                    .indexes
                    .entry(index)
                    .or_insert((non_unique == 0, vec![]))
                    .1
                    .push(column);
            }
        }
        shape.insert(name, table);
    }
    shape
}

#[test]
fn the_three_schemas_define_the_same_tables_columns_keys_and_indexes() {
    let sqlite = sqlite_shape(&SqliteFx::new());
    let postgres = postgres_shape(&PgFx::new());
    let mysql = mysql_shape(&MyFx::new());
    let expected_tables = [
        "gate_checkpoint",
        "idempotency_key",
        "leader_child",
        "leader_plan",
        "leader_run",
        "leader_worker",
        "reaper_tick",
        "run_event",
        "session",
        "steer_message",
        "task_active",
        "task_run",
    ];
    assert_eq!(
        sqlite.keys().map(String::as_str).collect::<Vec<_>>(),
        expected_tables
    );
    for table in expected_tables {
        assert_eq!(
            sqlite[table], postgres[table],
            "{table}: SQLite vs PostgreSQL"
        );
        assert_eq!(sqlite[table], mysql[table], "{table}: SQLite vs MySQL");
    }
    assert_eq!(sqlite.len(), postgres.len());
    assert_eq!(sqlite.len(), mysql.len());
    assert_eq!(
        sqlite["leader_run"].indexes.get("uq_leader_run_idem"),
        Some(&(true, vec!["idem_key".to_owned()]))
    );
    assert_eq!(
        sqlite["gate_checkpoint"]
            .indexes
            .get("uq_gate_checkpoint_pending"),
        Some(&(true, vec!["pending_session".to_owned()])),
        "one pending gate per session is a unique key"
    );
}

#[test]
fn table_names_are_singular_and_postgres_text_columns_collate_c() {
    let fx = PgFx::new();
    let exec = fx.connect();
    let mut client = exec.client();
    let bad: Vec<String> = client
        .query(
            "SELECT table_name || '.' || column_name FROM information_schema.columns \
             WHERE table_schema = current_schema() AND data_type IN ('text','character varying','character') \
             AND collation_name IS DISTINCT FROM 'C'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        bad.is_empty(),
        "text columns without COLLATE \"C\": {bad:?}"
    );
    let tables: Vec<String> = client
        .query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema()", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for t in tables {
        assert!(!t.ends_with('s'), "table {t} is not singular");
    }
}

#[test]
fn mysql_tables_compare_ids_byte_for_byte() {
    let fx = MyFx::new();
    let exec = fx.connect();
    let bad: Vec<String> = exec
        .conn()
        .query(
            "SELECT CONCAT(table_name, '.', column_name) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND collation_name IS NOT NULL AND collation_name <> 'utf8mb4_bin'",
        )
        .unwrap();
    assert!(bad.is_empty(), "columns not utf8mb4_bin: {bad:?}");
}
