"""The filesystem catalog: ``<warehouse>/<database>.db/<table>/`` as Paimon's FileSystemCatalog lays it out."""
from __future__ import annotations

import os
import re

import pyarrow as pa

from engine.crash_points import crash_point
from engine.errors import (DatabaseAlreadyExists, DatabaseNotFound, InvalidSchema, TableAlreadyExists,
                           TableNotFound)
from engine.io.file_io import FileIO, LocalFileIO, local_path
from engine.options import TableOptions
from engine.paths import TablePaths
from engine.schema import TableSchema
from engine.snapshots import SchemaManager

DB_SUFFIX = ".db"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


def split_identifier(identifier: str) -> tuple[str, str]:
    """'db.table' -> ('db', 'table'). Raises InvalidSchema for anything else."""
    parts = identifier.split(".")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise InvalidSchema(f"table identifier {identifier!r} must look like 'database.table'")
    return parts[0], parts[1]


class Catalog:
    """A warehouse directory holding databases and tables.

    ``Catalog(path)`` accepts a local path or file:// URI and creates the directory if missing.
    """

    def __init__(self, warehouse: str, *, file_io: FileIO | None = None):
        self.warehouse = local_path(str(warehouse))
        self.io = file_io or LocalFileIO()
        self.io.mkdirs(self.warehouse)

    # --- databases ----------------------------------------------------------------------------------
    def _db_dir(self, database: str) -> str:
        if not _NAME.match(database):
            raise InvalidSchema(f"invalid database name {database!r}")
        return os.path.join(self.warehouse, database + DB_SUFFIX)

    def create_database(self, name: str, ignore_if_exists: bool = False) -> None:
        """Create database ``name`` (directory ``<name>.db``). Raises DatabaseAlreadyExists unless
        ``ignore_if_exists``, InvalidSchema for an invalid name."""
        path = self._db_dir(name)
        if self.io.is_dir(path):
            if ignore_if_exists:
                return
            raise DatabaseAlreadyExists(name)
        self.io.mkdirs(path)

    def list_databases(self) -> list[str]:
        """Names of the warehouse's databases, sorted."""
        return sorted(n[: -len(DB_SUFFIX)] for n in self.io.list_names(self.warehouse)
                      if n.endswith(DB_SUFFIX) and self.io.is_dir(os.path.join(self.warehouse, n)))

    def drop_database(self, name: str, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        """Delete database ``name`` and, with ``cascade``, every table in it. Raises DatabaseNotFound unless
        ``ignore_if_not_exists``, InvalidSchema for a non-empty database without ``cascade``. Data is deleted for
        good: there is no undo."""
        path = self._db_dir(name)
        if not self.io.is_dir(path):
            if ignore_if_not_exists:
                return
            raise DatabaseNotFound(name)
        if self.list_tables(name) and not cascade:
            raise InvalidSchema(f"database {name!r} is not empty; pass cascade=True to drop its tables")
        self.io.delete_tree(path)

    # --- tables -------------------------------------------------------------------------------------
    def table_path(self, identifier: str) -> str:
        """The root directory of table ``db.t`` (whether or not it exists). Raises InvalidSchema for a bad
        identifier."""
        db, name = split_identifier(identifier)
        return os.path.join(self._db_dir(db), name)

    def list_tables(self, database: str) -> list[str]:
        """Names of the tables of ``database`` (directories holding a schema directory), sorted. Raises
        DatabaseNotFound."""
        path = self._db_dir(database)
        if not self.io.is_dir(path):
            raise DatabaseNotFound(database)
        return sorted(n for n in self.io.list_names(path)
                      if self.io.is_dir(os.path.join(path, n, "schema")))

    def create_table(self, identifier: str, schema: pa.Schema, primary_key=None, partition_keys=(),
                     options: dict | None = None, *, comment: str | None = None,
                     ignore_if_exists: bool = False):
        """Create a primary-key table (or, with no ``primary_key``, an append table) and return it.

        Raises: DatabaseNotFound, TableAlreadyExists, InvalidSchema, InvalidOption, UnsupportedFeature.
        Nothing is written unless the definition is valid.
        """
        from engine.table import Table

        db, _ = split_identifier(identifier)
        if not self.io.is_dir(self._db_dir(db)):
            raise DatabaseNotFound(db)
        if isinstance(primary_key, str):
            primary_key = [primary_key]
        if isinstance(partition_keys, str):
            partition_keys = [partition_keys]
        table_schema = TableSchema.create(schema, primary_key, partition_keys, options, comment, table=identifier)
        if table_schema.is_append_only:
            from engine.append.write import require_append_writable
            require_append_writable(table_schema, identifier)
        else:  # errors name the table
            TableOptions(table_schema.options, table=identifier).require_writable(allow_dynamic_bucket=True,
                                                                                  allow_postpone_bucket=True)
        table_schema.table_options.warn_unknown()
        root = self.table_path(identifier)
        paths = TablePaths(root)
        manager = SchemaManager(self.io, paths, identifier)
        if manager.ids():
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExists(identifier)
        crash_point("catalog.before-schema")
        if not manager.commit(table_schema):
            if ignore_if_exists:
                return self.get_table(identifier)
            raise TableAlreadyExists(identifier)
        return Table(identifier, root, self.io)

    def get_table(self, identifier: str):
        """The table ``db.t``, its system table ``db.t$<kind>`` (engine.system_tables), its branch
        ``db.t$branch_<name>`` (Table.branch) or a system table of the branch ``db.t$branch_<name>$<kind>``.

        Raises TableNotFound if no schema exists for the table, the system table kind or the branch is unknown."""
        from engine.table import Table

        if "$" in identifier:
            from engine.branch_table import BRANCH_SUFFIX
            from engine.system_tables import split_system_name, system_table
            base, kind = split_system_name(identifier)
            if kind.startswith(BRANCH_SUFFIX):
                branch, _, rest = kind[len(BRANCH_SUFFIX):].partition("$")
                table = self.get_table(base).branch(branch)
                return system_table(table, rest) if rest else table
            return system_table(self.get_table(base), kind)
        root = self.table_path(identifier)
        if not SchemaManager(self.io, TablePaths(root), identifier).ids():
            raise TableNotFound(identifier)
        return Table(identifier, root, self.io)

    def table_exists(self, identifier: str) -> bool:
        """True if ``identifier`` (a table or ``db.t$kind`` system table) can be opened. Raises InvalidSchema for a
        bad identifier."""
        try:
            self.get_table(identifier)
            return True
        except TableNotFound:
            return False

    def alter_table(self, identifier: str, changes, ignore_if_not_exists: bool = False):
        """Apply ``engine.schema_change.SchemaChange``s to a table (pypaimon's signature); returns the new
        TableSchema, or None if the table does not exist and ``ignore_if_not_exists``. Raises TableNotFound,
        InvalidSchema, InvalidOption; nothing is written unless every change is valid. As Paimon's catalog, the
        latest schema need not be valid itself (one another tool committed, e.g. an option naming a column
        pypaimon renamed): the changes may repair it, the new schema is validated."""
        from engine.table import Table
        try:
            if "$" in identifier:
                table = self.get_table(identifier)
            else:
                root = self.table_path(identifier)
                if not SchemaManager(self.io, TablePaths(root), identifier).ids():
                    raise TableNotFound(identifier)
                table = Table(identifier, root, self.io, validate=False)
        except TableNotFound:
            if ignore_if_not_exists:
                return None
            raise
        return table.alter_table(changes)

    def drop_table(self, identifier: str, ignore_if_not_exists: bool = False) -> None:
        """Delete the table's directory with all its snapshots, tags and data files. Raises TableNotFound unless
        ``ignore_if_not_exists``. There is no undo."""
        root = self.table_path(identifier)
        if not SchemaManager(self.io, TablePaths(root), identifier).ids():
            if ignore_if_not_exists:
                return
            raise TableNotFound(identifier)
        self.io.delete_tree(root)
