from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "agentlab.gateway"
    label = "gateway"
    verbose_name = "Gateway"
