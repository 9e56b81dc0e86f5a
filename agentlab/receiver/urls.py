from __future__ import annotations

from django.urls import path

from agentlab.receiver import views

# Mounted at the root: OTLP exporters append /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT.
urlpatterns = [path("v1/traces", views.receive_traces, name="receive_traces")]
