"""Turns the JSON lines of scripts/bench into docs/BENCHMARKS.md and an SVG chart.

usage: report.py RESULTS.jsonl BENCHMARKS.md CHART.svg COMMAND
Standard library only; every figure in the report comes from the results file of the same run.
"""
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by = defaultdict(list)
    for r in rows:
        # The PostgreSQL Worker's lines (section 11) are kept apart, so every other section stays D1's.
        # So are the bench-only far Worker's (section 12: every D1 round trip 50 ms away).
        # And the scale phase's (section 14: two fresh stores seeded out of band, 1,000 and 1,000,000 runs).
        # The far Worker's second start, admissions committed in the session object, is "farobj:".
        prefix = {"pg-direct": "pg:", "far-direct": "far:", "far-object-direct": "farobj:",
                  "seed-1k": "scale:", "seed-1m": "scale:"}.get(r.get("target"), "")
        by[prefix + r["scenario"]].append(r)
    return by


def fmt(v, digits=1):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 1 else f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def pick(rows, **kw):
    return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]


def scale_admission(by):
    """Admission on the two scale stores, served at once and measured in interleaved rounds (a line per store, level
    and round; a run from before the rounds has one line each, round 0): {concurrency: (1k per s, 1m per s, 1m ÷ 1k,
    its lowest round, its highest)}, the rates the medians of the rounds and the ratio the median of each round's
    pair (None where a store lacks the level)."""
    rows = by.get("scale:admission", [])
    med = lambda xs: statistics.median(xs) if xs else None
    out = {}
    for c in sorted({r["concurrency"] for r in rows}):
        rounds = defaultdict(dict)
        for r in pick(rows, concurrency=c):
            if r.get("per_s"):
                rounds[r.get("round", 0)][r.get("target")] = r["per_s"]
        ratios = sorted(v["seed-1m"] / v["seed-1k"] for v in rounds.values() if "seed-1k" in v and "seed-1m" in v)
        out[c] = (med([v["seed-1k"] for v in rounds.values() if "seed-1k" in v]),
                  med([v["seed-1m"] for v in rounds.values() if "seed-1m" in v]),
                  med(ratios), ratios[0] if ratios else None, ratios[-1] if ratios else None)
    return out


def floor_at(by, part, kind, c):
    """The floor Worker's line for `part` into `kind` objects ("new" / "warm") at concurrency `c` (section 10), or None."""
    return next(iter(pick(by.get("floor", []), part=part, objects=kind, concurrency=c)), None)


def seeded_runs(by):
    """The scale stores' sizes as seeded (their stale runs included), by target ("seed-1k", "seed-1m")."""
    return {r["target"]: r["runs"] for r in by.get("scale:scale-seed", []) if r.get("runs")}


# What a reaper tick does besides telling sessions (its `duration_ms` less its `notify_ms`).
REST_OF_TICK = "its D1 passes, leader drives and queue announcements"


def tell_floor(by, at_once):
    """The floor Worker's notices to new objects (`floor-tell`) with `at_once` in flight, or None."""
    return next((r for r in by.get("floor-tell", []) if r.get("at_once") == at_once and r.get("p50_ms") is not None
                 and not r.get("errors")), None)


def findings(by, ceil):
    """Observations computed from this run's figures (design problems are named as such)."""
    adm = pick(by["admission"], target="workerd-direct")
    best = max((r["per_s"] for r in adm), default=0)
    cost = {r["op"]: r for r in by["cost"]}
    peer = max((r["per_s"] for r in by["peer-admission"]), default=0)
    so = {r["what"]: r for r in by["session-object"]}
    lines = [
        f"- **Admission is the bottleneck, not the runtime:** at best {best:,.0f} admissions/s on workerd-direct, "
        f"{best / ceil['workerd-direct']['per_s']:.0%} of the trivial route's {ceil['workerd-direct']['per_s']:,.0f}/s, and "
        f"{best / peer:.0%} of the in-memory peer's best {peer:,.0f}/s (which persists nothing). Where the time goes (sequential, section 5b): the trivial route takes "
        f"{so.get('GET /health', {}).get('p50_ms', 0):.1f} ms, an admission into an already-live session object "
        f"{so.get('admission into a warm session object', {}).get('p50_ms', 0):.1f} ms (one Durable Object hop and one D1 batch), "
        f"and an admission that creates a new session object {so.get('admission creating a new session object', {}).get('p50_ms', 0):.1f} ms. "
        f"Creating the per-session object adds {so.get('admission creating a new session object', {}).get('p50_ms', 0) - so.get('admission into a warm session object', {}).get('p50_ms', 0):.1f} ms, "
        "the largest single part of an admission into a fresh session. (An experiment that dropped the object's own "
        "storage write changed nothing measurable, so that write is not the cost.) A design problem to weigh: every new "
        "session pays an object creation; the single-active claim needs the per-session serialisation, so the remedy is "
        "not to drop the object but to keep its first request cheap (no storage read when the session is new).",
        f"- **The conflict path costs no D1 round trip** ({cost.get('conflicting submit (409)', {}).get('d1_round_trips')} round trips, "
        "answered from the session object's memory); its latency under 100 simultaneous submits is queueing behind the "
        "one admission that holds the object's lock, on two shared cores.",
        f"- **Runner calls route by the run's session.** The first append or finish a Worker isolate sees for a run looks the "
        f"session up in D1 ({cost.get('event batch (100 events; first call for the run in this isolate)', {}).get('d1_round_trips')} round trips); "
        f"later calls hit an isolate-local memo (a run's session never changes), and a runner that sends its lease's "
        f"`sessionId` back as a hint spares the lookup even on its first call "
        f"({cost.get('event batch (1 event; first call for the run, with the session hint)', {}).get('d1_round_trips')} round trip), so an append costs "
        f"{cost.get('event batch (1 event; later call)', {}).get('d1_round_trips')} round trip. Finish costs "
        f"{cost.get('finish', {}).get('d1_round_trips')}: its batch reads the finished run back for its answer, in the same round trip.",
        "- **Live delivery is cheap:** an appended event reaches an SSE client in single-digit milliseconds at p50, and 100 "
        "subscribers on one run all receive every event (fan-out happens inside the session object, no D1 polling).",
        "- wrangler dev's reload proxy and per-request logging cost roughly a third of the trivial route's throughput "
        f"({ceil['wrangler-dev']['per_s']:,.0f}/s vs {ceil['workerd-direct']['per_s']:,.0f}/s) but little of admission, "
        "which is bound by the session object and D1.",
    ]
    return "\n".join(lines)


def warm_admission_rows(by):
    """Section 2's warm sessions (`sema-bench admission-warm`), beside the floor's warm design part."""
    rows = by.get("admission-warm", [])
    if not rows:
        return []
    fl = lambda c: (warm_floor_at(by, c)[0] or {}).get("per_s")
    with_cancel = any(warm_floor_at(by, r["concurrency"])[1] for r in rows)
    return [
        "Into warm sessions (`admission-warm`, workerd-direct): each client thread keeps one session, whose object "
        "exists before the level starts; each submit is followed by the cancel of its run, inside the level's window "
        "(a session admits one run at a time), so a rate here is admissions with their cancels. "
        + ("The floor's warm design part (section 10) does the same: each admission followed by its run's cancel:"
           if with_cancel else "The floor's warm design part (section 10) admits into its object again without a cancel:"),
        "",
        table(["target", "concurrency", "admissions/s", "p50 ms", "p95 ms", "p99 ms", "errors", "failed cancels",
               "sessions not warmed", "floor's warm design part per s"],
              [[r["target"], r["concurrency"], r["per_s"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["errors"],
                r.get("cancel_errors"), r.get("warming_errors"), fl(r["concurrency"])]
               for r in rows]),
        "",
    ]


def targets_section(by):
    """Issue 15's targets beside this run's figures: each met or not, and when not, whether the floor measured in the
    same run already misses it (the part named, with its figure) or ours does above a floor that would meet it.
    A target whose figure, floor or reference is missing from the run says so rather than take a verdict."""
    direct = lambda scen, **kw: next(iter(pick(by.get(scen, []), target="workerd-direct", **kw)), None)
    rate = lambda r: r and r.get("per_s")
    peer_best = max((r["per_s"] for r in by.get("peer-admission", [])), default=None)
    rows = []

    def add(target, ours, floor_figure, met, floor_meets, stops="", floored=False):
        """`floor_meets`: True / False when the run measured the floor (False: it misses the target too), None when
        there is none to compare (an overhead, a size: `floored` False) or the run did not measure it."""
        if ours is None or met is None:
            rows.append([target, ours or "not measured in this run", floor_figure, "–", ""])
            return
        if met:
            verdict, stops = "met", ""
        elif floor_meets is False:
            verdict = "not met: the floor misses it too"
        elif floor_meets is None and floored:
            verdict, stops = "not met (no floor in this run)", ""
        else:
            verdict, stops = "not met: ours", ("ours: the floor meets it" if floor_meets else stops or "ours")
        rows.append([target, ours, floor_figure, verdict, stops])

    # Far from D1's primary: the far Worker's delay per D1 round trip, as its run line states it.
    delay = next((r.get("d1_round_trip_delay_ms") for r in by.get("far:far", []) + by.get("farobj:far", [])), None)
    so = lambda scen, what: next((r for r in by.get(scen, []) if r.get("what") == what), None)
    for scen, mode in [("far:session-object", "the commit in D1 (the default)"),
                       ("farobj:session-object", "the commit in the object (opt-in: SEMA_ADMIT_COMMIT=object)")]:
        for what, kind in [("admission into a warm session object", "warm"), ("admission creating a new session object", "new")]:
            r = so(scen, what)
            p50 = r and r["p50_ms"]
            waits_d1 = scen.startswith("far:") or kind == "new"
            add(f"{fmt(delay)} ms from D1: admission p50 ≤ 15 ms, {kind} session, {mode}", p50 and f"{fmt(p50)} ms",
                f"one D1 round trip: {fmt(delay)} ms" if waits_d1 and delay else "–",
                None if p50 is None else p50 <= 15, (False if delay and delay > 15 else None) if waits_d1 else None,
                "the admission waits for D1's answer: one round trip" if scen.startswith("far:") else
                "a new session's first admission commits in D1 (a session no object has confirmed is free only by D1's "
                "word): one round trip", floored=waits_d1)

    # Throughput against the peer's best.
    for kind, scen, factor in [("warm", "admission-warm", 2.0), ("new", "admission", 1.2)]:
        for c in (8, 32, 128):
            ours = rate(direct(scen, concurrency=c))
            need = peer_best and factor * peer_best
            fl_line, with_cancel = warm_floor_at(by, c) if kind == "warm" else (floor_at(by, DESIGN_FLOOR, kind, c), False)
            fl = rate(fl_line)
            platform = rate(floor_at(by, "do" if kind == "new" else "do-storage", kind, c))
            target = (f"admission into {kind} sessions ≥ {factor:g}× the peer's best "
                      + (f"({fmt(peer_best)}/s: {fmt(need)}/s)" if need else "(the peer not measured)") + f", c={c}"
                      + (" (ours: each submit followed by its run's cancel, section 2)" if kind == "warm" else ""))
            add(target, ours and f"{fmt(ours)}/s",
                f"{fmt(fl)}/s (the design{', each admission with its cancel, as ours' if with_cancel else ''}); {fmt(platform)}/s (" +
                ("a bare new-object round trip" if kind == "new" else "object + storage write, no D1") + ")",
                None if not (ours and need) else ours >= need, None if not (fl and need) else fl >= need,
                f"the design's floor at c={c}: {fmt(fl)}/s, its D1 batch from the object" +
                (" and its cancel's (the Worker's read of the run, the object's batch)" if with_cancel else "") +
                (f"; even a bare round trip into a new object runs at {fmt(platform)}/s" if kind == "new" else ""),
                floored=True)

    # Overhead above the floor of the design, interleaved. The time's overhead decides; the CPU's (per operation, the
    # side's workerd process) is shown beside it where the two sides do the same work, as the steadier figure.
    over_text = lambda o, cpu: f"{fmt(o[0])}% ({fmt(o[1])} to {fmt(o[2])})" + (f"; CPU {fmt(cpu[0])}%" if cpu else "")
    # Whether an overhead over 10% held in every round, or only in some (the run's noise spans the target).
    over_stops = lambda o: ("ours, in every round (its lowest paired figure is above 10%)" if o and o[1] > 10 else
                            "ours by the median; its rounds fall on both sides of 10%")
    # Where the run has the floor through the Rust binding, it is the design's floor the target is judged against (the
    # product's shape fixes the binding); the overhead above the JavaScript floor, and the binding's share of it, beside.
    def overhead(rows, key, cpu_key, rs_side, js_side, **match):
        """(judged overhead, its CPU's, the floor column's text): against the Rust floor when the rows have it. The CPU's
        (`cpu_key`) only where both sides do the same work, else None."""
        cpu_of = lambda side: cpu_key and paired(rows, cpu_key, "ours", side, **match)
        o_js, cpu_js = paired(rows, key, "ours", js_side, **match), cpu_of(js_side)
        o_rs = paired(rows, key, "ours", rs_side, **match)
        if not o_rs:
            return o_js, cpu_js, "–"
        binding = paired(rows, key, rs_side, js_side, **match)
        return (o_rs, cpu_of(rs_side),
                f"the Rust floor; above the JavaScript floor ours is {o_js and over_text(o_js, cpu_js)}, of which the "
                f"binding (the Rust floor over the JavaScript one) {binding and over_text(binding, None)}")

    bf = [dict(r, ms_per_admission=1000 / r["per_s"]) for r in by.get("beside-floor", []) if "side" in r and r.get("per_s")]
    for c in sorted({r["concurrency"] for r in bf}) or [None]:
        o, cpu, against = (overhead(bf, "ms_per_admission", "cpu_ms_per_admission", RS_FLOOR, DESIGN_FLOOR, concurrency=c)
                           if c else (None,) * 3)
        add("overhead ≤ 10% above the floor: admission" + (f", c={c}" if c else ""), o and over_text(o, cpu),
            against or "–", o and o[0] <= 10, None, over_stops(o))
    bp = [r for r in by.get("beside-floor-paths", []) if "side" in r]
    parts = PARTS_WORDS[interleaved_parts(bp)]
    for path, name in INTERLEAVED_PATHS:
        # A hand-over's CPU is not like for like (section 10: ours also finishes each run).
        cpu_key = "cpu_ms_per_op" if path in ("contention", "append") else None
        o, cpu, against = overhead(bp, "p50_ms", cpu_key, RS_PATH_SIDE, "floor", path=path)
        against = against.replace("the Rust floor;", f"the Rust floor (through {parts});", 1)
        add(f"overhead ≤ 10% above the floor: {name}, p50", o and over_text(o, cpu), against,
            o and o[0] <= 10, None, over_stops(o))

    # Conflicts under 100 simultaneous submits.
    con, peer_con = direct("contention"), next(iter(by.get("peer-contention", [])), None)
    fl_con = floor_line(by, "floor-contention", "design") or floor_line(by, "floor-contention", "bare")
    need = peer_con and peer_con["p99_ms"] / 5
    add("409 p99 under 100 simultaneous submits ≤ 1/5 of the peer's" + (f" ({fmt(need)} ms)" if need else " (the peer not measured)"),
        con and f"{fmt(con['p99_ms'])} ms", fl_con and f"{fmt(fl_con['p99_ms'])} ms",
        None if not (con and need) else con["p99_ms"] <= need, None if not (fl_con and need) else fl_con["p99_ms"] <= need,
        "the floor's 409s queue the same way: 100 requests into one object on two shared cores, behind the one "
        f"admission's D1 batch (its p99 {fmt(fl_con and fl_con['p99_ms'])} ms)", floored=True)
    sized = con and con["sessions"] >= 50
    add("exactly one 202 per session over 50 sessions (100 simultaneous submits each)",
        con and (f"{con['sessions_with_exactly_one_accepted']} of {con['sessions']}"
                 + ("" if sized else " (fewer sessions than the target's 50)")), "–",
        (con["sessions_with_exactly_one_accepted"] == con["sessions"]) if sized else None, None)

    # Scale.
    seeded = seeded_runs(by)
    scale = scale_admission(by)
    big = f"{fmt(seeded.get('seed-1m'))} runs" if seeded.get("seed-1m") else "the large store"
    for c in sorted(scale) or [None]:
        ratio, low, high = scale[c][2:] if c else (None, None, None)
        spread = f" ({low:.3f} to {high:.3f} over the rounds)" if ratio is not None and low != high else ""
        add(f"at {big}, admission within 20% of the rate at {fmt(seeded.get('seed-1k'))} runs" + (f", c={c}" if c else ""),
            ratio and f"{ratio:.3f}×{spread}", "–", None if ratio is None else ratio >= 0.8, None)
    tick = next(iter(pick(by.get("scale:reaper", []), target="seed-1m")), None)
    told = tick and tick.get("sessions_told")
    tell8, tell_all = tell_floor(by, 8), tell_floor(by, 100)
    notify = tick and tick.get("notify_ms")
    if tell8 and told == tell8["objects"]:
        # How many calls the tick keeps in flight is ours to choose: the floor is the better of the two.
        best = min(t["p50_ms"] for t in (tell8, tell_all) if t)
        floor_fig = (f"{told} calls into new objects from one invocation (section 5a): {fmt(tell8['p50_ms'])} ms with 8 in "
                     "flight, as the tick's" + (f"; {fmt(tell_all['p50_ms'])} ms all at once" if tell_all else ""))
        floor_meets = best <= 250
    else:
        floor_fig, floor_meets = "–", None
    add(f"reaper tick with 100 stale ≤ 250 ms ({big})", tick and f"{fmt(tick['tick_duration_ms'])} ms"
        + (f" ({fmt(notify)} ms of it telling sessions)" if notify is not None else ""),
        floor_fig, tick and tick["tick_duration_ms"] <= 250, floor_meets,
        "the tick tells each session whose claim it released, and each seeded session has no object yet: each notice "
        "starts one" + (f"; the rest of the tick ({REST_OF_TICK}) took "
                        f"{fmt(tick['tick_duration_ms'] - notify)} ms" if notify is not None else ""),
        floored=True)
    size = next(iter(by.get("size-start", [])), None)
    add("wasm ≤ 250 KB gzip", size and f"{fmt(size['wasm_gzip_bytes'])} B", "–",
        size and size["wasm_gzip_bytes"] <= 250_000, None,
        "ours: the module's code (docs/ARCHITECTURE.md, \"Size and start\": the Worker's and the core's own code, then the generics of `core` and `alloc`)")
    return [
        "## Issue 15's targets in this run",
        "",
        "Each target beside this run's figure and, where the figure has a floor, the floor measured in the same run "
        "(section 10: the same platform parts in plain JavaScript on the same workerd). *Not met: the floor misses it "
        "too* = the platform's own parts, measured here, do not reach it either; the last column names that part. "
        "*Not met: ours* = a floor that meets it, no floor to compare, or an overhead, which is ours by definition. "
        "An overhead is judged against the design's floor through the Rust binding where the run measured it (the "
        "product's shape fixes the binding: the same parts compiled to wasm with the same crates), with ours above the "
        "JavaScript floor and the binding's share of it in the floor column; otherwise against the JavaScript floor. "
        "An overhead is the median of the rounds' paired figures (their range in brackets), of the time per operation; "
        "where both sides do the same work, the overhead of the CPU per operation follows (the side's workerd process: a "
        "steadier figure than time on a shared machine); an overhead not met says whether it held in every round or "
        "only by the median. A target this run did not measure (or not at its size) has no verdict.",
        "",
        table(["target", "this run", "floor in this run", "verdict", "what stops it"], rows),
        "",
    ]


def leader_section(by):
    """Leader runs: one leader of N subtasks per round, driven to its end by the bench's runners."""
    rows = by.get("leader", [])
    summ = [r for r in rows if r.get("what") == "summary"]
    rounds = [r for r in rows if r.get("what") == "round"]
    if not summ:
        return ["## 8. Leader runs", "", "No `leader` lines in this run.", ""]
    out = [
        "## 8. Leader runs",
        "",
        "Per round, one `POST /v1/leader/runs` of N subtasks (`say ok`) with `maxConcurrency` C; the bench's runner threads "
        "lease each child through the ordinary runner protocol (`waitMs` long-poll) and finish it `completed` at once. "
        "A child's finish drives the leader before it answers, so it also starts the next child. "
        "**admission → settle** runs from just before the POST to the return of the finish that made the runners count every "
        "child finished; a GET right after confirms the leader settled (if it did not, the first GET showing a terminal status). "
        "**D1 round trips per child** sums the `x-sema-d1` header over the admission, every lease (empty polls included, and "
        "also shown apart) and every finish, divided by N; the bench's own GETs are not counted. "
        "**Drive per finish** = a child's finish minus a plain finish (a run outside any leader, measured in the same process). "
        "**Non-terminal children**: the most `running` or `parked` in a GET sampled 15 ms after the previous one answered (sparse when the machine is busy), and the exact figure from the "
        "child runs' own `createdAt`/`updatedAt` read back after the round. Leftover unheld runs of earlier scenarios are "
        "leased and finished before each round (not counted).",
        "",
        table(
            ["target", "N", "C", "runners", "rounds settled", "admission → settle p50 ms", "min ms", "max ms", "children/s p50",
             "admission POST p50 ms", "child finish p50 ms", "plain finish p50 ms", "errors"],
            [[r.get("target"), r["subtasks"], r["max_concurrency"], r["runners"], f"{r['rounds_settled']}/{r['rounds']}",
              r["admission_to_settle_ms_p50"], r["admission_to_settle_ms_min"], r["admission_to_settle_ms_max"],
              r["children_per_s_p50"], r["admission_ms_p50"], r["child_finish_p50_ms_p50"], r["plain_finish_p50_ms"], r["errors"]]
             for r in summ],
        ),
        "",
        table(
            ["target", "D1 round trips per child", "excluding empty polls", "D1 statements per child", "admission POST round trips",
             "empty leases (round trips)", "child finish round trips (mean)", "plain finish", "drive per finish",
             "max non-terminal: sampled", "by run times", "≤ C"],
            [[r.get("target"), r["d1_round_trips_per_child_p50"], r["d1_round_trips_per_child_excluding_empty_polls_p50"],
              r["d1_statements_per_child_p50"], r["admission_d1_round_trips_p50"],
              f"{fmt(r['empty_leases_p50'])} ({fmt(r['empty_lease_d1_round_trips_p50'])})",
              r["child_finish_d1_round_trips_mean_p50"], r["plain_finish_d1_round_trips"], r["drive_d1_round_trips_per_finish_p50"],
              r["max_nonterminal_children_observed"], r["max_nonterminal_children_by_run_times"],
              "yes" if r["bound_respected"] else "**NO**"]
             for r in summ],
        ),
        "",
        "Per round (p50 above is over these):",
        "",
        table(
            ["target", "round", "admission → settle ms", "first sampled settled ms", "leader status", "children completed",
             "D1 round trips per child", "empty leases", "child finish round trips (max)", "max non-terminal: sampled / by run times",
             "GET samples", "errors"],
            [[r.get("target"), r["round"], r.get("admission_to_settle_ms"), r.get("first_sampled_settled_ms"), r.get("leader_status"),
              r.get("children_completed"), r.get("d1_round_trips_per_child"), r.get("empty_leases"),
              r.get("child_finish_d1_round_trips_max"),
              f"{fmt(r.get('max_nonterminal_children_observed'))} / {fmt(r.get('max_nonterminal_children_by_run_times'))}",
              r.get("nonterminal_samples"), r.get("errors")]
             for r in rounds],
        ),
        "",
    ]
    return out


def dispatch_floor_note(by):
    """Issue 13's target beside the floor of the same hand-over (section 10's `floor-dispatch`)."""
    rows = [r for r in by.get("floor-dispatch", []) if "p50_ms" in r]
    # The design's hand-over, or in a run from before the two sets of parts, the one it had.
    hand = [r for r in rows if r.get("transport") != "ws-reserved"]
    fl = [r for r in hand if line_parts(r) == "design"] or hand
    reserved = {r["session"]: r for r in rows if r.get("transport") == "ws-reserved"}
    if not fl:
        return []
    # The reserved design writes the bare parts' tables: it stands beside the bare hand-over.
    shape = {r["session"]: r for r in hand if r.get("transport") == "ws" and line_parts(r) == "bare"}
    weigh = []
    if reserved and shape:
        weigh = [
            "A design to weigh, measured the same way (`ws-reserved`): the session object first reserves the waiting socket "
            "in the queue object (one more object call), and the admission's one D1 batch also writes the lease, so the "
            "hand-over has one D1 write fewer (both into the bare parts' tables): " + ", ".join(
                f"{k} session {fmt(reserved[k]['p50_ms'])} / {fmt(reserved[k]['p99_ms'])} ms against "
                f"{fmt(shape[k]['p50_ms'])} / {fmt(shape[k]['p99_ms'])}" for k in ["new", "warm"] if k in reserved and k in shape)
            + " (p50 / p99). Far from D1's primary, the D1 write it saves is a whole round trip (section 12).",
            "",
        ]
    best = min(fl, key=lambda r: r["p50_ms"])
    word = {"ws": "WebSocket", "long-poll": "long-poll"}
    return [
        "The same hand-over in plain JavaScript on this workerd (section 10, *the other hot paths beside their floors*) "
        f"takes {fmt(best['p50_ms'])} ms at p50 at its fastest ({word.get(best['transport'], best['transport'])}, "
        f"{best['session']} session object; p99 {fmt(best['p99_ms'])}): " + ", ".join(
            f"{word.get(r['transport'], r['transport'])} {r['session']} {fmt(r['p50_ms'])} / {fmt(r['p99_ms'])}" for r in fl)
        + " ms (p50 / p99). "
        + ("The target of 10 ms at p50 is under that floor on this machine: an admission's D1 batch, a second object "
           "and the lease's D1 write, one after the other, on two shared cores." if best["p50_ms"] > 10 else
           "The target of 10 ms at p50 is within that floor on this machine; what ours takes above it is ours "
           "(section 10's table sets each path beside its floor)."),
        "",
        *weigh,
    ]


def follow_cost_lines(by):
    """The dispatcher's follow-up bookkeeping per hand-over, natively (`follow-cost`)."""
    rows = by.get("follow-cost", [])
    if not rows:
        return []
    return [
        "**What following up its leases costs the dispatcher per hand-over** (`follow-cost`: the core's `Offers`, natively, "
        "with N leases already followed; a busy queue follows every lease of the last `LEASE_ACK_SEC`, at a thousand "
        "hand-overs a second 30,000; each hand-over = offer, lease taken, the next follow-up read twice; the Worker runs "
        "the same code compiled to wasm, slower). "
        + ("Flat in N" if max(r["us_per_hand_over"] for r in rows) < 2 * min(r["us_per_hand_over"] for r in rows) else "It grows with N")
        + " (the handouts sit in queues ordered by due, and a settled lease write looks only among the offers still open):",
        "",
        table(["leases followed", "hand-overs timed", "µs per hand-over"],
              [[r["followed"], r["hand_overs"], fmt(r["us_per_hand_over"], 3)] for r in rows]),
        "",
    ]


def queues_section(by):
    """Task queues (issue 13): a waiting runner is offered a run by its queue's dispatcher object."""
    lat = by.get("dispatch-latency", []) + by.get("dispatch-latency-ws", [])
    idle = by.get("idle-runners", [])
    idle_ws = by.get("idle-runners-ws", [])
    tput = by.get("runs-throughput", [])
    out = ["## 9. Task queues", ""]
    if not (lat or idle or tput):
        return out + ["No task-queue lines in this run.", ""]
    mib = lambda kib: None if kib is None else kib / 1024
    out += [
        "Each scenario runs on its own queue (no stray runs of other scenarios reach its runners); workerd-direct. "
        "A runner with `waitMs` > 0 waits in the queue's dispatcher Durable Object, which offers it a run the moment one is "
        "admitted and writes its lease, the answer to its wait. D1 round trips are read from each response's `x-sema-d1` header "
        "(a long-poll's lease write is charged to the runner's request). "
        "For comparison, issue 13 measured the design this replaced (a waiting lease polling D1 on a timer) at 276 ms "
        "submit → lease p50 with a runner waiting and 24 D1 round trips per idle 10-second long-poll (about 144 per idle "
        "runner per minute); those two figures are quoted from the issue, not measured in this run.",
        "",
        "**Submit → lease with one runner waiting** (long-poll: `waitMs` 20000, the dispatcher writes the lease and answers the wait with it; "
        "WebSocket: the runner said `ready`, the dispatcher writes the lease and pushes it; from sending the submit to the lease "
        "arriving at the runner, whose wait or socket is read on a thread of its own, so a lease is timed when it comes, before "
        "the submit's answer or after it (the column *lease after the submit response*: negative, it came first); before each "
        "submit the admin route shows the runner waiting; the first round, a new dispatcher's "
        "first wait, is a warm-up shown apart: a new dispatcher reads its queue's backlog from D1 once). Session *new*: each "
        "submit opens a new session (a new session object); *warm*: every submit goes into one session whose previous run "
        "was finished. The trivial route's latency on the same target (section 1 and 5b) is the runtime's floor per hop:",
        "",
        table(
            ["target", "transport", "session", "samples", "submit → lease p50 ms", "p95 ms", "p99 ms", "max ms", "submit response p50 ms", "p99 ms",
             "lease after the submit response p50 ms", "lease D1 round trips p50 / max", "warm-up ms", "errors"],
            [[r.get("target"), "WebSocket" if r["scenario"].endswith("-ws") else "long-poll", r.get("session", "new"), r["samples"],
              r["p50_ms"], r["p95_ms"], r["p99_ms"], r["max_ms"], r["submit_p50_ms"], r["submit_p99_ms"],
              r.get("lease_after_submit_response_p50_ms"),
              f"{fmt(r['lease_d1_round_trips_p50'])} / {fmt(r['lease_d1_round_trips_max'])}" if "lease_d1_round_trips_p50" in r else "–",
              (r.get("warmup") or {}).get("submit_to_lease_ms"), r["errors"]]
             for r in lat if "p50_ms" in r],
        ),
        "",
        *dispatch_floor_note(by),
        *follow_cost_lines(by),
        "**Idle runners** (each holds a long-poll, `waitMs` 25000, re-issued on 204, on a queue with no runs; the idle window "
        "starts once the admin route shows every runner waiting). D1 per idle runner per minute = the round trips of every "
        "lease response, summed, ÷ the runner-minutes spent waiting (the responses that cost any are the new dispatcher's "
        "cold backlog read). workerd CPU = utime + stime (`/proc/<pid>/stat`) of the workerd process serving the Worker "
        "(its Durable Objects included) over the window; RSS before the runners came, held (window end), after they left.",
        "",
        table(
            ["target", "runners", "held: waiters at window start / end", "idle window s", "lease responses", "D1 round trips (responses with any)",
             "D1 per idle runner per minute", "workerd CPU s (% of one core)", "workerd RSS MiB before / held / after", "ramp ms", "errors"],
            [[r.get("target"), r["runners"], f"{fmt(r.get('waiters_at_window_start'))} / {fmt(r.get('waiters_at_window_end'))}",
              r.get("window_s"), r["responses"], f"{fmt(r['d1_round_trips_total'])} ({fmt(r.get('responses_with_d1'))})",
              r.get("d1_round_trips_per_runner_per_minute"),
              f"{fmt(r.get('workerd_cpu_s'))} ({fmt(r.get('workerd_cpu_pct_of_one_core'))} %)",
              f"{fmt(mib(r.get('workerd_rss_kib_before')))} / {fmt(mib(r.get('workerd_rss_kib_held_end')))} / {fmt(mib(r.get('workerd_rss_kib_after')))}",
              r.get("ramp_ms"), r["errors"]]
             for r in idle],
        ),
        "",
        "**Idle WebSocket runners** (each socket said `ready` on a queue with no runs; the dispatcher holds them with the "
        "hibernation API, so it may be evicted while they wait; keepalives `{\"type\":\"ping\"}` are answered "
        "`{\"type\":\"pong\"}` by the runtime without waking it). `cold` at the window's end = the dispatcher was evicted "
        "and its memory dropped while the sockets stayed open. D1 while idle: none can be caused (no request is made).",
        "",
        table(
            ["target", "sockets", "waiters at window start / end", "dispatcher evicted during window", "idle window s", "keepalive every s",
             "pings sent / pongs", "workerd CPU s (% of one core)", "workerd RSS MiB before / held", "unexpected frames", "errors"],
            [[r.get("target"), r.get("sockets_opened"),
              f"{fmt((r.get('dispatcher_at_window_start') or {}).get('waiters'))} / {fmt((r.get('dispatcher_at_window_end') or {}).get('waiters'))}",
              "yes" if (r.get("dispatcher_at_window_end") or {}).get("cold") else "no",
              r.get("window_s"), r.get("ping_every_s") or "none", f"{fmt(r.get('pings_sent'))} / {fmt(r.get('pongs_received'))}",
              f"{fmt(r.get('workerd_cpu_s'))} ({fmt(r.get('workerd_cpu_pct_of_one_core'))} %)",
              f"{fmt(mib(r.get('workerd_rss_kib_before')))} / {fmt(mib(r.get('workerd_rss_kib_held_end')))}",
              r.get("unexpected_frames"), r.get("errors")]
             for r in idle_ws],
        ),
        "",
        "**Runs through submit → lease → finish** (runners wait in the dispatcher, `waitMs` > 0; each run in a fresh session; "
        "runs/s from the first submit sent to the last finish returned; D1 per run = submit + lease + finish). "
        "The submitters outpace the runners, so a backlog builds: submit → lease here is mostly time queued behind earlier runs, "
        "not the dispatcher's hand-over (that is the first table). "
        "The leader scenario's runners (section 8) also wait in the dispatcher (`waitMs` 1000).",
        "",
        table(
            ["target", "runs", "runners", "submitters", "waitMs", "runs/s", "submit → lease p50 ms", "p99 ms", "submit → finish p50 ms",
             "p99 ms", "submit response p50 ms", "D1 round trips per run (mean)", "empty leases", "errors"],
            [[r.get("target"), r["runs"], r["runners"], r["submitters"], r["lease_wait_ms"], r.get("runs_per_s"),
              r.get("submit_to_lease_p50_ms"), r.get("submit_to_lease_p99_ms"), r.get("submit_to_finish_p50_ms"),
              r.get("submit_to_finish_p99_ms"), r.get("submit_p50_ms"), r.get("d1_round_trips_per_run_mean"), r["empty_leases"], r["errors"]]
             for r in tput],
        ),
        "",
    ]
    return out


def floor_section(by):
    """The platform's floor (issue 15): the parts of one admission on the bench-only floor Worker, and ours beside it."""
    rows = [r for r in by.get("floor", []) if "part" in r]
    out = ["## 10. The floor of the design", ""]
    if not rows:
        return out + ["No floor lines in this run" + (f" ({by['floor'][0].get('error')})" if by.get("floor") else "") + ".", ""]
    names = {"health": "trivial route", "d1": "one D1 batch of 3 inserts (from the Worker)", "do": "Durable Object round trip",
             "do-storage": "object + one storage write", "do-d1-storage": "object + D1 batch + storage write",
             "do-d1-storage-alarm": "object + D1 batch, then storage write + alarm unconfirmed",
             "schema-alarm": "object (its state read once per instance) + the product's admission batch on its schema, "
                             "then storage + alarm unconfirmed",
             "schema-alarm-queue": "the same, then the queue object told without waiting (the design that ships)",
             WARM_FLOOR: "the design's admission, then the cancel of its run (the Worker reads the run's row; the object "
                         "runs the product's cancel batch and writes its state unconfirmed), per pair: what ours does "
                         "into a warm session (section 2)"}
    levels = sorted({r["concurrency"] for r in rows})
    keys = []
    for r in rows:
        k = (r["part"], r["objects"])
        if k not in keys:
            keys.append(k)
    get = lambda part, kind, c: floor_at(by, part, kind, c)
    out += [
        "`bench/floor/floor.js` (bench-only, never deployed) does in plain JavaScript only the platform parts an admission "
        "is made of, on the same workerd build, measured on its own workerd socket in this run. A part that stands beside a "
        "path of ours whose request has a body (a submit's, an append's) gets the body ours gets: its Worker reads it and "
        "its object carries it (as the run's objective; as the event's row and the data of its frame). *new* = every request names "
        "a new object (as a new session does); *warm* = each client thread keeps one live object. Requests per second "
        "(p50 ms) at each concurrency:",
        "",
        table(["part", "objects"] + [f"c={c}" for c in levels],
              [[names.get(p, p), k] + [f"{fmt(get(p, k, c)['per_s'])} ({fmt(get(p, k, c)['p50_ms'])})" if get(p, k, c) else "–" for c in levels]
               for p, k in keys]),
        "",
    ]
    return out + beside_floor(by) + paths_beside_floor(by) + paths_interleaved(by)


# The floor Worker's parts our admission is set beside (bench/src/beside_floor.rs).
DESIGN_FLOOR, BARE_FLOOR = "schema-alarm-queue", "do-d1-storage-alarm"
# The design's floor through the Rust binding (bench/floor-rs): its side in `beside-floor`, and in `beside-floor-paths`.
RS_FLOOR, RS_PATH_SIDE = "rs:schema-alarm-queue", "floor-rs"
# The design's admission and the cancel of its run, pair by pair: the floor of ours into warm sessions, where
# each submit is followed by its run's cancel (bench/src/floor.rs, ADMIT_CANCEL).
WARM_FLOOR = "schema-alarm-queue+cancel"


def warm_floor_at(by, c):
    """The floor of ours into warm sessions at `c`: the admission-and-cancel pairs, or (a run before them) the
    admission alone; (line, whether it has the cancels)."""
    line = floor_at(by, WARM_FLOOR, "warm", c)
    return (line, True) if line else (floor_at(by, DESIGN_FLOOR, "warm", c), False)


def beside_floor(by):
    """Our admission and its floor measured interleaved (`sema-bench beside-floor`): medians of the rounds."""
    rows = [r for r in by.get("beside-floor", []) if "side" in r]
    if not rows:
        failed = next((r.get("error") for r in by.get("beside-floor", []) if r.get("error")), None)
        return ["No interleaved admission lines in this run" + (f" ({failed})" if failed else "") + ".", ""]
    med = lambda xs: statistics.median(xs) if xs else None
    # A rate's overhead is the time per admission's: each line gets the time an admission took on average.
    timed = [dict(r, ms_per_admission=1000 / r["per_s"]) for r in rows if r.get("per_s")]
    over = lambda floor, c: paired_cells(paired(timed, "ms_per_admission", "ours", floor, concurrency=c))
    cpu_over = lambda c: paired_cells(paired(rows, "cpu_ms_per_admission", "ours", DESIGN_FLOOR, concurrency=c))
    levels = sorted({r["concurrency"] for r in rows})
    rounds = max(r["round"] for r in rows) + 1
    per_side = fmt(max(r.get("requests", 0) for r in rows))
    values = lambda side, c, key: [r[key] for r in rows if r["side"] == side and r["concurrency"] == c and key in r]
    per_s = lambda side, c: med(values(side, c, "per_s"))
    spread = lambda side, c: "–".join(fmt(f(values(side, c, "per_s"))) for f in (min, max))
    cpu = lambda side, c: med(values(side, c, "cpu_ms_per_admission"))
    errors = sum(r["errors"] for r in rows)
    level_rows = []
    for c in levels:
        ours, design, bare = per_s("ours", c), per_s(DESIGN_FLOOR, c), per_s(BARE_FLOOR, c)
        ours_cpu, design_cpu = cpu("ours", c), cpu(DESIGN_FLOOR, c)
        level_rows.append([c, ours, spread("ours", c), design, spread(DESIGN_FLOOR, c)] + over(DESIGN_FLOOR, c)
                          + [ours_cpu, design_cpu] + cpu_over(c) + [bare] + over(BARE_FLOOR, c)[:1])
    out = [
        f"**Our admission beside its floor, interleaved** (`sema-bench beside-floor`: both Workers served at once; at each "
        f"level {rounds} rounds, each measuring every side once in a rotating order, {per_side} admissions per side and round; "
        "new sessions / new objects; medians of "
        "the rounds, their range beside). Measured minutes apart, as the floor parts above and the admission scenario are, "
        "a figure and its floor drift by more than the overhead they are to show. The design's floor "
        "(`schema-alarm-queue`) is the design that ships in plain JavaScript: the submit's body read by the Worker and "
        "carried to the object, which reads its state from storage once per instance, the product's own admission batch "
        "into its schema (three conditional statements, the "
        "tables' indexes; the body as the run's objective), storage and alarm written unconfirmed, the queue object told "
        "without waiting. The bare parts (`do-d1-storage-alarm`) read and carry the same body, write three rows into "
        "tables without indexes and tell no queue. Overhead = how much more time per admission ours takes, taken round by round against the side "
        "measured beside it (the median of the rounds, their range beside). CPU = what the side's workerd process spent "
        "per admission over the level (user + system; local D1 and every object run in it), which the machine's other "
        "load moves far less than a rate:",
        "",
        table(["concurrency", "ours per s", "range", "design's floor per s", "range", "our overhead %", "range",
               "ours CPU ms", "floor CPU ms", "CPU overhead %", "range", "bare parts per s", "overhead over them %"],
              level_rows),
        "",
    ]
    if any(r["side"] == RS_FLOOR for r in rows):
        rs_rows = []
        for c in levels:
            rs_rows.append([c, per_s(RS_FLOOR, c), spread(RS_FLOOR, c)] + over(RS_FLOOR, c)
                           + [cpu(RS_FLOOR, c)]
                           + paired_cells(paired(rows, "cpu_ms_per_admission", "ours", RS_FLOOR, concurrency=c))
                           + paired_cells(paired(timed, "ms_per_admission", RS_FLOOR, DESIGN_FLOOR, concurrency=c))
                           + paired_cells(paired(rows, "cpu_ms_per_admission", RS_FLOOR, DESIGN_FLOOR, concurrency=c)))
        out += [
            "**The same floor through the Rust binding** (`bench/floor-rs`, the fourth side of the rounds above): the "
            "design's parts exactly as the JavaScript floor does them, compiled to wasm with the product's crates "
            "(`worker`, wasm-bindgen) and release settings, and called as the product calls them (the runtime's request "
            "read once, objects by RPC with one string each way, D1's batch on the runtime's own method, storage and "
            "alarm written unconfirmed). No logic of ours: what it costs above the JavaScript floor is the price of "
            "the binding the product's shape fixes (the brief: request handlers compile to wasm with `worker`), and "
            "what ours costs above it is our own code (the body read and checked, the object's state, the call and "
            "reply, the store's statements and their results, the rendered answer):",
            "",
            table(["concurrency", "Rust floor per s", "range", "ours over it %", "range", "Rust floor CPU ms",
                   "ours' CPU over it %", "range", "the binding: Rust floor over the JS floor %", "range",
                   "its CPU %", "range"], rs_rows),
            "",
        ]
    seq = {(r["side"], r["objects"]): r for r in by.get("beside-floor-sequential", [])}
    if seq:
        p = lambda side, kind: seq.get((side, kind), {}).get("p50_ms")
        seq_rows = []
        for kind, label in [("warm", "warm object"), ("new", "new object")]:
            o, d, b = p("ours", kind), p(DESIGN_FLOOR, kind), p(BARE_FLOOR, kind)
            rs = p(RS_FLOOR, kind)
            seq_rows.append([label, o, d, o and d and o - d, o and d and 100 * (o / d - 1), b, o and b and o - b, rs,
                             o and rs and 100 * (o / rs - 1)])
        out += [
            f"Sequential admissions, the sides taking turns ({next(iter(seq.values()))['samples']} per side and kind; "
            "ours into a warm session cancels its run between, untimed), p50 ms:",
            "",
            table(["admission", "ours", "design's floor", "ours − it", "overhead %", "bare parts", "ours − them",
                   "Rust floor", "ours over it %"], seq_rows),
            "",
        ]
        errors += sum(r["errors"] for r in seq.values())
    return out + [f"Errors across the interleaved lines: {errors}.", ""]


def line_parts(r):
    """Which parts a floor line went through: "design" or "bare" (a line from before the two sets of parts: bare)."""
    return r.get("parts", "bare")


def interleaved_parts(rows):
    """The parts the floor sides of `beside-floor-paths` went through: "design" only if every floor line says so."""
    floors = [r for r in rows if r.get("side") != "ours"]
    return "design" if floors and all(line_parts(r) == "design" for r in floors) else "bare"


# How the report names each set of the floor's parts.
PARTS_WORDS = {"design": "the design's parts: the product's own statements on its schema",
               "bare": "the bare parts: tables without indexes"}


def floor_line(by, scenario, parts, **kw):
    """The floor Worker's measured line of `scenario` through `parts` ("design": the product's own statements on its
    schema; "bare": tables without indexes), workerd-direct, or None."""
    rows = [r for r in pick(by.get(scenario, []), target="workerd-direct", **kw) if "p50_ms" in r]
    return next((r for r in rows if line_parts(r) == parts), None)


# What the floor Worker's admission does (bench/floor/floor.js, `FloorDo.admit`), as the rows say it.
FLOOR_ADMISSION = "(the submit's body read and carried as the run's objective; D1 batch, then storage + alarm written unconfirmed)"


def paths_beside_floor(by):
    """The other hot paths (conflict, append, lease) beside their floors (`sema-bench floor-paths`)."""
    direct = lambda scen, **kw: next(iter(pick(by.get(scen, []), target="workerd-direct", **kw)), None)
    # A run from before the two sets of parts measured the bare ones alone, under the path's own name.
    two = any("parts" in r for k in ("floor-contention", "floor-append", "floor-dispatch") for r in by.get(k, []))
    bare_name = lambda name: f"{name} (bare parts)" if two else name
    paths = [
        ("409 under 100 simultaneous submits", direct("contention"), floor_line(by, "floor-contention", "design"),
         "the design's: one object per session, which reads its state from storage once; the first submit takes the claim "
         "with the product's own admission batch into its schema, storage + alarm written unconfirmed, the queue object "
         "told without waiting; the other 99 are answered 409 from memory"),
        (bare_name("409 under 100 simultaneous submits"), direct("contention"), floor_line(by, "floor-contention", "bare"),
         f"one object per session; the first submit takes the claim {FLOOR_ADMISSION} into tables without indexes, "
         "the other 99 are answered 409 from memory"),
        ("append → SSE receipt", direct("events-latency"), floor_line(by, "floor-append", "design"),
         "the design's: the Worker reads the runner's body; the object writes its event with the product's own append "
         "batch (the fenced counter update returning what waits for the holder, the fenced event row), then the body as "
         "the data of a frame to the stream it holds"),
        (bare_name("append → SSE receipt"), direct("events-latency"), floor_line(by, "floor-append", "bare"),
         "the Worker reads the runner's body; the object writes it as the event's row and the run's last seq in one D1 "
         "batch into tables without indexes, then as the data of a frame to the stream it holds"),
    ]
    hand = lambda transport: ("pushes it on the socket" if transport == "WebSocket"
                              else "answers the waiting request with it")
    for transport, ours_scen in [("WebSocket", "dispatch-latency-ws"), ("long-poll", "dispatch-latency")]:
        for session in ["new", "warm"]:
            tr = "ws" if transport == "WebSocket" else "long-poll"
            name = f"submit → lease, {transport}, {session} session"
            ours = direct(ours_scen, session=session)
            design = floor_line(by, "floor-dispatch", "design", transport=tr, session=session)
            bare = floor_line(by, "floor-dispatch", "bare", transport=tr, session=session)
            if design:
                paths.append((name, ours, design,
                              "the design's: the session object's state read once per instance, the product's own "
                              "admission batch into its schema, storage + alarm written unconfirmed, the queue object told "
                              "without waiting; it "
                              + ("marks the socket served in the note kept on it, " if transport == "WebSocket" else "")
                              + f"writes the lease with the product's own lease statement and {hand(transport)} "
                              "(what a runner is told)"))
            paths.append((bare_name(name), ours, bare,
                          f"admission {FLOOR_ADMISSION} into tables without indexes, the queue object told without waiting; "
                          f"it writes the lease (one conditional update returning two columns) and {hand(transport)}"))
    rows = []
    for name, ours, fl, parts in paths:
        if not (ours and fl):
            continue
        over = lambda k: 100 * (ours[k] / fl[k] - 1) if fl.get(k) else None
        rows.append([name, ours["p50_ms"], fl["p50_ms"], over("p50_ms"), ours["p99_ms"], fl["p99_ms"], over("p99_ms"),
                     fl.get("errors"), parts])
    if not rows:
        return []
    return [
        "**The other hot paths beside their floors** (`sema-bench floor-paths` on the floor Worker, workerd-direct, the "
        "same shape as ours: the same counts, the same order of calls, one runner waiting per submit → lease round). "
        "Overhead = how much longer ours takes than the floor (negative: ours was faster in this run; a floor's p99 is "
        "as noisy as ours):",
        "",
        table(["path", "ours p50 ms", "floor p50 ms", "overhead p50 %", "ours p99 ms", "floor p99 ms", "overhead p99 %",
               "floor errors", "the floor does"], rows),
        "",
    ]


# The paths of `sema-bench beside-floor-paths`, as the report names them (bench/src/beside_floor.rs).
INTERLEAVED_PATHS = [("contention", "409 under 100 simultaneous submits"), ("append", "append → SSE receipt"),
                     ("ws-new", "submit → lease, WebSocket, new session"), ("ws-warm", "submit → lease, WebSocket, warm session"),
                     ("long-poll-new", "submit → lease, long-poll, new session"),
                     ("long-poll-warm", "submit → lease, long-poll, warm session")]


def paired(rows, key, ours_side, floor_side, **match):
    """Our overhead over the floor, % (more time per operation), paired round by round: (median, min, max) over
    the rounds where both sides have `key`, or None. `key` is a time or a CPU cost; a rate is turned into a
    time by `per_s_key`'s inverse before the caller passes it (see `beside_floor`)."""
    by_round = defaultdict(dict)
    for r in rows:
        if all(r.get(k) == v for k, v in match.items()) and r.get(key) is not None:
            by_round[r["round"]][r["side"]] = r[key]
    overs = sorted(100 * (v[ours_side] / v[floor_side] - 1) for v in by_round.values()
                   if ours_side in v and floor_side in v and v[floor_side])
    return (statistics.median(overs), overs[0], overs[-1]) if overs else None


def paired_cells(p):
    """An overhead from `paired` as two cells: the median, and its range over the rounds."""
    return [None, None] if p is None else [p[0], f"{fmt(p[1])} to {fmt(p[2])}"]


def paths_interleaved(by):
    """The other hot paths beside their floors, interleaved (`sema-bench beside-floor-paths`): medians of the rounds."""
    rows = [r for r in by.get("beside-floor-paths", []) if "side" in r]
    if not rows:
        return ["No interleaved lines of the other hot paths in this run.", ""]
    med = lambda xs: statistics.median(xs) if xs else None
    values = lambda path, side, key: [r[key] for r in rows if r["path"] == path and r["side"] == side and r.get(key) is not None]
    rounds = max(r["round"] for r in rows) + 1
    out_rows = []
    for path, name in INTERLEAVED_PATHS:
        o50, f50 = med(values(path, "ours", "p50_ms")), med(values(path, "floor", "p50_ms"))
        if o50 is None or f50 is None:
            continue
        out_rows.append([name, o50, f50] + paired_cells(paired(rows, "p50_ms", "ours", "floor", path=path))
                        + paired_cells(paired(rows, "p99_ms", "ours", "floor", path=path))
                        + [med(values(path, "ours", "cpu_ms_per_op")), med(values(path, "floor", "cpu_ms_per_op"))]
                        + paired_cells(paired(rows, "cpu_ms_per_op", "ours", "floor", path=path)))
    rs_rows = []
    for path, name in INTERLEAVED_PATHS:
        r50 = med(values(path, RS_PATH_SIDE, "p50_ms"))
        if r50 is None:
            continue
        rs_rows.append([name, r50] + paired_cells(paired(rows, "p50_ms", "ours", RS_PATH_SIDE, path=path))
                       + [med(values(path, RS_PATH_SIDE, "cpu_ms_per_op"))]
                       + paired_cells(paired(rows, "cpu_ms_per_op", "ours", RS_PATH_SIDE, path=path))
                       + paired_cells(paired(rows, "p50_ms", RS_PATH_SIDE, "floor", path=path))
                       + paired_cells(paired(rows, "cpu_ms_per_op", RS_PATH_SIDE, "floor", path=path)))
    rs_part = [
        "The same paths beside the floor through the Rust binding (`bench/floor-rs`: the JavaScript floor's parts compiled "
        "to wasm with the product's crates, a third side in the same rounds; its hand-overs' CPU is the JavaScript "
        "floor's shape, without the finish ours carries):",
        "",
        table(["path", "Rust floor p50 ms", "ours over it p50 %", "range", "Rust floor CPU ms", "ours' CPU over it %",
               "range", "the binding: Rust floor over the JS floor p50 %", "range", "its CPU %", "range"], rs_rows),
        "",
    ] if rs_rows else []
    errors = sum(r.get("errors", 0) for r in rows)
    return [
        f"**The other hot paths beside their floors, interleaved** (`sema-bench beside-floor-paths`: both Workers served "
        f"at once, on the same instances as the interleaved admission above; a warm-up round, then {rounds} rounds, each "
        "measuring every path on every side, which side goes first rotating by round and by path). Overhead = how much "
        "longer ours takes (negative: ours was faster), taken round by round against the floor measured beside it: the "
        "median of the rounds and their range. CPU = the side's workerd CPU per operation carried out (a submit under "
        "contention, the one admitted included; an append; a hand-over). A hand-over's CPU is not like for like: each of "
        "ours also carries the run's finish (so a warm session is free for the next round), which the floor's shape has "
        "not, and over the WebSocket ours also has the bench's polls of the dispatcher's admin route until the runner shows "
        "waiting (the floor's socket answers `ready` with `waiting` itself, so it needs none); each append measurement's "
        "window also holds the making of its run (ours: submit, lease and stream opening, and the run's finish; "
        "the floor: its admission, lease and stream opening), once per measurement. The latencies are like for like. "
        + ("Each path's floor goes through the design's parts, as admission's does (`schema-alarm-queue`): the "
           "product's own statements on its schema (its admission batch for the claim and the hand-over, its append "
           "batch, its lease statement); the bare parts' figures (the same calls writing tables without indexes) stand "
           "in the table above, measured alone; the difference is what the design's statements and calls cost:"
           if interleaved_parts(rows) == "design" else
           "Each path's floor here goes through the bare parts (the same calls writing tables without indexes), not "
           "the design's:"),
        "",
        table(["path", "ours p50 ms", "floor p50 ms", "overhead p50 %", "range", "overhead p99 %", "range",
               "ours CPU ms", "floor CPU ms", "CPU overhead %", "range"], out_rows),
        "",
    ] + rs_part + [
        f"Errors across these lines: {errors}.",
        "",
    ]


def postgres_section(by):
    """D1 beside PostgreSQL (issue 16): the same scenarios on the D1 Worker and on the PostgreSQL one."""
    out = ["## 11. D1 beside PostgreSQL (through Hyperdrive)", ""]
    pg = (by.get("postgres") or [{}])[0]
    if not by.get("pg:admission"):
        return out + ["No PostgreSQL lines in this run" + (f" ({pg.get('error')})" if pg.get("error") else "") + ".", ""]
    out += [
        f"The same Worker built with the `postgres` feature (`build-pg/`), under `wrangler dev --env postgres`, its Hyperdrive "
        f"binding's local connection string pointing at PostgreSQL {pg.get('server')} started by the bench on loopback (`fsync` off, as in the tests; D1 here is a local SQLite file); "
        "measured on its own workerd socket (pg-direct) right after the D1 Worker's workerd-direct lines, one at a time. "
        "Locally Hyperdrive does not pool: every Worker request, object call and cron tick opens its own connection "
        "(a new server backend), which a deployment's pooled Hyperdrive spares; each batch is one pipelined transaction.",
        "",
    ]
    d1 = lambda scen: pick(by.get(scen, []), target="workerd-direct")
    pgr = lambda scen: by.get("pg:" + scen, [])
    rows = []
    for a in pgr("admission"):
        b = next(iter(pick(d1("admission"), concurrency=a["concurrency"])), None)
        rows.append([f"admission, c={a['concurrency']}", "per s", b and b["per_s"], a["per_s"]])
        rows.append([f"admission, c={a['concurrency']}", "p50 / p99 ms",
                     b and f"{fmt(b['p50_ms'])} / {fmt(b['p99_ms'])}", f"{fmt(a['p50_ms'])} / {fmt(a['p99_ms'])}"])
    for name, scen, key in [("409 under 100 simultaneous submits", "contention", None),
                            ("append → SSE receipt", "events-latency", None),
                            ("submit → lease, long-poll, new sessions", "dispatch-latency", "new"),
                            ("submit → lease, WebSocket, new sessions", "dispatch-latency-ws", "new"),
                            ("8 clients steering one run, 64 KiB each", "steer-flood", None)]:
        a = next(iter(pick(pgr(scen), session=key) if key else pgr(scen)), None)
        b = next(iter(pick(d1(scen), session=key) if key else d1(scen)), None)
        if a:
            rows.append([name, "p50 / p99 ms", b and f"{fmt(b['p50_ms'])} / {fmt(b['p99_ms'])}",
                         f"{fmt(a['p50_ms'])} / {fmt(a['p99_ms'])}"])
        if a and scen == "steer-flood":
            rows.append([name, "steers/s; max ms", b and f"{fmt(b['per_s'])}; {fmt(b['max_ms'])}",
                         f"{fmt(a['per_s'])}; {fmt(a['max_ms'])}"])
        if a and scen == "contention":
            rows.append([name, "sessions with exactly one 202",
                         b and f"{b['sessions_with_exactly_one_accepted']} of {b['sessions']}",
                         f"{a['sessions_with_exactly_one_accepted']} of {a['sessions']}"])
    errors = sum(r.get("errors", 0) for k, v in by.items() if k.startswith("pg:") for r in v)
    out += [table(["scenario", "figure", "D1 (workerd-direct)", "PostgreSQL (pg-direct)"], rows), "",
            f"Errors on the PostgreSQL Worker across these scenarios: {errors}.", ""]
    return out


def far_section(by):
    """Issue 15 item 6: the same scenarios with every D1 round trip 50 ms away (bench-only build)."""
    out = ["## 12. Far from D1's primary (a simulated 50 ms per D1 round trip)", ""]
    if not by.get("far:admission"):
        far = (by.get("far:far") or by.get("far") or [{}])[0]
        return out + ["No far lines in this run" + (f" ({far.get('error')})" if far.get("error") else "") + ".", ""]
    out += [
        "At the edge a session object runs near its user while D1's primary sits in one region. The bench-only build "
        "(`scripts/build --bench-d1-distance` into `build-far/`, cargo feature `bench-d1-distance`, never deployed) waits "
        "50 ms on a timer before every D1 round trip, so the object serves its other calls meanwhile; it runs under a "
        "temporary copy of wrangler.toml pointing at `build-far/` (far-direct), right after the D1 Worker's workerd-direct "
        "lines. *Conflict, idle*: 409s into a held session with nothing else in flight; *conflict, appending*: the same "
        "while 4 threads append to the holder's run without pause (each append holds the object's lock across its D1 batch).",
        "",
    ]
    near = lambda scen: pick(by.get(scen, []), target="workerd-direct")
    far = lambda scen: by.get("far:" + scen, [])
    both = lambda a, b: [b and f"{fmt(b['p50_ms'])} / {fmt(b['p99_ms'])}", a and f"{fmt(a['p50_ms'])} / {fmt(a['p99_ms'])}"]
    rows = []
    for a in far("admission"):
        b = next(iter(pick(near("admission"), concurrency=a["concurrency"])), None)
        rows.append([f"admission, c={a['concurrency']}", *both(a, b), b and b["per_s"], a["per_s"]])
    for name, scen, kw in [("409 under 100 simultaneous submits", "contention", {}),
                           ("conflict, idle", "conflict-under-appends", {"phase": "idle"}),
                           ("conflict, appending", "conflict-under-appends", {"phase": "appending"}),
                           ("append → SSE receipt", "events-latency", {})]:
        a = next(iter(pick(far(scen), **kw)), None)
        b = next(iter(pick(near(scen), **kw)), None)
        if a:
            rate = "conflict_per_s" if scen == "conflict-under-appends" else "requests_per_s" if scen == "contention" else None
            rows.append([name, *both(a, b), b and rate and b.get(rate), rate and a.get(rate)])
        if a and scen == "conflict-under-appends" and kw["phase"] == "appending":
            rows.append(["appends during it", b and f"{fmt(b['append_p50_ms'])} / {fmt(b['append_p99_ms'])}",
                         f"{fmt(a['append_p50_ms'])} / {fmt(a['append_p99_ms'])}", b and b["appends_per_s"], a["appends_per_s"]])
    errors = sum(r.get("errors", 0) for k, v in by.items() if k.startswith("far:") for r in v)
    out += [table(["scenario", "near p50 / p99 ms", "far p50 / p99 ms", "near per s", "far per s"], rows), "",
            f"Errors on the far Worker across these scenarios: {errors}.", ""]
    out += commit_point_rows(by)
    return out


def commit_point_rows(by):
    """Where an admission commits (SEMA_ADMIT_COMMIT): D1 first, or the session object's storage first."""
    out = ["### Where an admission commits, far from D1", ""]
    if not by.get("farobj:session-object"):
        far = (by.get("farobj:far") or [{}])[0]
        return out + ["No lines of the far Worker with `SEMA_ADMIT_COMMIT=object` in this run"
                      + (f" ({far.get('error')})" if far.get("error") else "") + ".", ""]
    out += [
        "The far Worker again, on a fresh state, with `SEMA_ADMIT_COMMIT=object` (target far-object-direct): a submit "
        "into a session its object has confirmed, with no key and a server-minted id, commits in the object's storage "
        "and is answered; D1 gets the run right after (docs/ARCHITECTURE.md, \"The commit point\"). A new session's "
        "first admission still commits in D1. *Warm*: sequential submits into one session, its previous run cancelled "
        "between them (`session-object`); *submit → lease*: into a warm session, a runner waiting on the WebSocket "
        "(the run is leasable once D1 has it).",
        "",
    ]
    p = lambda r: r and f"{fmt(r['p50_ms'])} / {fmt(r['p99_ms'])}"
    so = lambda key, what: next(iter(pick(by.get(key, []), what=what)), None)
    near_so = lambda what: next(iter(pick(pick(by.get("session-object", []), target="workerd-direct"), what=what)), None)
    lat = lambda key: next(iter(pick(by.get(key, []), session="warm")), None)
    near_lat = next(iter(pick(pick(by.get("dispatch-latency-ws", []), target="workerd-direct"), session="warm")), None)
    rows = []
    for label, what in [("admission into a warm session", "admission into a warm session object"),
                        ("admission into a new session", "admission creating a new session object")]:
        rows.append([label, p(near_so(what)), p(so("far:session-object", what)), p(so("farobj:session-object", what))])
    rows.append(["submit → lease, warm session", p(near_lat), p(lat("far:dispatch-latency-ws")),
                 p(lat("farobj:dispatch-latency-ws"))])
    errors = sum(r.get("errors", 0) for k, v in by.items() if k.startswith("farobj:") for r in v)
    out += [table(["p50 / p99 ms", "near, D1 commit", "far, D1 commit", "far, object commit"], rows), "",
            f"Errors on the far Worker with the object commit: {errors}.", ""]
    return out


def scale_section(by):
    """Issue 15 item 4: the same scenarios on a store of 1,000 runs and on one of 1,000,000."""
    out = ["## 14. Scale: 1,000 runs beside 1,000,000", ""]
    seeds = {r.get("target"): r for r in by.get("scale:scale-seed", [])}
    small, big = seeds.get("seed-1k"), seeds.get("seed-1m")
    if not small or not big or small.get("errors") or big.get("errors"):
        err = next((r.get("error") for r in seeds.values() if r.get("error")), None)
        return out + ["No complete scale phase in this run" + (f" ({err})" if err else "") + ".", ""]
    st = big.get("by_state", {})
    out += [
        "Two fresh stores, each seeded out of band by `bench/scale_seed.py` (straight into the local D1 file while no "
        f"Worker runs on it) and served by the same Worker as workerd-direct: **seed-1k** ({small['runs']:,} runs in "
        f"{small['sessions']:,} sessions) and **seed-1m** ({big['runs']:,} runs in {big['sessions']:,} sessions, "
        f"{big['database_bytes'] / 1e6:,.0f} MB, seeded in {big['seed_s']} s). Of seed-1m's runs: "
        f"{st.get('terminal', 0):,} terminal, {st.get('running', 0):,} running with a live runner, {st.get('parked', 0):,} "
        f"parked on a pending gate, {st.get('queued', 0):,} queued, {st.get('stale', 0):,} silent for long (the reaper's "
        "work). Sessions belong to 100 tenants; listings are made as `tenant-4`. Events are not seeded.",
        "",
    ]
    rounds = len({r.get("round", 0) for r in by.get("scale:admission", [])})
    if rounds > 1:
        out += [
            f"Both stores' Workers are served at once, and admission is measured in {rounds} interleaved rounds (each "
            "store first in every other round): the rates below are the medians of the rounds, the ratio the median of "
            "the rounds' pairs. Measured one store after the other, minutes apart, the ratio at c=1 was 0.739 in one run "
            "and 1.108 in the next of the same code. The other figures are measured one store after the other.",
            "",
        ]
    at = lambda target, scen, **kw: next(iter(pick(by.get("scale:" + scen, []), target=target, **kw)), None)
    lat = lambda r: r and f"{fmt(r.get('p50_ms'))} / {fmt(r.get('p99_ms'))}"
    rows = []
    for c, (small_rate, big_rate, ratio, _, _) in scale_admission(by).items():
        rows.append([f"admission per s, c={c}", small_rate, big_rate, ratio])
    for name, scen, kw in [("409 under 100 simultaneous submits, p50 / p99 ms", "contention", {}),
                           ("submit → lease, runner waiting, p50 / p99 ms", "dispatch-latency", {})]:
        a, b = at("seed-1k", scen, **kw), at("seed-1m", scen, **kw)
        rows.append([name, lat(a), lat(b), a and b and a.get("p50_ms") and b["p50_ms"] / a["p50_ms"]])
    for a in pick(by.get("scale:listing", []), target="seed-1m"):
        b = at("seed-1k", "listing", what=a["what"])
        rows.append([f"listing `{a['what']}` ({a['rows_listed']} rows at 1m), p50 / p99 ms", lat(b), lat(a),
                     b and b.get("p50_ms") and a["p50_ms"] / b["p50_ms"]])
    ra, rb = at("seed-1k", "reaper"), at("seed-1m", "reaper")
    if ra or rb:
        rows.append(["reaper tick ms (100 stale)", ra and ra["tick_duration_ms"], rb and rb["tick_duration_ms"],
                     ra and rb and ra["tick_duration_ms"] and rb["tick_duration_ms"] / ra["tick_duration_ms"]])
        rows.append(["reaper: runs failed / D1 rows examined", ra and f"{fmt(ra['reaped'])} / {fmt(ra['d1_rows_read'])}",
                     rb and f"{fmt(rb['reaped'])} / {fmt(rb['d1_rows_read'])}", None])
    errors = sum(r.get("errors", 0) or 0 for k, v in by.items() if k.startswith("scale:") for r in v)
    # What bounds the tick: each stale run's session is told, and the seeded sessions have no object
    # yet, so every notice starts one; the floor Worker's same notices say how long that takes.
    tell8 = tell_floor(by, 8)
    told = rb and rb.get("sessions_told")
    floor_note = []
    if tell8 and told and rb.get("notify_ms") is not None:
        floor_note = [
            f"A tick tells every session whose claim it released ({told} at seed-1m), and each seeded session has no "
            f"object yet, so each notice starts one: {fmt(rb['notify_ms'])} of the tick's {fmt(rb['tick_duration_ms'])} ms. "
            f"The floor Worker's {tell8['objects']} such calls, 8 in flight as the tick's, took {fmt(tell8['p50_ms'])} ms "
            f"(median, section 5a), whatever the store's size; the rest of the tick ({REST_OF_TICK}) took "
            f"{fmt(rb['tick_duration_ms'] - rb['notify_ms'])} ms.",
            "",
        ]
    out += [table(["figure", "seed-1k", "seed-1m", "1m ÷ 1k"], rows), "", *floor_note,
            "Targets: admission at 1m within 20% of the rate at 1k (ratio ≥ 0.8); a reaper tick with 100 stale ≤ 250 ms. "
            "Every statement's plan is checked to be served by an index (no full scan, no sort) on a seeded SQLite "
            "store by `crates/core/tests/store/plan.rs`.",
            "", f"Errors across the scale phase: {errors}.", ""]
    return out


def tell_floor_lines(by):
    """Section 5a's floor: the notices of a tick, as plain JavaScript on the same workerd (`floor-tell`)."""
    rows = [[r["objects"], r["at_once"], r["rounds"], ", ".join(fmt(m) for m in r["ms"]), r.get("p50_ms"), r.get("errors", 0)]
            for r in by.get("floor-tell", [])]
    if not rows:
        return []
    return [
        "The floor of the notices (the floor Worker, `POST /tell`): from one invocation, new objects each called once "
        "(each reads its state from storage and answers, as ours does when told a run ended), timed inside the Worker. "
        "A seeded store's stale sessions have no object yet, so each of the tick's notices starts one, as here. The "
        f"rest of a tick ({REST_OF_TICK}) is its ms less those telling sessions. "
        "A round that failed is counted, not timed; a run with a failed round gives the target no floor.",
        "",
        table(["objects", "in flight", "rounds", "each round ms", "median ms", "failed rounds"], rows),
        "",
    ]


def end_to_end_section(by):
    """End to end: completed runs through the whole protocol, ours with reference runners vs the peer's stub runs."""
    out = ["## 13. End to end: runs through the whole protocol", ""]
    ours = pick(by.get("end-to-end", []), target="workerd-direct")
    peer = by.get("peer-end-to-end", [])
    if not (ours or peer):
        return out + ["No end-to-end lines in this run.", ""]
    e2e = ours[0] if ours else {}
    out += [
        f"**Ours** (workerd-direct): {fmt(e2e.get('runners'))} reference runners (`sema-runner --concurrency N`, a child "
        f"process of the bench, waiting in the queue's dispatcher) and {fmt(e2e.get('clients'))} clients; each run is "
        f"`POST /v1/runs` into a new session with an objective of {fmt(e2e.get('events_per_run'))} `say` lines; the runner "
        "leases it and appends one `text_delta` for each line (each append's answer says whether a cancel or steer messages "
        "wait, so it heartbeats only when told something waits or its last write is over 1 s old; it sends its lease's "
        "`sessionId` back as a routing hint), then finishes it; the client reads the run's SSE "
        "stream until `done` (a run counts only with every `text_delta` and a `completed` done). Submit → done is the "
        "control plane's own latency per run: the runner does no work between its calls. "
        "**Peer**: `POST /threads/{new}/runs/stream` of the stub graph read to the end of its stream; the graph runs "
        "in-process in the peer's server: no runner, no lease, no hops between processes, no appends.",
        "",
        table(
            ["side", "runs", "completed", "runs/s", "submit → done p50 ms", "p99 ms", "max ms", "errors"],
            [[f"ours ({r.get('target')}, {r.get('runners')} runners, {r.get('events_per_run')} events per run)", r["runs"],
              r.get("completed"), r.get("runs_per_s"), r.get("submit_to_done_p50_ms"), r.get("submit_to_done_p99_ms"),
              r.get("submit_to_done_max_ms"), r.get("errors")] for r in ours]
            + [["peer (LangGraph dev, stub run, no events)", r["runs"], r.get("completed"), r.get("runs_per_s"),
                r.get("submit_to_done_p50_ms"), r.get("submit_to_done_p99_ms"), r.get("submit_to_done_max_ms"), r.get("errors")]
               for r in peer],
        ),
        "",
    ]
    if ours:
        out += [
            f"Ours, within the run: submit answered p50 {fmt(e2e.get('submit_p50_ms'))} ms (p99 {fmt(e2e.get('submit_p99_ms'))}), "
            f"first `text_delta` read p50 {fmt(e2e.get('submit_to_first_event_p50_ms'))} ms after the submit was sent "
            f"(p99 {fmt(e2e.get('submit_to_first_event_p99_ms'))}); runners waiting at the start: "
            f"{fmt(e2e.get('runners_waiting_at_start'))} of {fmt(e2e.get('runners'))}.",
            "",
        ]
    return out


def chart(by, path):
    """Grouped bars: admissions/s by concurrency for each target, with each target's ceiling noted."""
    targets = [("workerd-direct", "#1f77b4"), ("wrangler-dev", "#ff7f0e"), ("peer", "#2ca02c")]
    levels = [1, 8, 32, 128]
    series = {}
    for name, _ in targets:
        src = by["admission"] if name != "peer" else by["peer-admission"]
        series[name] = {r["concurrency"]: r["per_s"] for r in src if r.get("target") == name}
    top = max([v for s in series.values() for v in s.values()] + [1])
    w, h, left, bottom, topm = 720, 360, 60, 50, 40
    plot_h = h - bottom - topm
    group_w = (w - left - 20) / len(levels)
    bar_w = group_w / (len(targets) + 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">Admissions per second into fresh sessions, by client concurrency</text>',
    ]
    for i in range(5):
        y = topm + plot_h - plot_h * i / 4
        val = top * i / 4
        parts.append(f'<line x1="{left}" y1="{y}" x2="{w - 20}" y2="{y}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{val:,.0f}</text>')
    for gi, level in enumerate(levels):
        gx = left + gi * group_w
        parts.append(f'<text x="{gx + group_w / 2}" y="{h - bottom + 18}" text-anchor="middle">{level} concurrent</text>')
        for ti, (name, color) in enumerate(targets):
            v = series[name].get(level)
            if v is None:
                continue
            bh = plot_h * v / top
            x = gx + bar_w * (ti + 0.5)
            y = topm + plot_h - bh
            parts.append(f'<rect x="{x}" y="{y}" width="{bar_w * 0.9}" height="{bh}" fill="{color}"/>')
            parts.append(f'<text x="{x + bar_w * 0.45}" y="{y - 4}" text-anchor="middle" font-size="10">{v:,.0f}</text>')
    lx = left
    for name, color in targets:
        label = {"workerd-direct": "Sema Edge on workerd (direct)", "wrangler-dev": "Sema Edge via wrangler dev", "peer": "LangGraph dev (in-memory)"}[name]
        parts.append(f'<rect x="{lx}" y="{h - 22}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{lx + 16}" y="{h - 12}">{label}</text>')
        lx += 215
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts) + "\n")


def state_medium(machine):
    """Sentences on where the workerd states (local D1, the objects' SQLite files) lived, and whether
    wrangler dev's local trace store ran (runs that recorded neither say nothing)."""
    fs, traces = machine.get("state"), machine.get("local_traces")
    out = []
    if fs is not None:
        out.append("Every workerd's state (local D1, the objects' SQLite files) " + (
            "and the storage ceiling's file were on tmpfs: no figure carries the local disk's cost "
            "(`SEMA_BENCH_STATE=disk` measures on disk)." if fs == "tmpfs" else f"was on the disk ({fs})."))
    if traces == "off":
        out.append("wrangler dev's local trace store (every span of every invocation written to SQLite in the same "
                   "workerd process, for its local explorer; no part of a deployment) was off "
                   "(`X_LOCAL_OBSERVABILITY=false`).")
    return " ".join(out)


def main():
    results, md_path, svg_path, command = sys.argv[1:5]
    by = load(results)
    machine = (by.get("machine") or [{}])[0]
    size = (by.get("size-start") or [{}])[0]
    peer = (by.get("peer") or [{}])[0]
    ceil = {r["target"]: r for r in by["ceiling"]}
    seeded = seeded_runs(by)
    md = [
        "# Benchmarks",
        "",
        f"Generated by `{command}` from `docs/bench-results.jsonl` (one run; every figure below comes from it).",
        "Never timed assertions in tests: these are measurements. Everything runs on loopback, bounded in count and time.",
        "",
        f"Machine: {machine.get('cpus')} cores ({machine.get('cpu')}); {machine.get('date')}. "
        f"wrangler {machine.get('wrangler')}, workerd {machine.get('workerd')}, {machine.get('rustc')}; "
        f"peer: LangGraph API {peer.get('langgraph_api')} (`langgraph dev`, in-memory runtime, stub graph, no model).",
        "",
        "Targets: **workerd-direct** = the Worker's own workerd socket (Miniflare's entry; no wrangler proxy, no per-request logging), "
        "the closest local stand-in for production; **wrangler-dev** = through `wrangler dev`'s reload proxy (what `scripts/dev` serves). "
        "The load generator (`sema-bench`, `wrk`) runs on the same two cores. "
        + state_medium(machine),
        "",
        "![admissions per second](benchmarks.svg)",
        "",
        *targets_section(by),
        "## 1. Ceiling",
        "",
        table(
            ["what", "per second", "p50 ms", "p99 ms", "errors", "load generator CPU % (of one core)"],
            [[f"GET /health ({t})", r["per_s"], r["p50_ms"], r["p99_ms"], r["errors"], r["load_generator_cpu_pct"]] for t, r in ceil.items()]
            + [[f"SQLite single-row transactions, {r['mode']} (SQLite {r['sqlite']})", r["tx_per_s"], None, None, 0, None] for r in by["sqlite-tx"]],
        ),
        "",
        "## 2. Admission across sessions",
        "",
        table(
            ["target", "concurrency", "admissions/s", "p50 ms", "p95 ms", "p99 ms", "errors", "÷ ceiling route", "load generator CPU %"],
            [
                [r["target"], r["concurrency"], r["per_s"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["errors"],
                 r["per_s"] / ceil[r["target"]]["per_s"] if r["target"] in ceil else None, r.get("load_generator_cpu_pct")]
                for r in by["admission"]
            ],
        ),
        "",
        *warm_admission_rows(by),
        "## 3. Contention: 100 simultaneous submits per fresh session",
        "",
        table(
            ["target", "sessions", "sessions with exactly one 202", "409s", "409 p50 ms", "409 p99 ms", "other errors"],
            [[r["target"], r["sessions"], r["sessions_with_exactly_one_accepted"], r["conflicts_409"], r["p50_ms"], r["p99_ms"], r["errors"]] for r in by["contention"]],
        ),
        "",
        "## 4. Events",
        "",
        table(
            ["target", "append → SSE receipt p50 ms", "p95 ms", "p99 ms", "errors"],
            [[r["target"], r["p50_ms"], r["p95_ms"], r["p99_ms"], r["errors"]] for r in by["events-latency"]],
        ),
        "",
        table(
            ["target", "batched ingest events/s", "events per call", "runs in parallel", "call p50 ms", "call p99 ms"],
            [[r["target"], r["events_per_s"], r["batch_size"], r["runs"], r["call_p50_ms"], r["call_p99_ms"]] for r in by["events-ingest"]],
        ),
        "",
        table(
            ["target", "SSE subscribers on one run", "events", "deliveries", "missing", "delivery p50 ms", "p99 ms"],
            [[r["target"], r["subscribers"], r["events"], r["deliveries"], r["missing"], r["p50_ms"], r["p99_ms"]] for r in by["fanout"]],
        ),
        "",
        "## 5. Cost per operation (D1, counted by the executor; independent of machine noise)",
        "",
        table(["operation", "HTTP status", "D1 round trips", "D1 statements"], [[r["op"], r["status"], r["d1_round_trips"], r["d1_statements"]] for r in by["cost"]]),
        "",
        "### 5a. One reaper tick over a seeded store (through wrangler dev; the tick's own summary)",
        "",
        table(
            ["store", "runs in store", "stale", "reaped", "tick ms", "of which telling sessions, ms", "trigger wall ms", "pages", "D1 round trips", "D1 rows examined", "claims released", "sessions told"],
            [[r["target"], seeded.get(r["target"], r["runs"]), r["stale"], r["reaped"], r["tick_duration_ms"], r.get("notify_ms"), r["trigger_wall_ms"], r["pages"], r["d1_round_trips"], r["d1_rows_read"], r["claims_released"], r["sessions_told"]]
             for r in by.get("reaper", []) + by.get("scale:reaper", [])],
        ),
        "",
        *tell_floor_lines(by),
        "### 5b. Where admission time goes (sequential, workerd-direct)",
        "",
        table(["request", "samples", "p50 ms", "p95 ms", "p99 ms"], [[r["what"], r["samples"], r["p50_ms"], r["p95_ms"], r["p99_ms"]] for r in by["session-object"]]),
        "",
        "## 6. Peer: LangGraph's in-memory dev server",
        "",
        "Mapping: thread = session; `POST /threads/{id}/runs` with `multitask_strategy: \"reject\"` and `if_not_exists: \"create\"` = submit. "
        "Contention holds the thread busy with a 5 s stub run (as a run a runner drives holds a session). "
        "Events do not map: LangGraph has no external runner appending to a run's stream, so there is no append-to-delivery figure for it.",
        "",
        table(
            ["scenario", "concurrency", "peer per s", "peer p50 ms", "peer p99 ms", "ours (workerd-direct) per s", "ours ÷ peer"],
            [
                [
                    "admission", r["concurrency"], r["per_s"], r["p50_ms"], r["p99_ms"],
                    next((a["per_s"] for a in pick(by["admission"], target="workerd-direct", concurrency=r["concurrency"])), None),
                    next((a["per_s"] / r["per_s"] for a in pick(by["admission"], target="workerd-direct", concurrency=r["concurrency"]) if r["per_s"]), None),
                ]
                for r in by["peer-admission"]
            ],
        ),
        "",
        table(
            ["peer contention", "sessions", "exactly one accepted", "accepted", "409s", "409 p50 ms", "409 p99 ms", "errors"],
            [["reject", r["sessions"], r["sessions_with_exactly_one_accepted"], r["accepted_total"], r["conflicts_409"], r["p50_ms"], r["p99_ms"], r["errors"]] for r in by["peer-contention"]],
        ),
        "",
        "## What the figures show",
        "",
        findings(by, ceil),
        "",
        "## 7. Size and start",
        "",
        table(
            ["wasm as `scripts/build` ships it (bytes)", "gzip -9 (bytes)", "wrangler dev start → first 200 (ms)"],
            [[size.get("wasm_raw_bytes"), size.get("wasm_gzip_bytes"), size.get("wrangler_dev_start_to_first_200_ms")]],
        ),
        "",
        *leader_section(by),
        *queues_section(by),
        *floor_section(by),
        *postgres_section(by),
        *far_section(by),
        *end_to_end_section(by),
        *scale_section(by),
    ]
    open(md_path, "w").write("\n".join(md))
    chart(by, svg_path)


if __name__ == "__main__":
    main()
