"""SECRET_KEY from the environment, or generated once into a git-ignored file (never in git)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def load_secret_key(var_dir: Path) -> str:
    """Return `SECRET_KEY`, else the key in `var/secret_key`, created (mode 0600) on first run."""
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = var_dir / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(50)
    # O_EXCL: two processes starting at once must not end up with different keys.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key
