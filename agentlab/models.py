"""Configuration rows edited in the admin: model profiles, tools, guardrails, agents (and the
model profile per role), and the outbox of the send_email tool."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from agentlab.llm.keys import key_variable_problem
from agentlab.llm.local_server import CONTEXT_TOKENS as EMBEDDED_CONTEXT_TOKENS
from agentlab.llm.types import DEFAULT_CONTEXT_TOKENS

# Only the *name* of an environment variable is stored; this refuses pasted keys ("sk-…").
env_var_name = RegexValidator(
    r"^[A-Z_][A-Z0-9_]*$",
    "Enter the NAME of an environment variable (e.g. OPENAI_API_KEY), never the key itself.",
)


def key_variable(name: str) -> None:
    """A variable the server runs on (SECRET_KEY, DATABASE_URL…) never holds a profile's key."""
    if problem := key_variable_problem(name):
        raise ValidationError(problem)


class ModelProfile(models.Model):
    """An OpenAI-compatible endpoint + model + sampling and pricing; blank URL = embedded model."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.URLField(
        blank=True,
        help_text="OpenAI-compatible base URL, e.g. https://api.openai.com/v1 or "
        "http://127.0.0.1:11434/v1 (Ollama). Blank = the embedded local model.",
    )
    model = models.CharField(max_length=200, help_text="Model name the endpoint expects.")
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        validators=[env_var_name, key_variable],
        help_text="Name of the environment variable that holds the API key (ending in _API_KEY, "
        "_TOKEN or _KEY). The key itself is never stored.",
    )
    temperature = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    context_tokens = models.PositiveIntegerField(
        "context window (tokens)", null=True, blank=True,
        validators=[MinValueValidator(256)],
        help_text="How many tokens the model reads at most (prompt and reply). Blank: "
        f"{DEFAULT_CONTEXT_TOKENS:,} ({EMBEDDED_CONTEXT_TOKENS:,} for the embedded model).",
    )
    timeout_s = models.FloatField("timeout (s)", default=60, validators=[MinValueValidator(1)])
    retries = models.PositiveSmallIntegerField(
        default=2, help_text="Extra attempts on timeouts, 429 and 5xx, with backoff."
    )
    price_in_per_m = models.DecimalField(
        "price / M input tokens (USD)", max_digits=10, decimal_places=4, default=0
    )
    price_out_per_m = models.DecimalField(
        "price / M output tokens (USD)", max_digits=10, decimal_places=4, default=0
    )
    fallback = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="fallback_for",
        help_text="Tried when this profile's retries are spent.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_embedded(self) -> bool:
        return not self.base_url

    def clean(self) -> None:
        seen = {self.pk}
        node = self.fallback
        while node is not None:
            if node.pk in seen:
                raise ValidationError({"fallback": "Fallback profiles must not form a cycle."})
            seen.add(node.pk)
            node = node.fallback


class OutboxEmail(models.Model):
    """Mail sent by agents (send_email tool) when the outbox backend is in use."""

    sent_at = models.DateTimeField(auto_now_add=True)
    from_email = models.CharField(max_length=254)
    to = models.TextField(help_text="Recipients, one per line.")
    subject = models.CharField(max_length=998)
    body = models.TextField()

    class Meta:
        ordering = ["-sent_at"]
        verbose_name = "outbox e-mail"

    def __str__(self) -> str:
        return f"{self.subject} → {self.to.splitlines()[0] if self.to else '?'}"


def mcp_env_variable(name: str) -> None:
    """Only names the server may hand on (never SECRET_KEY, DATABASE_URL, …)."""
    from agentlab.tools.mcp import env_name_problem

    if name and (problem := env_name_problem(name)):
        raise ValidationError(problem)


class McpServer(models.Model):
    """An MCP server whose tools become Tool rows ("Refresh tools" in the admin)."""

    TRANSPORTS = [("stdio", "stdio (a command the app starts and stops)"),
                  ("http", "streamable HTTP (a URL)")]
    name = models.CharField(max_length=30, unique=True, validators=[RegexValidator(
        r"^[a-z0-9][a-z0-9_-]*$", "Lower-case letters, digits, - and _.")],
        help_text="Tools are named mcp__<name>__<tool>.")
    transport = models.CharField(max_length=10, choices=TRANSPORTS, default="stdio")
    command = models.CharField(max_length=500, blank=True,
                               help_text="stdio: the program (python = this app's Python).")
    args = models.JSONField(default=list, blank=True,
                            help_text='stdio: the arguments, a JSON list, e.g. ["-m", "pkg"].')
    env_names = models.JSONField(
        "environment variable names", default=list, blank=True,
        help_text="stdio: NAMES of variables whose values (from this server's environment) the "
        "process gets, a JSON list. Values are never stored.")
    url = models.URLField(blank=True, help_text="http: the endpoint, e.g. http://host/mcp")
    header_name = models.CharField(max_length=100, blank=True,
                                   help_text="http: a header to send, e.g. Authorization.")
    header_env = models.CharField(
        "header value variable", max_length=100, blank=True,
        validators=[env_var_name, mcp_env_variable],
        help_text="http: NAME of the environment variable that holds the header's value.")
    enabled = models.BooleanField(default=True)
    timeout_s = models.FloatField(
        "timeout (s)", default=30, validators=[MinValueValidator(0.1)],
        help_text="For listing the tools, and the longest one call may take (each tool has its "
        "own timeout too; the shorter one applies).")
    refreshed = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.transport == "stdio" and not self.command:
            raise ValidationError({"command": "A stdio server needs a command."})
        if self.transport == "http" and not self.url:
            raise ValidationError({"url": "A streamable HTTP server needs a URL."})
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            raise ValidationError({"args": "A JSON list of strings."})
        names = self.env_names
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValidationError({"env_names": "A JSON list of variable names."})
        for n in names:
            mcp_env_variable(n)
        if bool(self.header_name) != bool(self.header_env):
            raise ValidationError({"header_env": "Give both the header and its variable."})
        # The header's value is sent to the URL: only a variable the operator allows for keys.
        if problem := key_variable_problem(self.header_env):
            raise ValidationError({"header_env": problem})


class Tool(models.Model):
    """Admin settings of a registered tool; rows are synced from the registry on migrate."""

    name = models.CharField(max_length=100, unique=True, help_text="Registered implementation.")
    enabled = models.BooleanField(default=True)
    description = models.TextField(
        blank=True, help_text="What the LLM sees. Blank = the implementation's docstring."
    )
    timeout_s = models.FloatField("timeout (s)", default=30, validators=[MinValueValidator(0.1)])
    max_observation_chars = models.PositiveIntegerField(
        default=4000, help_text="Longer observations are cut for the LLM (the full value is kept)."
    )
    needs_approval = models.BooleanField(
        default=False, help_text="Pause for a person's approve/deny before every call."
    )
    allowed_groups = models.ManyToManyField(
        "auth.Group", blank=True, help_text="Who may use it. Empty = everyone."
    )
    category = models.CharField(max_length=50, blank=True, editable=False)
    side_effects = models.BooleanField(default=False, editable=False)
    # A tool listed by an MCP server (blank for built-ins): its server, name there and schema.
    mcp_server = models.ForeignKey(McpServer, null=True, blank=True, editable=False,
                                   on_delete=models.CASCADE, related_name="tools")
    mcp_tool = models.CharField(max_length=200, blank=True, editable=False)
    mcp_description = models.TextField(blank=True, editable=False)
    mcp_schema = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["category", "name"]

    def __str__(self) -> str:
        return self.name


class Guardrail(models.Model):
    """A check on a run's question (input) or on its model replies and tool observations
    (output), and what to do when it finds something (docs/GUARDRAILS.md)."""

    STAGES = [("input", "input: the user's question, before the model or the database sees it"),
              ("output", "output: model replies, tool observations, everything recorded")]
    CHECKS = [
        ("pii", "all PII and secrets (e-mail, phone, card, IBAN, API key)"),
        ("email", "e-mail addresses"), ("phone", "phone numbers"),
        ("card", "payment card numbers (Luhn-checked)"), ("iban", "IBANs (mod-97-checked)"),
        ("api_key", "API keys and tokens (sk-…, AKIA…, ghp_…, xoxb-…, AIza…, JWTs, bearer)"),
        ("regex", "deny-list: a regular expression"),
        ("max_length", "maximum length"),
        ("judge", "LLM judge: a model decides against a policy"),
    ]
    ACTIONS = [("block", "block: stop the run with the message"),
               ("redact", "redact: replace what was found with a marker"),
               ("flag", "flag: record a decision, keep the text")]

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    applies_to_all = models.BooleanField(
        "every agent", default=False,
        help_text="The global default: applies to every agent, also those that do not list it.")
    stage = models.CharField(max_length=10, choices=STAGES, default="output")
    kind = models.CharField("check", max_length=20, choices=CHECKS)
    pattern = models.TextField(
        blank=True, help_text="deny-list: the regular expression (case is ignored); judge: the "
        "policy the judge applies, e.g. “The text must not reveal internal prices.”")
    limit = models.PositiveIntegerField(null=True, blank=True,
                                        help_text="maximum length: the most characters.")
    judge_profile = models.ForeignKey(
        ModelProfile, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="judge: the model that decides.")
    action = models.CharField(max_length=10, choices=ACTIONS, default="redact")
    message = models.CharField(
        max_length=500, blank=True,
        help_text="block: what the user is shown (blank: “This was blocked by a guardrail.”).")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["stage", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from agentlab.guardrails.user_regex import UnsafePattern, check_speed

        if self.kind == "regex":
            try:
                check_speed(self.pattern)  # compiles it, then tries it on probe texts
            except UnsafePattern as exc:
                raise ValidationError({"pattern": str(exc)}) from None
        if self.kind == "max_length" and not self.limit:
            raise ValidationError({"limit": "A maximum length needs its limit."})
        if self.kind == "judge":
            if self.judge_profile_id is None:
                raise ValidationError({"judge_profile": "A judge needs its model profile."})
            if not self.pattern.strip():
                raise ValidationError({"pattern": "A judge needs the policy it applies."})
            if self.action == "redact":
                raise ValidationError({"action": "A judge decides about a whole text: it "
                                                 "blocks or flags, it cannot redact."})


class Agent(models.Model):
    """One paradigm with its prompts, tools, models and limits."""

    name = models.CharField(max_length=100, unique=True)
    paradigm = models.CharField(max_length=50, help_text="react, plan_execute, reflexion, …")
    description = models.TextField(blank=True)
    demo_question = models.TextField(
        blank=True, help_text="A question that shows what this agent is for (offered in chat and "
        "compare).")
    system_prompt = models.TextField(blank=True, help_text="Prepended to the paradigm's prompt.")
    model_profile = models.ForeignKey(ModelProfile, on_delete=models.PROTECT, related_name="agents")
    tools = models.ManyToManyField(Tool, blank=True, related_name="agents")
    guardrails = models.ManyToManyField(
        Guardrail, blank=True, related_name="agents",
        help_text="Checks on its questions, replies and tool results (those marked “every "
        "agent” apply as well).")
    max_steps = models.PositiveIntegerField(default=40)
    max_llm_calls = models.PositiveIntegerField(default=25)
    total_timeout_s = models.FloatField("total timeout (s)", default=120)
    tool_timeout_s = models.FloatField("tool timeout (s)", default=30)
    token_budget = models.PositiveIntegerField(null=True, blank=True)
    params = models.JSONField(
        default=dict, blank=True, help_text="Paradigm parameters; defaults are filled in on save."
    )
    # "path:line" of an @agent declaration (agentlab.code_agents); blank: made in the admin.
    code_ref = models.CharField("defined in code at", max_length=500, blank=True,
                                editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from agentlab.paradigms.registry import get_paradigm, validate_params

        try:
            get_paradigm(self.paradigm)
        except KeyError as exc:
            raise ValidationError({"paradigm": str(exc.args[0])}) from None
        try:
            self.params = validate_params(self.paradigm, self.params or {})
        except ValueError as exc:
            raise ValidationError({"params": str(exc)}) from None
        # Multi-Agent members may name other agents: they must exist and not be this one.
        names = {m["agent"] for m in self.params.get("members", [])
                 if isinstance(m, dict) and m.get("agent")}
        if self.name in names:
            raise ValidationError({"params": f"a member cannot be the agent itself ({self.name})"})
        if missing := names - set(Agent.objects.filter(name__in=names)
                                  .values_list("name", flat=True)):
            raise ValidationError(
                {"params": f"members name agents that do not exist: {', '.join(sorted(missing))}"})


class AgentRoleProfile(models.Model):
    """A model profile for one role of an agent (planner, executor, evaluator, judge, …)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="role_profiles")
    role = models.CharField(max_length=50)
    profile = models.ForeignKey(ModelProfile, on_delete=models.PROTECT)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "role"], name="unique_agent_role")]

    def __str__(self) -> str:
        return f"{self.role}: {self.profile}"
