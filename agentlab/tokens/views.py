"""The "Access tokens" page: a user's own tokens, making one (shown once), revoking one. Only
ever the visitor's own rows: another user's token is a 404, like a missing one (staff too)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from agentlab.tokens.models import NAME_CHARS, SCOPES, AccessToken, create_token


class TokenForm(forms.Form):
    name = forms.CharField(max_length=NAME_CHARS, help_text="What uses it: a script, a CI job.")
    scope = forms.ChoiceField(choices=SCOPES, initial="ingest")


@require_http_methods(["GET", "POST"])
def index(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    row, secret = None, None
    if request.method == "POST" and form.is_valid():
        try:
            row, secret = create_token(request.user, form.cleaned_data["name"],
                                       form.cleaned_data["scope"])
        except ValidationError as e:
            form.add_error(None, e)
        else:
            form = TokenForm()
    context = {
        "form": form, "secret": secret, "limit": settings.AGENTLAB_MAX_TOKENS,
        "tokens": AccessToken.objects.filter(user=request.user),
        "new_id": row.pk if row else None,
    }
    response = render(request, "tokens/index.html", context,
                      status=400 if form.errors else 200)
    if secret:  # the one page that holds the secret: no-store, no copy in a cache
        add_never_cache_headers(response)
    return response


@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(AccessToken, pk=pk, user=request.user)
    token.revoke()
    messages.success(request, f"Revoked “{token.name}” ({token.shown}).")
    return redirect("tokens:index")
