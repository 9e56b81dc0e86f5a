from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from agentlab.gateway import launcher_views, runner_pages, views
from agentlab.gateway.answer import error_response
from agentlab.gateway.protocol import GatewayError

# The OpenAI-compatible API, as a client's base URL ends: …/gateway/v1 (any client), or
# …/gateway/s/<session>/v1 (a program under `manage.py attach`).
api = [
    path("chat/completions", views.chat_completions, name="gateway_chat"),
    path("models", views.models, name="gateway_models"),
    path("embeddings", views.embeddings, name="gateway_embeddings"),
    path("responses", views.responses, name="gateway_responses"),
]

urlpatterns = [
    path("v1/", include(api)),
    path("s/<str:session>/v1/", include(api)),
    path("sessions", launcher_views.open_session, name="gateway_open_session"),
    path("sessions/<str:key>", launcher_views.session_state, name="gateway_session"),
    path("sessions/<str:key>/end", launcher_views.end, name="gateway_end_session"),
    path("runner/next", launcher_views.next_job, name="gateway_runner_next"),
    # a person's page (login): a replay or fork asked from a run page, until a runner takes it
    path("jobs/<str:key>/", runner_pages.job, name="gateway_job"),
]


def api_error(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """An error of the API's own making, OpenAI-shaped, as its clients read one."""
    kind = "api_error" if status >= 500 else "invalid_request_error"
    return error_response(GatewayError(status, message, type=kind))


# The OpenAI API served past the middleware (agentlab/fast_api.py, wired in agentlab/asgi.py):
# paths, the name its errors give, its error shape.
FAST = (re.compile(r"^/gateway/(?:s/[^/]+/)?v1/"), "gateway", api_error)
