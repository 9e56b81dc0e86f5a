"""Where runtime state lives; pure (no Django), so tools and the LLM layer can use it too."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def var_dir() -> Path:
    """The git-ignored state folder (`AGENTLAB_VAR_DIR`, default `<repo>/var`), made on demand."""
    path = Path(os.environ.get("AGENTLAB_VAR_DIR") or REPO_ROOT / "var")
    path.mkdir(parents=True, exist_ok=True)
    return path
