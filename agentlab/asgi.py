"""ASGI entry point: HTTP (with static files) and WebSockets (origin-checked, authenticated)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
# Django must be set up before anything that imports models (consumers, routing).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from agentlab.fast_api import Endpoint, FastAPI  # noqa: E402
from agentlab.gateway.urls import FAST as GATEWAY_API  # noqa: E402
from agentlab.gateway.views import BODY_CAP as GATEWAY_CAP  # noqa: E402
from agentlab.monitors.background import StartOnFirstRequest  # noqa: E402
from agentlab.process_tuning import tune_web_process  # noqa: E402
from agentlab.receiver.body_cap import BodyCap  # noqa: E402
from agentlab.receiver.urls import FAST as RECEIVER_API  # noqa: E402
from agentlab.routing import websocket_routes  # noqa: E402

# HTTP as the app serves it: the receiver's and the gateway's bodies capped before anything
# reads them; the gateway's OpenAI API and the OTLP receiver straight from ASGI, past the
# middleware (agentlab/fast_api.py); everything else Django's.
http = BodyCap(BodyCap(FastAPI(django_asgi_app, [Endpoint(*GATEWAY_API),
                                                 Endpoint(*RECEIVER_API)]), **GATEWAY_CAP))

application = ProtocolTypeRouter(
    {
        # Static files served in-process so one daphne is the whole app on one machine; the
        # live scorers' thread started by the first request (agentlab/monitors/background.py).
        "http": StartOnFirstRequest(ASGIStaticFilesHandler(http)),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_routes))
        ),
    }
)

tune_web_process()  # what is loaded by now lives as long as the process
