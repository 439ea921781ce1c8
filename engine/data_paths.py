"""Where a data (or changelog) file lives: in its bucket directory, or under ``data-file.external-paths``.

Paimon (Java ``DataFilePathFactory`` / ``ExternalPathProvider``, pypaimon alike) records an external file's full
location in ``DataFileMeta._EXTERNAL_PATH`` as Hadoop ``Path.toString()`` text, e.g.
``file:/ext1/dt=a/bucket-0/data-<uuid>-0.parquet``: the external root, then the same relative bucket path the file
would have under the table root, then the file name. Sidecar (``_EXTRA_FILES``) files sit beside their data file.

Contracts:
- ``data_file_path`` is THE function every reader, rewriter, checker and cleaner uses to turn a file's metadata
  into a local path; ``_EXTERNAL_PATH`` may be ``file:/...``, ``file:///...`` or a plain absolute path, any other
  scheme raises ``UnsupportedFeature`` naming the file (lakemerge's FileIO is local only).
- ``DataFilePlacer`` is how every writer names a new file: with ``data-file.external-paths`` and a strategy other
  than ``none`` it picks the external roots round-robin (``specific-fs`` keeps the roots of that scheme), as Java's
  ``RoundRobinExternalPathProvider`` does, and returns the ``_EXTERNAL_PATH`` text Java would record.
"""
from __future__ import annotations

import os
import random

from engine.errors import InvalidOption, UnsupportedFeature

EXTERNAL_PATHS = "data-file.external-paths"
EXTERNAL_PATHS_STRATEGY = "data-file.external-paths.strategy"
EXTERNAL_PATHS_SPECIFIC_FS = "data-file.external-paths.specific-fs"
EXTERNAL_PATHS_WEIGHTS = "data-file.external-paths.weights"
_STRATEGIES = ("none", "specific-fs", "round-robin", "entropy-inject", "weight-robin")


class BucketDir(str):
    """An absolute bucket directory (a ``str``) that also knows its table ``root`` and its ``relative`` path
    (``k=v/bucket-N``), so writers can mirror the layout under an external root."""

    root: str
    relative: str

    def __new__(cls, root: str, relative: str):
        obj = super().__new__(cls, os.path.join(root, relative))
        obj.root, obj.relative = root, relative
        return obj

    def __reduce__(self):
        return BucketDir, (self.root, self.relative)


def local_file_path(location: str, what: str | None = None) -> str:
    """The local path of a file recorded as ``location`` (``file:/p``, ``file:///p``, ``file://localhost/p`` or an
    absolute path ``/p``). Raises UnsupportedFeature (naming ``what`` or the location) for any other scheme."""
    text = location
    if text.startswith("file:"):
        rest = text[len("file:"):]
        if rest.startswith("//"):
            host, _, tail = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise UnsupportedFeature(f"data file {what or location!r}: {location!r} is on host {host!r}; "
                                         "lakemerge reads only local files")
            rest = "/" + tail
        return os.path.normpath(rest)  # no URL decoding: partition directories hold literal %XX escapes
    if "://" in text or (":" in text.split("/", 1)[0] and not text.startswith("/")):
        raise UnsupportedFeature(f"data file {what or location!r}: {location!r} uses a file system lakemerge does not "
                                 "support (only local paths and file: URIs)")
    if not text.startswith("/"):
        raise UnsupportedFeature(f"data file {what or location!r}: external path {location!r} is not absolute")
    return os.path.normpath(text)


def data_file_path(bucket_dir: str, meta) -> str:
    """Local path of data/changelog file ``meta`` of the bucket at ``bucket_dir``: its ``_EXTERNAL_PATH`` if set,
    else ``<bucket_dir>/<file_name>``."""
    if meta.external_path:
        return local_file_path(meta.external_path, meta.file_name)
    return os.path.join(bucket_dir, meta.file_name)


def file_dir(bucket_dir: str, meta) -> str:
    """The directory holding ``meta`` and its sidecar files (Paimon's ``toAlignedPath``)."""
    return os.path.dirname(data_file_path(bucket_dir, meta)) if meta.external_path else bucket_dir


def all_file_paths(bucket_dir: str, meta) -> list[str]:
    """Local paths of ``meta`` and of its ``_EXTRA_FILES`` sidecars (beside the data file, external or not)."""
    where = file_dir(bucket_dir, meta)
    return [data_file_path(bucket_dir, meta)] + [os.path.join(where, x) for x in meta.extra_files]


def java_path_text(local: str) -> str:
    """What Java's ``new Path("file:" + local).toString()`` gives for absolute local path ``local``."""
    return "file:" + os.path.normpath(local)


def external_roots(options: dict, table: str | None = None) -> list[str]:
    """The local external roots new data files go to, in option order ([] when ``data-file.external-paths`` is
    unset or the strategy is ``none``), as Java's ``AbstractFileStore.createExternalPaths``: every root needs a
    scheme (InvalidOption otherwise), ``specific-fs`` keeps the roots of that scheme (InvalidOption if none is left).
    Strategies lakemerge cannot write (``entropy-inject``; ``weight-robin`` with weights over several roots) and
    non-local schemes raise UnsupportedFeature."""
    raw = options.get(EXTERNAL_PATHS)
    strategy = (options.get(EXTERNAL_PATHS_STRATEGY) or "none").strip().lower()
    if strategy not in _STRATEGIES:
        raise InvalidOption(EXTERNAL_PATHS_STRATEGY, strategy, f"expected one of {', '.join(_STRATEGIES)}",
                            table=table)
    if not raw or not raw.strip() or strategy == "none":
        return []
    where = f"table {table!r}: " if table else ""
    specific = options.get(EXTERNAL_PATHS_SPECIFIC_FS)
    if strategy == "specific-fs" and not specific:
        raise InvalidOption(EXTERNAL_PATHS_SPECIFIC_FS, specific, "should be set when the strategy is specific-fs",
                            table=table)
    chosen = []
    for text in (p.strip() for p in raw.split(",")):
        scheme = text.split(":", 1)[0] if ":" in text and not text.startswith("/") else ""
        if not scheme:
            raise InvalidOption(EXTERNAL_PATHS, raw, f"scheme should not be null: {text}", table=table)
        if strategy == "specific-fs" and scheme.lower() != specific.strip().lower():
            continue
        chosen.append(text)
    if not chosen:
        raise InvalidOption(EXTERNAL_PATHS, raw, "External paths should not be empty", table=table)
    weights = options.get(EXTERNAL_PATHS_WEIGHTS)
    if strategy == "entropy-inject" or (strategy == "weight-robin" and weights and len(chosen) > 1):
        raise UnsupportedFeature(where + f"writing with {EXTERNAL_PATHS_STRATEGY}={strategy} is not supported; "
                                 "use round-robin or specific-fs")
    out = []
    for text in chosen:
        if text.split(":", 1)[0].lower() != "file":
            raise UnsupportedFeature(where + f"external path {text!r}: lakemerge writes only to local file: paths")
        out.append(local_file_path(text, text))
    return out


class DataFilePlacer:
    """Names new files of one writer of the bucket at ``bucket_dir`` (a ``BucketDir`` when the table may have
    external paths): ``place(name)`` returns ``(local path, _EXTERNAL_PATH or None)``; round-robin over the external
    roots starting at a random one, as Java does per writer."""

    def __init__(self, bucket_dir: str, options: dict, table: str | None = None):
        self.bucket_dir = bucket_dir
        self.roots = external_roots(options, table)
        if self.roots and not isinstance(bucket_dir, BucketDir):
            raise UnsupportedFeature(f"table {table!r}: cannot place a file of {bucket_dir!r} under "
                                     f"{EXTERNAL_PATHS} (its table root is unknown)")
        self._position = random.randrange(len(self.roots)) if self.roots else 0

    def place(self, name: str) -> tuple[str, str | None]:
        """``(local path, recorded external path or None)`` for a new file called ``name``."""
        if not self.roots:
            return os.path.join(self.bucket_dir, name), None
        self._position = (self._position + 1) % len(self.roots)
        local = os.path.join(self.roots[self._position], self.bucket_dir.relative, name)
        return local, java_path_text(local)


def placer_for(bucket_dir: str, schema) -> DataFilePlacer:
    """A ``DataFilePlacer`` for ``bucket_dir`` from the options of ``schema`` (a TableSchema)."""
    opts = schema.table_options
    return DataFilePlacer(bucket_dir, opts.raw, getattr(opts, "table", None))


def external_bucket_dirs(options: dict, partition_depth: int) -> list[str]:
    """The existing local bucket directories (``<root>/k1=v1/.../bucket-*``) under every root listed in
    ``data-file.external-paths`` (whatever the strategy: files written under an earlier setting stay there), as
    Paimon's OrphanFilesClean lists them; roots on other file systems are skipped."""
    raw = options.get(EXTERNAL_PATHS) or ""
    level = []
    for text in (p.strip() for p in raw.split(",") if p.strip()):
        try:
            level.append(local_file_path(text, text))
        except UnsupportedFeature:
            continue
    for _ in range(partition_depth):
        level = [os.path.join(d, n) for d in level if os.path.isdir(d) for n in sorted(os.listdir(d))
                 if "=" in n and os.path.isdir(os.path.join(d, n))]
    return [os.path.join(d, n) for d in level if os.path.isdir(d) for n in sorted(os.listdir(d))
            if n.startswith("bucket-") and os.path.isdir(os.path.join(d, n))]


def external_twins(bucket_dir: str, options: dict) -> list[str]:
    """Where files of ``bucket_dir`` (a ``BucketDir``) go under the current external roots; [] without them."""
    if not isinstance(bucket_dir, BucketDir):
        return []
    try:
        roots = external_roots(options)
    except (InvalidOption, UnsupportedFeature):
        return []
    return [os.path.join(r, bucket_dir.relative) for r in roots]
