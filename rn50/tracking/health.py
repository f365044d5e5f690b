"""Whether a tracking store can be used, answered before any work starts: its scheme, a server's
/health, a sqlite store's folder and file, and the lock under which one process makes a new store."""

import contextlib
import fcntl
import os
import sqlite3
import tempfile
from typing import Iterator, Optional, Tuple

from rn50.errors import ConfigError, Rn50Error
from rn50.tracking.client import first_line, open_client, server_unreachable

SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "file")


def check_reachable(uri: str, open_store: bool = True, write: bool = True) -> None:
    """Fail before any work starts when the tracking store cannot be opened. open_store=False
    makes only the checks that need no MLflow import: the scheme, a server's /health, and that a
    sqlite store's folder (and file, where it exists) can be written. write=False: a reader."""
    scheme = uri.split("://")[0].split("+")[0] if "://" in uri else uri
    if scheme not in SCHEMES:
        raise ConfigError(f"mlflow.tracking_uri={uri}: unknown scheme {scheme!r}; use sqlite:///path/mlflow.db "
                          "or http://host:port of an MLflow server")
    db = sqlite_file(uri)
    if db is not None:
        check_sqlite(uri, db, write)
    if uri.startswith(("http://", "https://")):
        reason = server_unreachable(uri)
        if reason is not None:
            raise Rn50Error(
                f"mlflow.tracking_uri={uri} is unreachable ({reason}); start a server "
                "(launchers/mlflow_server.sh) or drop the key to use ./mlflow.db"
            ) from None
    if not open_store:
        return
    try:  # a server answers /health whatever the Host header, and refuses requests for a name it does not allow
        with store_lock(uri):  # the first process to open a new store makes its schema; the others wait
            if not schema_made(uri):
                open_client(uri).search_experiments(max_results=1)
        open_client(uri).search_experiments(max_results=1)
    except Exception as exc:  # MLflow and SQLAlchemy raise many types for a bad store
        first = first_line(exc)
        hint = (f"; start the server with --allowed-hosts naming {uri.split('://')[1].split('/')[0]} "
                "(launchers/mlflow_server.sh allows its --host and its machine's names)"
                if "Invalid Host header" in first else "")
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot be opened: {first}{hint}") from None


def sqlite_file(uri: str) -> Optional[str]:
    """The database file of a sqlite:/// URI (relative to the working directory unless it
    starts with a fourth slash); None for any other store."""
    return uri.removeprefix("sqlite:///").split("?")[0] if uri.startswith("sqlite:///") else None


def check_sqlite(uri: str, db: str, write: bool) -> None:
    """A sqlite store's folder must exist and, for a writer, take new files (SQLite writes its
    journal beside the database, rn50 its lock), and the database must be writable where it
    exists (write_refused)."""
    folder = os.path.dirname(db) or "."
    if not os.path.isdir(folder):
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot be opened: {folder} is not a directory")
    refused = write_refused(db) if write else None
    if refused:
        raise unwritable(uri, *refused)


def write_refused(db: str) -> Optional[Tuple[str, OSError]]:
    """Where a writer of the sqlite store db is refused, and why; None where it is not. A real
    write, so that it answers as the kernel will for this process (permissions, capabilities, a
    read-only mount). rn50.doctor asks it too."""
    folder = os.path.dirname(db) or "."
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return folder, exc
    try:
        if os.path.exists(db):
            open(db, "r+b").close()
    except OSError as exc:
        return db, exc
    return None


def unwritable(uri: str, path: str, exc: OSError) -> Rn50Error:
    home = os.path.expanduser("~")
    somewhere = home if os.access(home, os.W_OK) else tempfile.gettempdir()
    return Rn50Error(f"mlflow.tracking_uri={uri} cannot be written: {path}: {exc.strerror}; record into a writable "
                     f"folder, e.g. mlflow.tracking_uri=sqlite:///{somewhere}/mlflow.db")


def schema_made(uri: str) -> bool:
    """Whether a sqlite store's schema has been made (MLflow's migrations record their revision);
    a quick read without MLflow, which takes seconds to check the schema. True for other stores."""
    db = sqlite_file(uri)
    if db is None:
        return True
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return con.execute("SELECT count(*) FROM alembic_version").fetchone()[0] > 0
    except sqlite3.Error:  # no file yet, or no table
        return False


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """For the block, this process alone sets up a sqlite store: its schema, which MLflow makes
    when a process first opens a new store (two processes making it at once fail with duplicate
    columns and leave half-made tables), and the experiment and its UI view. An flock on
    mlflow.db.lock beside the database, released when the process ends; no lock for other
    stores, or where a reader cannot create the lock file."""
    db = sqlite_file(uri)
    try:
        fd = os.open(db + ".lock", os.O_RDONLY | os.O_CREAT, 0o666) if db else None
    except OSError:  # a read-only folder: a writer was refused by check_sqlite already
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)
