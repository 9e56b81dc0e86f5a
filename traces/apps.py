from __future__ import annotations

from django.apps import AppConfig
from django.core.signals import request_started
from django.db.backends.signals import connection_created


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"

    def ready(self) -> None:
        from traces import postgres_text, startup

        connection_created.connect(postgres_text.on_connection_created,
                                   dispatch_uid="traces-postgres-text")

        # A web process closes what stopped processes left, at its first request (not here:
        # Django discourages queries while the apps load, and not every command serves).
        request_started.connect(startup.on_request_started, dispatch_uid="traces-startup-sweep")
