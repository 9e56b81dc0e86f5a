"""Run controls over plain HTTP: the run socket's frames for scripts and terminals."""
