# The run status "stopped": stopped by a limit and answered from what was found so far.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("traces", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[("queued", "queued"), ("running", "running"), ("paused", "paused"),
                         ("succeeded", "succeeded"), ("stopped", "stopped"),
                         ("failed", "failed"), ("cancelled", "cancelled"),
                         ("timed_out", "timed out"), ("interrupted", "interrupted")],
                default="queued", max_length=20),
        ),
    ]
