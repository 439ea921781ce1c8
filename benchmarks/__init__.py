"""lakemerge benchmarks: ``python -m benchmarks [NAME...] [--quick]`` (see benchmarks/RESULTS.md).

Modules: ``workloads`` (seeded data), ``harness`` (worker processes, timing, checks), ``merge_bench`` (in-memory
merge), ``table_bench`` (table ingest + merged read), ``kernel_bench`` (hashing, lookups), ``upsert_bench``
(upserts into lake tables vs deltalake / pyiceberg), ``scaling_bench`` (1 vs 2 threads), ``report`` (table and
RESULTS.md). ``test_bench_merge.py``, ``test_bench_kernels.py`` and ``test_bench_dv.py`` hold the same cases at
small sizes for pytest-benchmark (run them by name).
Separate entry points: ``dv`` (dv_bench: deletion vectors vs merge-on-read, RESULTS-dv.md), ``compaction``
(compaction_bench, RESULTS-compaction.md), ``changelog`` (changelog_bench), ``engines`` (engine_bench: merge-on-read
per merge engine), ``spark`` (spark_bench), ``reliability`` (figures).
"""
