"""OpenTelemetry both ways: runs as OpenInference spans (download and live export through the
official SDK) and OTLP traces from any OpenInference-instrumented framework as runs.

ids.py (installation-salted ids), spans.py + attributes.py (pure: a run -> span data),
encode.py (span data -> the SDK's ReadableSpan -> OTLP protobuf / JSON), live.py (the
BatchSpanProcessor behind OTEL_EXPORTER_OTLP_ENDPOINT), decode.py + steps.py (OTLP -> runs).
"""
