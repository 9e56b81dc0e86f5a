"""The OTLP/HTTP receiver: `POST /v1/traces` makes runs of any framework's traces, live."""
