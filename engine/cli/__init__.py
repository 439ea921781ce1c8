"""The ``lakemerge`` command line (click + rich).

Conventions every command follows:
- tables are ``db.table`` in the warehouse given by ``--warehouse``/``-w`` or ``LAKEMERGE_WAREHOUSE``;
  ``db.table$snapshots`` etc. name Paimon system tables (see engine.system_tables);
- ``--json`` prints JSON for scripts (one document on stdout; messages go to stderr);
- exit codes: 0 ok, 1 failure (one ``error: ...`` line on stderr, traceback only with ``--debug``), 2 usage;
- long work shows rich progress on stderr, only on a terminal: ingest and compact a bar with bytes, rows and
  rates; expire and remove-orphans a spinner with the elapsed time.

Commands: create, ingest, show, snapshots, files, schema, options, alter, compact, expire, drop-partition,
remove-orphans, tag, rollback, fsck, changes, stream, bench, demo.
"""
from engine.cli.app import cli, main

__all__ = ["cli", "main"]
