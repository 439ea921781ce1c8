"""lakemerge benchmarks: ``python -m benchmarks merge [--quick]`` (see benchmarks/RESULTS.md).

Modules: ``workloads`` (seeded data), ``harness`` (worker processes, timing, checks), ``merge_bench`` (case a:
in-memory merge), ``table_bench`` (case b: table ingest + merged read), ``report`` (table and RESULTS.md),
``compaction_bench`` (case c: full compaction and merged reads before/after it, RESULTS-compaction.md;
``python -m benchmarks.compaction_bench run``).
``test_bench_merge.py`` holds the same cases at small sizes for pytest-benchmark (run it by name).
"""
