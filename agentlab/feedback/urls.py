from __future__ import annotations

from django.urls import path

from agentlab.feedback import views

app_name = "feedback"
# <seq>: 0 is the run as a whole, N its step N.
urlpatterns = [
    path("runs/<int:pk>/<int:seq>/", views.strip_view, name="strip"),
    path("runs/<int:pk>/<int:seq>/give/", views.give, name="form"),
    path("runs/<int:pk>/<int:seq>/thumbs/", views.thumbs, name="thumbs"),
    path("<int:pk>/edit/", views.edit, name="edit"),
    path("<int:pk>/delete/", views.delete, name="delete"),
]
