from django.contrib import admin

from agentlab.gateway.models import GatewayRoute


@admin.register(GatewayRoute)
class GatewayRouteAdmin(admin.ModelAdmin):
    list_display = ("model_name", "profile", "agent")
    search_fields = ("model_name",)
    autocomplete_fields = ()
