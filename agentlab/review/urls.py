from __future__ import annotations

from django.urls import path

from agentlab.review import manage_views, views

app_name = "review"
urlpatterns = [
    path("", views.index, name="index"),
    path("new/", manage_views.new, name="new"),
    path("fill/", manage_views.fill_view, name="fill"),
    path("pair/", manage_views.send_pair, name="send_pair"),
    path("<int:pk>/", views.queue_page, name="queue"),
    path("<int:pk>/edit/", manage_views.edit, name="edit"),
    path("<int:pk>/rules/", manage_views.rule_add, name="rule_add"),
    path("<int:pk>/rules/<int:rule>/delete/", manage_views.rule_delete, name="rule_delete"),
    path("<int:pk>/work/", views.work, name="work"),
    path("<int:pk>/items/<int:item>/", views.item_page, name="item"),
    path("<int:pk>/items/<int:item>/answer/", views.submit, name="answer"),
    path("<int:pk>/items/<int:item>/skip/", views.skip, name="skip"),
    # A step's folded parts on the review page (the run through an item the visitor sees).
    path("runs/<int:pk>/steps/<int:seq>/payload/<str:field>/", views.step_payload,
         name="step_payload"),
    path("runs/<int:pk>/steps/<int:seq>/messages/", views.step_messages, name="step_messages"),
]
