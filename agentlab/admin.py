"""Admin: where users configure model profiles, tools and agents."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import escape, format_html

from agentlab.agent_form import AgentForm, parameter_fieldsets
from agentlab.models import (
    Agent,
    AgentRoleProfile,
    Guardrail,
    McpServer,
    ModelProfile,
    OutboxEmail,
    Tool,
)

admin.site.site_header = "Agent Lab"
admin.site.site_title = "Agent Lab admin"
admin.site.index_title = "Configuration"


class ModelProfileForm(forms.ModelForm):
    """The model name may be blank for the embedded model (blank base URL), as the README's
    table says: the embedded server serves one model, whatever it is called. An endpoint of
    your own needs the name it expects."""

    class Meta:
        model = ModelProfile
        fields = ["name", "base_url", "model", "api_key_env", "temperature", "max_tokens",
                  "context_tokens", "timeout_s", "retries", "price_in_per_m",
                  "price_out_per_m", "fallback"]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        if "model" in self.fields:
            self.fields["model"].required = False
            self.fields["model"].help_text = ("Model name the endpoint expects; blank for the "
                                              "embedded model (blank base URL).")

    def clean(self) -> dict:
        data = super().clean()
        if data.get("base_url") and not (data.get("model") or "").strip():
            self.add_error("model", "An endpoint needs the model name it expects (e.g. "
                                    "gpt-4o-mini); only the embedded model (blank base URL) "
                                    "may leave it blank.")
        return data


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    form = ModelProfileForm
    list_display = ["name", "endpoint", "model", "api_key_env", "timeout_s", "retries", "fallback"]
    search_fields = ["name", "model", "base_url"]
    autocomplete_fields = ["fallback"]
    actions = ["ping"]
    fieldsets = [
        (None, {"fields": ["name", "base_url", "model", "api_key_env"]}),
        ("Sampling", {"fields": ["temperature", "max_tokens"]}),
        ("Reliability", {"fields": ["timeout_s", "retries", "fallback"]}),
        ("Pricing", {"fields": ["price_in_per_m", "price_out_per_m"]}),
    ]

    @admin.display(description="endpoint")
    def endpoint(self, obj: ModelProfile) -> str:
        return obj.base_url or "embedded (local SmolLM2)"

    def get_readonly_fields(self, request: HttpRequest, obj: ModelProfile | None = None
                            ) -> list[str]:
        """Which secret a profile sends, and where a profile with a key sends it, are the
        superuser's: other staff never name the variable, nor move a keyed profile's URL."""
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields.append("api_key_env")
            if obj is not None and obj.api_key_env:
                fields.append("base_url")
        return fields

    @admin.action(description="Send a test message to the selected profiles",
                  permissions=["change"])
    def ping(self, request: HttpRequest, queryset: QuerySet[ModelProfile]) -> None:
        from asgiref.sync import async_to_sync

        from agentlab.llm.errors import LLMError
        from agentlab.profiles import chat_model

        if not self.has_change_permission(request):  # the action's own rule, checked again
            raise PermissionDenied
        for profile in queryset:
            model = chat_model(profile)
            try:
                result = async_to_sync(model.chat)(
                    [{"role": "user", "content": "Say hello in three words."}], max_tokens=16
                )
            except LLMError as exc:
                self.message_user(request, f"{profile.name}: {exc}", messages.ERROR)
                continue
            self.message_user(
                request,
                f"{profile.name}: answered by {result.profile} ({result.model}) in "
                f"{result.latency_ms:.0f} ms: {result.text[:80]!r}",
                messages.SUCCESS,
            )


@admin.register(OutboxEmail)
class OutboxEmailAdmin(admin.ModelAdmin):
    list_display = ["sent_at", "subject", "to", "from_email"]
    search_fields = ["subject", "to", "body"]
    readonly_fields = ["sent_at", "from_email", "to", "subject", "body"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = ["name", "category", "enabled", "needs_approval", "side_effects", "timeout_s",
                    "max_observation_chars"]
    list_filter = ["category", "enabled", "needs_approval"]
    list_editable = ["enabled", "needs_approval"]
    search_fields = ["name", "description"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["category", "side_effects", "implementation"]

    @admin.display(description="implementation (what the LLM sees)")
    def implementation(self, obj: Tool) -> str:
        from agentlab.tools.registry import get_tool

        if obj.mcp_server_id is not None:
            return format_html("<p>{} (MCP server {}, tool {})</p><pre>{}</pre>",
                               obj.mcp_description, obj.mcp_server, obj.mcp_tool,
                               json.dumps(obj.mcp_schema, indent=2))
        spec = get_tool(obj.name)
        if spec is None:
            return format_html('<span class="errornote">No registered implementation '
                               "(system check agentlab.E002).</span>")
        return format_html("<p>{}</p><pre>{}</pre>", spec.description,
                           json.dumps(spec.parameters, indent=2))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # rows come from the registry (synced on migrate) or an MCP server


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    list_display = ["name", "transport", "endpoint", "enabled", "timeout_s", "tool_count",
                    "refreshed"]
    list_filter = ["transport", "enabled"]
    search_fields = ["name", "command", "url"]
    actions = ["refresh_tools"]
    fieldsets = [
        (None, {"fields": ["name", "transport", "enabled", "timeout_s"]}),
        ("stdio", {"fields": ["command", "args", "env_names"]}),
        ("streamable HTTP", {"fields": ["url", "header_name", "header_env"]}),
    ]

    # What makes the server run a program, or send a secret to a URL: the superuser's only.
    CONNECTION_FIELDS = ["transport", "command", "args", "env_names", "url", "header_name",
                         "header_env"]

    def formfield_for_dbfield(self, db_field, request, **kwargs):  # noqa: ANN001, ANN201
        # The admin shows help texts as HTML: "mcp__<name>__<tool>" must be said, not parsed.
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if field is not None and field.help_text:
            field.help_text = escape(field.help_text)
        return field

    @admin.display(description="endpoint")
    def endpoint(self, obj: McpServer) -> str:
        return obj.url if obj.transport == "http" else " ".join([obj.command, *obj.args])

    def has_add_permission(self, request: HttpRequest) -> bool:
        """A new server is a new command to run: superusers only."""
        return request.user.is_superuser and super().has_add_permission(request)

    def get_readonly_fields(self, request: HttpRequest, obj: McpServer | None = None
                            ) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += self.CONNECTION_FIELDS
        return fields

    @admin.display(description="tools")
    def tool_count(self, obj: McpServer) -> int:
        return obj.tools.count()

    @admin.action(description="Refresh tools (list them from the selected servers)",
                  permissions=["change"])
    def refresh_tools(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        from agentlab.tool_rows import refresh_mcp

        if not self.has_change_permission(request):  # the action's own rule, checked again
            raise PermissionDenied
        for server in queryset:
            try:
                created, updated = refresh_mcp(server)
            except Exception as exc:  # a server that is down is a message, not a 500
                from agentlab.tools.mcp import describe_failure

                self.message_user(request, f"{server.name}: {describe_failure(exc)}",
                                  messages.ERROR)
                continue
            listed = f": {', '.join(created)}" if created else ""
            self.message_user(request, f"{server.name}: {len(created)} new tool(s){listed}; "
                              f"{len(updated)} updated", messages.SUCCESS)


class RoleProfileInline(admin.TabularInline):
    model = AgentRoleProfile
    extra = 0
    verbose_name = "model profile for a role"
    verbose_name_plural = "model profiles per role (planner, executor, evaluator, judge, …)"


# What the admin shows of an agent defined in code (agentlab.code_agents), all read-only.
CODE_FIELDSETS = [
    (None, {"fields": ["name", "paradigm_label", "description", "demo_question", "model_profile"]}),
    ("Prompt and tools", {"fields": ["system_prompt", "tools", "params"]}),
    ("Limits", {"fields": ["max_steps", "max_llm_calls", "total_timeout_s", "tool_timeout_s",
                           "token_budget"]}),
]


@admin.register(Guardrail)
class GuardrailAdmin(admin.ModelAdmin):
    list_display = ["name", "stage", "kind", "action", "enabled", "applies_to_all"]
    list_filter = ["stage", "kind", "action", "enabled", "applies_to_all"]
    list_editable = ["enabled"]
    search_fields = ["name", "pattern", "message"]
    autocomplete_fields = ["judge_profile"]
    fieldsets = [
        (None, {"fields": ["name", "enabled", "applies_to_all", "stage", "kind", "action",
                           "message"]}),
        ("What the check needs", {"fields": ["pattern", "limit", "judge_profile"]}),
    ]


def paradigm_label(key: str) -> str:
    """"ReAct", "Plan-and-Execute": what the admin shows of a paradigm's key."""
    from agentlab.paradigms.registry import get_paradigm

    try:
        return get_paradigm(key).label or key
    except KeyError:
        return key


class ParadigmFilter(admin.SimpleListFilter):
    title = "paradigm"
    parameter_name = "paradigm"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        keys = model_admin.get_queryset(request).values_list("paradigm", flat=True).distinct()
        return sorted(((k, paradigm_label(k)) for k in keys), key=lambda kv: kv[1])

    def queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> QuerySet[Agent]:
        return queryset.filter(paradigm=self.value()) if self.value() else queryset


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "paradigm_label", "model_profile", "tool_count", "max_llm_calls",
                    "total_timeout_s", "source"]
    readonly_fields = ["paradigm_label"]  # shown on a code agent's read-only page
    list_filter = [ParadigmFilter, "model_profile"]
    search_fields = ["name", "description"]
    filter_horizontal = ["tools", "guardrails"]
    inlines = [RoleProfileInline]
    form = AgentForm

    class Media:
        js = ["agentlab/agent_admin.js"]  # shows the chosen paradigm's parameter fieldset

    def get_form(self, request: HttpRequest, obj: Agent | None = None, change: bool = False,
                 **kwargs: object) -> type:
        # The parameter fields are the form's own (made per paradigm in AgentForm.__init__),
        # not the model's: the model form is built from the other fields.
        fields = flatten_fieldsets(self.get_fieldsets(request, obj))
        kwargs["fields"] = [f for f in fields if not f.startswith("param__")]
        return super().get_form(request, obj, change, **kwargs)

    # An agent defined in code is changed in its code: its page is read-only, without inlines,
    # and it is deleted only once no agents.py declares it any more.
    def has_change_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        return not (obj and obj.code_ref) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        from agentlab.code_agents.rows import is_declared

        declared = obj is not None and obj.code_ref and is_declared(obj)
        return not declared and super().has_delete_permission(request, obj)

    def get_inlines(self, request: HttpRequest, obj: Agent | None = None) -> list:
        return [] if obj and obj.code_ref else super().get_inlines(request, obj)

    @admin.display(description="paradigm", ordering="paradigm")
    def paradigm_label(self, obj: Agent) -> str:
        return paradigm_label(obj.paradigm)

    @admin.display(description="defined")
    def source(self, obj: Agent) -> str:
        return f"in code at {obj.code_ref}" if obj.code_ref else "in the admin"

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> list:
        if obj and obj.code_ref:
            first, *rest = CODE_FIELDSETS
            note = (f"Defined in code at {obj.code_ref}: change it there (its rows follow on "
                    "migrate, setup, serve and its first call).")
            return [(first[0], {**first[1], "description": note}), *rest]
        return [
            (None, {"fields": ["name", "paradigm", "description", "demo_question",
                               "model_profile"]}),
            ("Prompt and tools", {"fields": ["system_prompt", "tools"]}),
            ("Guardrails", {"fields": ["guardrails"]}),
            *parameter_fieldsets(),
            ("Limits", {"fields": ["max_steps", "max_llm_calls", "total_timeout_s",
                                   "tool_timeout_s", "token_budget"]}),
        ]

    @admin.display(description="tools")
    def tool_count(self, obj: Agent) -> int:
        return obj.tools.count()
