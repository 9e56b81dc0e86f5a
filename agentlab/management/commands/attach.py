"""`manage.py attach [options] -- python my_agent.py "question"`: run your own program with
Agent Lab's gateway in front of its model (docs/GATEWAY.md "manage.py attach").

It talks to a running server over HTTP with a personal access token of scope `gateway`
(agentlab/gateway/launcher.py), like any outside client: record a run, replay one from its
record (`--replay RUN`), fork one at a step with an edit (`--fork RUN --at SEQ --observation
TEXT | --response TEXT`), hold it at breakpoints (`--break-tool NAME`, `--step`), or serve the
replays and forks asked for from run pages (`--serve -- python my_agent.py {question}`).
The program's output is its own; the launcher's lines go to stderr; the exit status is the
program's.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentlab.gateway import launcher, runner

NAME_CHARS = 200


class Command(BaseCommand):
    help = ("Run a program with the gateway in front of its model: record, replay, fork, "
            "breakpoints; or serve the run pages' replays and forks (--serve).")
    requires_system_checks: list[str] = []  # a client: it needs no database of its own

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--server", default=os.environ.get("AGENTLAB_SERVER",
                                                                launcher.DEFAULT_SERVER),
                            help="the Agent Lab server (default: $AGENTLAB_SERVER or "
                                 f"{launcher.DEFAULT_SERVER})")
        parser.add_argument("--token", default=os.environ.get("AGENTLAB_TOKEN", ""),
                            help="a token of scope gateway (default: $AGENTLAB_TOKEN)")
        parser.add_argument("--replay", type=int, metavar="RUN",
                            help="answer the program's model calls from run RUN's record")
        parser.add_argument("--on-divergence", choices=["live", "stop"], default="live",
                            help="where the program leaves the record: go on live or stop")
        parser.add_argument("--fork", type=int, metavar="RUN", help="fork run RUN at --at")
        parser.add_argument("--at", type=int, metavar="SEQ", help="the step the fork edits")
        edit = parser.add_mutually_exclusive_group()
        edit.add_argument("--observation", help="the tool result step SEQ returns instead")
        edit.add_argument("--response", help="the model's reply at step SEQ instead (text)")
        parser.add_argument("--tool-calls", metavar="JSON",
                            help='with --response: the tool calls of the written reply, '
                                 '[{"name": "…", "arguments": {…}}]')
        parser.add_argument("--break-tool", action="append", default=[], metavar="NAME",
                            help="hold the run before the result of tool NAME (repeatable)")
        parser.add_argument("--step", action="store_true",
                            help="step mode: hold before every model call and tool result")
        parser.add_argument("--serve", action="store_true",
                            help="take the replays and forks asked for from run pages, one at "
                                 "a time, until Ctrl-C; {question} in the command is the "
                                 "run's question")
        parser.add_argument("program", nargs="*",
                            help='after --: the program and its arguments')

    def handle(self, *args: Any, **options: Any) -> None:
        program: list[str] = options["program"]
        if not program:
            raise CommandError('give the program after --: attach -- python my_agent.py "…"')
        if not options["token"]:
            raise CommandError("no token: pass --token or set AGENTLAB_TOKEN (make one with "
                               "`manage.py token create USERNAME --scope gateway`)")
        server = launcher.Server(options["server"], options["token"])
        try:
            if options["serve"]:
                if options["replay"] is not None or options["fork"] is not None:
                    raise CommandError("--serve takes its replays and forks from the run "
                                       "pages: no --replay or --fork with it")
                code = runner.serve(server, program, sys.stderr)
            else:
                code = launcher.attach(server, program, self.fields(program, options),
                                       sys.stderr)
        except launcher.LaunchError as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            code = 130
        raise SystemExit(code)

    def fields(self, program: list[str], options: dict[str, Any]) -> dict[str, Any]:
        fork, at = options["fork"], options["at"]
        if fork is not None and options["replay"] is not None:
            raise CommandError("either --replay or --fork, not both")
        if fork is not None and at is None:
            raise CommandError("--fork needs --at SEQ, the step it edits")
        if fork is None and (at is not None or options["observation"] is not None
                             or options["response"] is not None or options["tool_calls"]):
            raise CommandError("--at, --observation, --response and --tool-calls go with "
                               "--fork RUN")
        return launcher.session_fields(
            name=shlex.join(program)[:NAME_CHARS], replay=options["replay"], fork=fork, at=at,
            observation=options["observation"], response=options["response"],
            tool_calls=self.tool_calls(options),
            on_divergence=options["on_divergence"], break_tools=options["break_tool"],
            step=options["step"])

    def tool_calls(self, options: dict[str, Any]) -> list[Any] | None:
        raw = options["tool_calls"]
        if raw is None:
            return None
        if options["response"] is None and options["observation"] is not None:
            raise CommandError("--tool-calls goes with --response (a reply), not --observation")
        try:
            calls = json.loads(raw)
        except ValueError as exc:
            raise CommandError(f"--tool-calls is not JSON: {exc}") from None
        if not isinstance(calls, list):
            raise CommandError('--tool-calls is a list: [{"name": "…", "arguments": {…}}]')
        return calls
