"""Runs on workers: procrastinate jobs executed by `manage.py worker` processes (issue 20)."""
