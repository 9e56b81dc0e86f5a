"""The queue of runs on workers (procrastinate's tables, functions and types), on PostgreSQL.

procrastinate ships its schema as one SQL file; it is applied here so that `migrate` (and the
test database) has it wherever runs may go to workers. SQLite (the embedded profile, runs in
the web process) gets nothing. Reversing drops what the schema created.
"""

from django.db import migrations


def apply_schema(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from procrastinate.schema import SchemaManager

    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('procrastinate_jobs')")
        if cursor.fetchone()[0] is None:  # a database set up by procrastinate itself keeps it
            cursor.execute(SchemaManager.get_schema())


def drop_schema(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers,"
                       " procrastinate_jobs, procrastinate_workers CASCADE")


class Migration(migrations.Migration):

    dependencies = [
        ('agentlab', '0006_guardrails'),
    ]

    operations = [migrations.RunPython(apply_schema, drop_schema)]
