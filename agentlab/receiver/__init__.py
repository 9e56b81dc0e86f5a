"""The OTLP/HTTP trace receiver: POST /v1/traces makes runs of any instrumented agent."""
