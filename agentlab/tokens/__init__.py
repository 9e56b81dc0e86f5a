"""Personal access tokens: what a script or a CI job sends instead of a session (the OTLP
receiver's "ingest" scope, the gateway's "gateway" scope). A user creates, names, watches the
last use of, and revokes their own on the "Access tokens" page (`views.py`), or
`manage.py token`; `auth.authenticate` reads one from a request's headers."""
