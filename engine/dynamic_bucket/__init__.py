"""Dynamic bucket mode (``bucket=-1`` on a primary-key table), as Paimon keeps it: every key hash is assigned to
a bucket once and remembered in per-bucket HASH index files listed by the snapshot's index manifest."""
