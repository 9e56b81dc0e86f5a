"""Replay, fork and resume (a new run that re-executes a recorded one, served from its record
up to a point) and the LLM playground (one recorded call, edited, against any profile)."""
