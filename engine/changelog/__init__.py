"""Changelog producers (input, lookup, full-compaction), reading changes, streaming scans and consumers (issue 5).

Modules: ``files`` (writing changelog files), ``input`` (changelog-producer=input), ``emit`` (Paimon's rules turning
a key's before/after into -U/+U/+I/-D rows), ``producers`` (the lookup and full-compaction compaction hooks),
``lookup_index`` (binary-search lookups in deeper levels), ``reading`` (``read_changes``, follow-up scanning,
normalize), ``streaming`` (``Table.stream`` scan modes), ``consumers`` (consumer progress files), ``audit_log``.
"""
