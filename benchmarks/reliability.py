"""``python -m benchmarks reliability [--quick] [--seeds N] [--writers N] [--commits N] [--expiry-rounds N]``:
reliability figures.

Runs the scenarios of tests/reliability/scenarios.py (the same code the tests assert on) and prints:
crash runs survived / total (write and commit x merge engines; compaction, expiration, orphan cleanup, tags,
rollback) and the unreferenced bytes they left, acknowledged-but-lost and duplicate commits under concurrent
writers (also racing a compactor process, and overwrites of one partition racing), reads of a pinned snapshot
disturbed and commits lost while writer processes expire snapshots, storage faults handled, corruptions detected /
harmless / silently wrong, and bad inputs that were accepted or created files. Exit code 1 if any promise was
broken.

``--quick``: crash points at one arrival, deduplicate + partial-update on 4 buckets only for maintenance, 4x8
writers, 3 corruption seeds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m benchmarks reliability", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one crash arrival, 4x8 writers, 3 corruption seeds")
    ap.add_argument("--seeds", type=int, help="random damages per (file kind, damage) (default 10, --quick 3)")
    ap.add_argument("--writers", type=int, help="concurrent writer processes (default 8, --quick 4)")
    ap.add_argument("--commits", type=int, help="commits per writer (default 25, --quick 8)")
    ap.add_argument("--expiry-rounds", type=int, help="rounds of the expiry race per pin (default 40, --quick 3)")
    ap.add_argument("--no-pypaimon", dest="pypaimon", action="store_false",
                    help="skip the pypaimon baseline (same concurrent-writer run through pypaimon 2.1)")
    args = ap.parse_args(argv)
    args.seeds = args.seeds or (3 if args.quick else 10)
    args.writers = args.writers or (4 if args.quick else 8)
    args.commits = args.commits or (8 if args.quick else 25)
    args.expiry_rounds = args.expiry_rounds or (3 if args.quick else 40)
    return args


def main(argv=None) -> int:
    args = parse_args(argv if argv is not None else sys.argv[2:])
    from tests.reliability import scenarios as sc

    work = tempfile.mkdtemp(prefix="lakemerge-reliability-")
    broken: list[str] = []
    lines: list[str] = []
    counter = iter(range(10**9))

    def scratch() -> str:
        d = os.path.join(work, str(next(counter)))
        os.makedirs(d)
        return d

    t0 = time.perf_counter()
    try:
        # --- crashes ---
        occurrences = (2,) if args.quick else (1, 2, 3)
        engines = ("deduplicate", "partial-update") if args.quick else tuple(sc.ENGINES)
        commit_runs = [sc.crash_case(scratch(), p, n, b, engine=e) for e in engines
                       for p in sc.WRITE_AND_COMMIT_POINTS for n in occurrences for b in (1, 4)]
        commit_runs.append(sc.rebase_crash_case(scratch()))
        maintenance_points = sc.maintenance_points()
        if args.quick:
            maintenance_points = [(op, p, n) for op, p, n in maintenance_points if n == 1]
        m_buckets = (4,) if args.quick else (1, 4)
        maintenance_runs = [sc.maintenance_crash_case(scratch(), op, p, n, b, e) for e in engines
                            for op, p, n in maintenance_points for b in m_buckets]
        for label, outcomes in (("write/commit", commit_runs), ("maintenance", maintenance_runs)):
            crashed = [o for o in outcomes if o.crashed]
            survived = [o for o in crashed if o.survived]
            broken += [f"crash {o.operation} {o.point}#{o.occurrence} ({o.buckets} buckets, {o.engine}): "
                       f"{o.failures}" for o in outcomes if not o.survived or not o.crashed]
            if label == "write/commit":
                what = (f"{len(sc.WRITE_AND_COMMIT_POINTS) + 1} points x arrivals {list(occurrences)} x {{1, 4}} "
                        f"buckets x {len(engines)} merge engines")
            else:
                ops = sorted({op for op, _, _ in maintenance_points})
                what = (f"{len({p for _, p, _ in maintenance_points})} points of {', '.join(ops)} x their arrivals "
                        f"x {set(m_buckets)} buckets x {len(engines)} merge engines")
            lines.append(f"crash runs survived / total, {label:<12} {len(survived)} / {len(outcomes)}  ({what})")
        crashed = [o for o in commit_runs + maintenance_runs if o.crashed]
        leftover = sum(o.leftover_bytes for o in crashed)
        after_cleanup = sum(o.orphan_bytes_after_cleanup for o in crashed)
        lines.append(f"unreferenced bytes left by crashes   {leftover:,} in "
                     f"{sum(o.leftover_files for o in crashed)} files (all identified by check(); "
                     f"{after_cleanup} bytes unreferenced after orphan cleanup with older_than=0, reads unchanged)")

        # --- concurrency ---
        for same in (True, False):
            c = sc.concurrency_case(scratch(), args.writers, args.commits, same)
            broken += [f"concurrency {c.mode}: {f}" for f in c.failures]
            lines.append(f"concurrent writers, {c.mode:<17} {c.workers} processes x {c.commits} commits: "
                         f"acknowledged {c.acknowledged}, acknowledged-but-lost {c.lost}, duplicates {c.duplicates}")
        if args.pypaimon:
            acked, lost = pypaimon_baseline(scratch(), args.writers, args.commits)
            lines.append(f"  baseline: pypaimon 2.1, {args.writers} processes x {args.commits} commits, different keys: "
                         f"acknowledged {acked}, acknowledged-but-lost {lost}")
        racers = max(2, args.writers // 2)
        for same in (True, False):
            c = sc.concurrency_case(scratch(), racers, args.commits, same, compactor=True)
            broken += [f"concurrency {c.mode}: {f}" for f in c.failures]
            if not c.compactions:
                broken.append(f"concurrency {c.mode}: the compactor never landed a compaction")
            lines.append(f"writers racing a compactor process, {c.mode.split(' ')[0]:<17} {c.workers} processes x "
                         f"{c.commits} commits: acknowledged {c.acknowledged}, acknowledged-but-lost {c.lost}, "
                         f"duplicates {c.duplicates} ({c.compactions} compactions landed, "
                         f"{c.compaction_conflicts} retried after a conflict)")
        o = sc.overwrite_race_case(scratch(), workers=racers, rounds=max(3, args.commits // 4))
        broken += [f"overwrite race: {f}" for f in o.failures]
        lines.append(f"overwrites of one partition racing   {o.workers} processes x {o.commits} overwrites: "
                     f"acknowledged {o.acknowledged}, acknowledged-but-lost {o.lost}, duplicates {o.duplicates}, "
                     f"mixed or partial partitions {len([f for f in o.failures if 'not exactly' in f])}")
        for pin in ("tag", "consumer"):  # 3 writers that each expire down to 1 snapshot after every commit
            total = sc.PinnedReaderOutcome()
            for _ in range(args.expiry_rounds):
                o = sc.pinned_reader_case(scratch(), pin, workers=3, commits=10)
                total.reads += o.reads
                total.expired += o.expired
                total.acknowledged += o.acknowledged
                total.lost += o.lost
                total.failures += o.failures
            broken += [f"pinned reader ({pin}): {f}" for f in total.failures]
            lines.append(f"reader pinned by a {pin:<8} vs writers expiring to 1 snapshot, {args.expiry_rounds} rounds "
                         f"x 3 processes x 10 commits: acknowledged {total.acknowledged}, acknowledged-but-lost "
                         f"{total.lost}, failures {len(total.failures)} ({total.reads} pinned reads, "
                         f"{total.expired} snapshots expired)")

        # --- storage faults ---
        ok_faults = 0
        for name, op, pattern, kind in sc.STORAGE_FAULTS:
            failures = sc.storage_case(scratch(), op, pattern, kind)
            ok_faults += not failures
            broken += [f"storage fault {name}: {f}" for f in failures]
        lines.append(f"storage faults handled               {ok_faults} / {len(sc.STORAGE_FAULTS)}  (typed error, "
                     "previous snapshot intact, retry applies once; EIO/ENOSPC/torn/lost-ack)")

        # --- corruption ---
        verdicts: dict[str, int] = {}
        flagged = detected = 0
        for target in sc.CORRUPTION_TARGETS:
            for damage in sc.DAMAGES:
                for seed in range(1 if damage == "missing" else args.seeds):
                    o = sc.corruption_case(scratch(), target, damage, seed)
                    verdicts[o.verdict] = verdicts.get(o.verdict, 0) + 1
                    detected += o.verdict == "detected"
                    flagged += o.verdict == "detected" and o.check_flagged
                    if o.verdict not in ("detected", "harmless"):
                        broken.append(f"corruption {target}/{damage}/seed {seed}: {o.verdict} {o.detail}")
        total = sum(verdicts.values())
        lines.append(f"corruptions detected / harmless / silently wrong / untyped   {verdicts.get('detected', 0)} / "
                     f"{verdicts.get('harmless', 0)} / {verdicts.get('silently-wrong', 0)} / "
                     f"{verdicts.get('untyped-error', 0)} of {total}  (check() flagged {flagged} of the "
                     f"{detected} detected)")

        # --- bad input ---
        created = accepted = 0
        cases = sc.bad_input_cases()
        for name, op, expected in cases:
            ok, changed, text = sc.bad_input_case(scratch(), name, op, expected)
            created += changed
            accepted += not ok
            if changed or not ok:
                broken.append(f"bad input {name}: {text}{' (files changed)' if changed else ''}")
        lines.append(f"bad inputs that created files        {created} of {len(cases)}  "
                     f"(not rejected with the documented error: {accepted})")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("lakemerge reliability")
    for line in lines:
        print("  " + line)
    print(f"  wall time {time.perf_counter() - t0:.0f} s")
    if broken:
        print("\nBROKEN PROMISES:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    return 0


def _pypaimon_worker(warehouse: str, worker: int, commits: int) -> list[int]:
    from tests.interop.pypaimon_util import pp_get_table, pp_write
    from tests.reliability.scenarios import SCHEMA

    import contextlib
    import logging

    logging.disable(logging.CRITICAL)  # pypaimon logs every lost race
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        return _pypaimon_commits(warehouse, worker, commits, pp_get_table, pp_write, SCHEMA)


def _pypaimon_commits(warehouse, worker, commits, pp_get_table, pp_write, SCHEMA) -> list[int]:
    t = pp_get_table(warehouse, "db.t")
    acked = []
    for i in range(commits):
        key = worker * 100_000 + i
        try:
            pp_write(t, pa_table({"p": ["a"], "id": [key], "v": [f"w{worker}-{i}"]}, SCHEMA), SCHEMA)
        except Exception:  # noqa: BLE001 - a failed commit is not acknowledged
            continue
        acked.append(key)
    return acked


def pa_table(cols, schema):
    import pyarrow as pa
    return pa.table(cols, schema=schema)


def pypaimon_baseline(workdir: str, writers: int, commits: int) -> tuple[int, int]:
    """The same N x C run through pypaimon: (acknowledged, acknowledged-but-lost)."""
    from engine.crash_points import _context
    from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_get_table, pp_read
    from tests.reliability.scenarios import SCHEMA

    warehouse = os.path.join(workdir, "wh")
    pp_create_table(pp_catalog(warehouse, "db"), "db.t", SCHEMA, ["p", "id"], ["p"], {"bucket": str(writers)})
    with _context().Pool(writers) as pool:
        acked = [k for r in pool.starmap(_pypaimon_worker, [(warehouse, w, commits) for w in range(writers)])
                 for k in r]
    present = set(pp_read(pp_get_table(warehouse, "db.t")).column("id").to_pylist())
    return len(acked), sum(1 for k in acked if k not in present)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
