"""Another writer beside a long write: how long it waits for SQLite's write lock.

`bench_hostile` prints the figures and tests/security asserts them; both use this one probe so
they measure the same thing (its own connection, 1 s patience, a write every 5 ms).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from types import TracebackType


class OtherWriter:
    """`with OtherWriter(path) as w:` writes while the block runs; then `w.waits` (seconds per
    write) and `w.errors` ("database is locked", …) say what another run's writer met."""

    def __init__(self, db_path: str, *, patience_s: float = 1.0, pause_s: float = 0.005) -> None:
        self.db_path, self.patience_s, self.pause_s = db_path, patience_s, pause_s
        self.waits: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name="other-writer")

    def _write(self) -> None:
        db = sqlite3.connect(self.db_path, timeout=self.patience_s, isolation_level=None)
        try:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    db.execute("BEGIN IMMEDIATE")
                    # no such row: it takes the lock and changes nothing
                    db.execute("UPDATE traces_run SET error = '' WHERE id = -1")
                    db.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    self.errors.append(str(exc))
                self.waits.append(time.perf_counter() - started)
                time.sleep(self.pause_s)
        finally:
            db.close()

    def __enter__(self) -> OtherWriter:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
