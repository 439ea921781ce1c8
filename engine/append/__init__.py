"""Append tables (no primary key), as Paimon lays them out: bucket-unaware (``bucket=-1``, every file in
``bucket-0`` with total buckets -1) or fixed buckets hashed by ``bucket-key``. Writes append files, reads
concatenate them in sequence order per bucket (no merge), ``compact`` rewrites small files."""
