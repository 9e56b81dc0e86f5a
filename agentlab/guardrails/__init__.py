"""Guardrails (pure): detectors that find spans of text (PII, secrets, a user's deny-list),
checks configured with an action (block, redact, flag), the scrubbing of any JSON value, and an
LLM judge. No ORM: the admin's rows are frozen into a run's snapshot (agentlab/guardrail_rows.py)
and the runtime applies them to every step before it is recorded (agentlab/runtime/guard.py).
docs/GUARDRAILS.md says what each check finds and what is not covered."""
