"""LSM compaction: levels, the universal picker, unit rewriting and the per-bucket compaction manager."""
