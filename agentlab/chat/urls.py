from __future__ import annotations

from django.urls import path

from agentlab.chat import views

urlpatterns = [
    path("", views.index, name="chat"),
    path("new/", views.new_conversation, name="chat_new"),
    path("run/", views.start_run, name="chat_run"),
    path("runs/<int:pk>/", views.live_run, name="live_run"),
    path("<int:pk>/", views.conversation, name="chat_conversation"),
    path("<int:pk>/rename/", views.rename, name="chat_rename"),
    path("<int:pk>/delete/", views.delete, name="chat_delete"),
]
