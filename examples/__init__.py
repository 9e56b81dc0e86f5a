"""Runnable examples (README): `.venv/bin/python -m examples.<name>`."""
