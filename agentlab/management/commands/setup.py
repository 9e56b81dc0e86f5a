"""`manage.py setup`: migrate, load the default data, create an admin user once."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Migrate the database, load default data and create the first admin user."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        self.stdout.write("• Migrating the database…")
        call_command("migrate", interactive=False, verbosity=0)
        from agentlab.defaults import load_defaults

        created = load_defaults()
        self.stdout.write(f"• Default data: {', '.join(created) if created else 'already there'}")
        from agentlab.code_agents.rows import sync_all

        synced, problems = sync_all()  # now that the embedded profile exists
        if synced:
            self.stdout.write(f"• Agents defined in code: {', '.join(synced)}")
        for problem in problems:
            self.stdout.write(self.style.WARNING(f"• Agent defined in code not synced: {problem}"))
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write("• Admin user: already there")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(
            self.style.SUCCESS(
                f"• Admin user created — username: {username}  password: {password}\n"
                "  (shown once; change it with `manage.py changepassword "
                f"{username}`)"
            )
        )
