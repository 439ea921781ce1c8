"""lakemerge: Apache Paimon primary-key tables in Python.

Public surface: ``Catalog`` and ``Table`` (see engine.catalog / engine.table) and the error types in engine.errors.
"""
from engine import errors
from engine.errors import LakemergeError

__all__ = ["Catalog", "Table", "SchemaChange", "Move", "errors", "LakemergeError"]


def __getattr__(name):  # keep `import engine` cheap: numba and friends load on first use
    if name == "Catalog":
        from engine.catalog import Catalog
        return Catalog
    if name == "Table":
        from engine.table import Table
        return Table
    if name in ("SchemaChange", "Move"):
        from engine import schema_change
        return getattr(schema_change, name)
    raise AttributeError(name)
