"""What a user does through the pages, for tests that need the result: import a file through
the runs list's form, follow the redirect a fork, resume or replay answers with."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient
from django.urls import reverse

from traces.models import Run


async def import_(client: AsyncClient, data: bytes) -> Run:
    """Through the runs list's import form, as a user would."""
    response = await client.post(reverse("run_import"),
                                 {"bundle": SimpleUploadedFile("run.json", data)})
    assert response.status_code == 302, response.content[:300]
    pk = int(response["Location"].rstrip("/").rsplit("/", 1)[1])
    run = await Run.objects.aget(pk=pk)
    assert run.agent_id is None and "imported_from" in run.agent_snapshot
    return run


def started(response) -> int:
    """The new run a fork / resume / replay view redirected to."""
    assert response.status_code == 302, response.content.decode()[:2000]
    return int(response["Location"].rstrip("/").rsplit("/", 1)[1])
