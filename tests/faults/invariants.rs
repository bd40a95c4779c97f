//! The invariants both fault tests check, read from the Worker's local D1 in one read transaction
//! (a consistent snapshot even while the Worker writes): never two active runs in a session; a
//! claim only for an active run (no orphan claim, no run both terminal and claimed); every active
//! run holds its session's claim; each run's ledger seqs dense `1..=last_seq`, at most one `done`
//! and only as a terminal run's last event; a pending gate only on its session's parked holder.

use std::collections::{BTreeMap, HashMap};

/// Statuses of a run that holds its session (SPEC-core: running or parked).
pub const ACTIVE: [&str; 3] = ["running", "suspended", "needs_review"];

pub fn is_active(status: &str) -> bool {
    ACTIVE.contains(&status)
}

/// One run as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub task_id: String,
    pub session_id: String,
    pub status: String,
    pub result: Option<String>,
    pub error: Option<String>,
    pub error_code: Option<String>,
    pub last_seq: i64,
    pub lease_epoch: i64,
}

/// What a terminal run must never change again: status, result, error, error code, last seq.
pub type TerminalFace = (String, Option<String>, Option<String>, Option<String>, i64);

impl Run {
    /// What a terminal run must never change again.
    pub fn terminal_face(&self) -> TerminalFace {
        (
            self.status.clone(),
            self.result.clone(),
            self.error.clone(),
            self.error_code.clone(),
            self.last_seq,
        )
    }
}

/// One ledger event as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub seq: i64,
    pub kind: String,
    pub data: String,
}

/// What D1 holds for some sessions, read in one transaction.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub runs: BTreeMap<String, Run>,
    /// session → the task its claim names.
    pub claims: BTreeMap<String, String>,
    /// task → its events in seq order.
    pub events: HashMap<String, Vec<Event>>,
    /// (session, task) of every pending gate.
    pub pending_gates: Vec<(String, String)>,
}

impl Snapshot {
    /// Reads `sessions` (every session when `None`).
    pub fn read(conn: &mut rusqlite::Connection, sessions: Option<&[String]>) -> Self {
        let tx = conn.transaction().expect("read transaction");
        let mut s = Snapshot::default();
        let filter = |col: &str| match sessions {
            None => String::new(),
            Some(list) => format!(
                " WHERE {col} IN ({})",
                list.iter()
                    .map(|x| format!("'{}'", x.replace('\'', "''")))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        {
            let mut q = tx
                .prepare(&format!(
                    "SELECT task_id, session_id, status, result, error, error_code, last_seq, lease_epoch FROM task_run{}",
                    filter("session_id")
                ))
                .unwrap();
            let rows = q
                .query_map([], |r| {
                    Ok(Run {
                        task_id: r.get(0)?,
                        session_id: r.get(1)?,
                        status: r.get(2)?,
                        result: r.get(3)?,
                        error: r.get(4)?,
                        error_code: r.get(5)?,
                        last_seq: r.get(6)?,
                        lease_epoch: r.get(7)?,
                    })
                })
                .unwrap();
            for run in rows {
                let run = run.unwrap();
                s.runs.insert(run.task_id.clone(), run);
            }
            let mut q = tx
                .prepare(&format!(
                    "SELECT session_id, task_id FROM task_active{}",
                    filter("session_id")
                ))
                .unwrap();
            for row in q
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .unwrap()
            {
                let (session, task) = row.unwrap();
                s.claims.insert(session, task);
            }
            let events = match sessions {
                None => "SELECT task_id, seq, type, data FROM run_event ORDER BY task_id, seq"
                    .to_owned(),
                Some(_) => format!(
                    "SELECT e.task_id, e.seq, e.type, e.data FROM run_event e JOIN task_run r ON r.task_id = e.task_id{} ORDER BY e.task_id, e.seq",
                    filter("r.session_id")
                ),
            };
            let mut q = tx.prepare(&events).unwrap();
            for row in q
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        Event {
                            seq: r.get(1)?,
                            kind: r.get(2)?,
                            data: r.get(3)?,
                        },
                    ))
                })
                .unwrap()
            {
                let (task, e) = row.unwrap();
                s.events.entry(task).or_default().push(e);
            }
            let mut q = tx
                .prepare(&format!(
                    "SELECT session_id, task_id FROM gate_checkpoint{}",
                    match sessions {
                        None => " WHERE status = 'pending'".to_owned(),
                        Some(_) => format!("{} AND status = 'pending'", filter("session_id")),
                    }
                ))
                .unwrap();
            for row in q
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .unwrap()
            {
                s.pending_gates.push(row.unwrap());
            }
        }
        tx.commit().unwrap();
        s
    }

    /// Every broken invariant, as sentences (empty when all hold).
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut active: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for r in self.runs.values().filter(|r| is_active(&r.status)) {
            active.entry(&r.session_id).or_default().push(&r.task_id);
        }
        for (session, tasks) in &active {
            if tasks.len() > 1 {
                v.push(format!(
                    "session {session} has {} active runs: {tasks:?}",
                    tasks.len()
                ));
            }
            for t in tasks {
                if self.claims.get(*session).map(String::as_str) != Some(t) {
                    v.push(format!(
                        "active run {t} of session {session} does not hold its claim (claim: {:?})",
                        self.claims.get(*session)
                    ));
                }
            }
        }
        for (session, task) in &self.claims {
            match self.runs.get(task) {
                None => v.push(format!(
                    "orphan claim: session {session} claimed by missing run {task}"
                )),
                Some(r) if !is_active(&r.status) => v.push(format!(
                    "run {task} is both {} and claimed (session {session})",
                    r.status
                )),
                Some(r) if r.session_id != *session => v.push(format!(
                    "claim of session {session} names run {task} of session {}",
                    r.session_id
                )),
                Some(_) => {}
            }
        }
        for r in self.runs.values() {
            let events = self
                .events
                .get(&r.task_id)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
            if seqs != (1..=r.last_seq).collect::<Vec<_>>() {
                v.push(format!(
                    "run {} ledger seqs are not 1..={}: {seqs:?}",
                    r.task_id, r.last_seq
                ));
            }
            let dones: Vec<i64> = events
                .iter()
                .filter(|e| e.kind == "done")
                .map(|e| e.seq)
                .collect();
            match dones.as_slice() {
                [] => {}
                [seq] if *seq == r.last_seq && !is_active(&r.status) => {}
                _ => v.push(format!(
                    "run {} ({}, last_seq {}) has done events at {dones:?}",
                    r.task_id, r.status, r.last_seq
                )),
            }
        }
        let mut gates: BTreeMap<&str, usize> = BTreeMap::new();
        for (session, task) in &self.pending_gates {
            *gates.entry(session).or_default() += 1;
            match self.runs.get(task) {
                Some(r) if r.status == "suspended" || r.status == "needs_review" => {
                    if self.claims.get(session) != Some(task) {
                        v.push(format!(
                            "pending gate of {task} but session {session} is claimed by {:?}",
                            self.claims.get(session)
                        ));
                    }
                }
                other => v.push(format!(
                    "pending gate of session {session} on run {task} that is not parked: {:?}",
                    other.map(|r| &r.status)
                )),
            }
        }
        for (session, n) in gates {
            if n > 1 {
                v.push(format!("session {session} has {n} pending gates"));
            }
        }
        v
    }
}
