#!/usr/bin/env python3
"""Seeds a local D1 database (the SQLite file under a `wrangler dev --persist-to` state, the Worker
stopped) with a store of a given scale, for the scale phase of scripts/bench (issue 15 item 4).

    scale_seed.py STATE_DIR --sessions N --runs M [--stale S] [--target LABEL]

What it writes, in one transaction, straight into the migrated file (the same SQL D1 runs):
- N sessions `scale-s-<i>`, owned by 100 tenants (`tenant-<i mod 100>`), so each tenant owns N/100;
- M runs `scale-r-<j>` of session j mod N (M/N runs per session), created over the last 30 days in
  the order of j, so a session's runs interleave with every other session's in time;
- the last run of a session decides the session's state. Of all sessions: 2% hold a running run
  leased by a live runner (heartbeat one hour ahead, so no reaper takes it during the phase), 1% a
  parked one (`suspended`, its pending gate checkpoint expiring in 7 days), 0.5% a queued one
  (unheld, queue `default`, leasable for a minute); every other run is terminal (completed 92%, failed 5%, cancelled 3%);
- S more running runs, each in a session of its own (`scale-stale-<k>`), silent since long ago: what
  one reaper tick must fail (reported by the `reaper` scenario);
- one `task_active` claim per non-terminal run, as admission would leave it.
Events, steer messages and idempotency keys are not seeded: they are keyed by run (or by key), so
their volume does not enter the plans of the measured statements.

Prints one JSON line: what was written and how long it took.
"""
import argparse
import glob
import json
import os
import sqlite3
import sys
import time

DAY_MS = 86_400_000
TENANTS = 100


def database(state):
    files = [f for f in glob.glob(os.path.join(state, "v3", "d1", "*", "*.sqlite"))
             if not f.endswith("metadata.sqlite")]
    if len(files) != 1:
        sys.exit(f"scale_seed: expected one D1 database under {state}, found {files}")
    return files[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("state")
    ap.add_argument("--sessions", type=int, required=True)
    ap.add_argument("--runs", type=int, required=True)
    ap.add_argument("--stale", type=int, default=100)
    ap.add_argument("--target", default=None, help="label stamped on the output line")
    a = ap.parse_args()
    if a.sessions <= 0 or a.runs < a.sessions:
        sys.exit("scale_seed: need --sessions > 0 and --runs >= --sessions")
    t0 = time.time()
    now = int(t0 * 1000)
    start = now - 30 * DAY_MS
    step = max(1, (30 * DAY_MS) // a.runs)
    path = database(a.state)
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous = OFF")
    # Which sessions end in which state (fixed shares, spread evenly over the sessions).
    def session_state(i):
        k = i % 200
        if k < 4:
            return "running"
        if k < 6:
            return "parked"
        if k == 6:
            return "queued"
        return "terminal"

    def terminal(j):
        k = j % 100
        return "completed" if k < 92 else ("failed" if k < 97 else "cancelled")

    counts = {"running": 0, "parked": 0, "queued": 0, "terminal": 0, "stale": a.stale}
    runs, actives, gates = [], [], []
    for j in range(a.runs):
        i = j % a.sessions
        sid, tid, owner = f"scale-s-{i}", f"scale-r-{j}", f"tenant-{i % TENANTS}"
        at = start + j * step
        # Run j is its session's last exactly when no run j + sessions follows it.
        state = session_state(i) if j + a.sessions >= a.runs else "terminal"
        counts[state] += 1
        held, epoch, acked, hb, result, error, code = None, 1, 1, at, None, None, None
        if state == "running":
            status, held, hb = "running", "seeder", now + 3_600_000
        elif state == "parked":
            status = "suspended"
        elif state == "queued":
            # Queued a minute ago (its queue deadline counted from an hour ahead, as for the held).
            status, epoch, acked, hb = "running", 0, 0, now + 3_600_000
        else:
            status = terminal(j)
            if status == "completed":
                result = '{"text":"ok"}'
            elif status == "failed":
                error, code = "failed", "runner.script_failed"
            else:
                error = "cancelled by user"
        updated = now - 60_000 if state == "queued" else at
        runs.append((tid, sid, owner, status, held, epoch, acked, hb, 1 if state == "parked" else 0,
                     at, updated, result, error, code))
        if state != "terminal":
            actives.append((sid, tid, at))
        if state == "parked":
            gates.append((f"scale-ck-{j}", sid, tid, owner, sid, at, now + 7 * DAY_MS))
    for k in range(a.stale):
        sid, tid = f"scale-stale-{k}", f"scale-stale-r-{k}"
        runs.append((tid, sid, None, "running", "seeder", 1, 1, 1000, 0, 1000, 1000, None, None, None))
        actives.append((sid, tid, 1000))
    sessions = [(f"scale-s-{i}", f"tenant-{i % TENANTS}", start, now) for i in range(a.sessions)]
    sessions += [(f"scale-stale-{k}", None, 1000, 1000) for k in range(a.stale)]
    with db:
        db.executemany(
            "INSERT INTO session (session_id, owner, created_at, updated_at) VALUES (?, ?, ?, ?)",
            sessions)
        db.executemany(
            "INSERT INTO task_run (task_id, session_id, owner, instance_id, status, objective, "
            "objective_preview, meta, held_by, lease_epoch, lease_acked, heartbeat_at, last_seq, "
            "created_at, updated_at, result, error, error_code, queue) "
            "VALUES (?, ?, ?, 'default', ?, 'seeded', 'seeded', '{}', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "'default')", runs)
        db.executemany(
            "INSERT INTO task_active (session_id, task_id, created_at) VALUES (?, ?, ?)", actives)
        db.executemany(
            "INSERT INTO gate_checkpoint (checkpoint_id, session_id, task_id, owner, gate_kind, card, "
            "status, pending_session, park_seq, expires_at, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, 'tool_approval', '{\"text\":\"seeded\"}', 'pending', ?, 1, ?, ?, ?)",
            [(c, s, t, o, p, e, at, at) for (c, s, t, o, p, at, e) in gates])
    db.close()
    print(json.dumps({"scenario": "scale-seed", "target": a.target, "sessions": a.sessions + a.stale,
                      "runs": a.runs + a.stale, "by_state": counts,
                      "claims": len(actives), "pending_gates": len(gates),
                      "seed_s": round(time.time() - t0, 1),
                      "database_bytes": os.path.getsize(path)}))


if __name__ == "__main__":
    main()
