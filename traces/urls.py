from __future__ import annotations

from django.urls import path

from traces import views

urlpatterns = [
    path("", views.run_list, name="runs"),
    path("import/", views.run_import, name="run_import"),
    path("otel/", views.otel_status, name="otel_status"),
    path("diff/", views.run_diff, name="run_diff"),
    path("graphs/", views.run_graphs, name="run_graphs"),
    path("<int:pk>/", views.run_detail, name="run"),
    path("<int:pk>/steps/", views.run_steps, name="run_steps"),
    path("<int:pk>/find/", views.run_find, name="run_find"),
    path("<int:pk>/timeline/", views.run_timeline, name="run_timeline"),
    path("<int:pk>/graph/", views.run_graph_page, name="run_graph"),
    path("<int:pk>/graph/step/<int:seq>/", views.run_graph_step, name="run_graph_step"),
    path("<int:pk>/steps/<int:seq>/payload/<str:field>/", views.step_payload,
         name="step_payload"),
    path("<int:pk>/steps/<int:seq>/messages/", views.step_messages, name="step_messages"),
    path("<int:pk>/export/", views.run_export, name="run_export"),
    path("<int:pk>/export/otlp/", views.run_export_otlp, name="run_export_otlp"),
    path("<int:pk>/export/otlp.pb", views.run_export_otlp_protobuf,
         name="run_export_otlp_protobuf"),
]
