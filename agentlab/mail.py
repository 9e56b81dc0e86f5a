"""An e-mail backend that keeps messages in the database outbox, shown in the admin."""

from __future__ import annotations

from collections.abc import Sequence

from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend


class OutboxBackend(BaseEmailBackend):
    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        from agentlab.models import OutboxEmail

        for message in email_messages:
            OutboxEmail.objects.create(
                from_email=message.from_email,
                to="\n".join(message.to + message.cc + message.bcc),
                subject=message.subject,
                body=message.body,
            )
        return len(email_messages)
