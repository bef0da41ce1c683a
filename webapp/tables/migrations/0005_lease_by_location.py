"""Leases are keyed by the table's canonical location (tasks.location), no longer by registration."""
import os

import django.db.models.deletion
from django.db import migrations, models


def fill_locations(apps, schema_editor):
    # Leases are transient: a row whose location another row already claims (two registrations of one
    # path) is dropped; workers are stopped during an upgrade, so no live lease is lost.
    TableLease = apps.get_model("tables", "TableLease")
    seen = set()
    for row in TableLease.objects.select_related("table").order_by("-expires_at"):
        location = os.path.realpath(row.table.path) if row.table_id else f"orphan:{row.pk}"
        if location in seen:
            row.delete()
            continue
        seen.add(location)
        row.location = location
        row.save(update_fields=["location"])


class Migration(migrations.Migration):

    dependencies = [
        ('tables', '0004_operator_controls'),
    ]

    operations = [
        migrations.AddField(
            model_name='tablelease',
            name='location',
            field=models.CharField(max_length=1000, null=True),
        ),
        migrations.AlterField(
            model_name='tablelease',
            name='table',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name='leases', to='tables.registeredtable'),
        ),
        migrations.RunPython(fill_locations, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='tablelease',
            name='location',
            field=models.CharField(max_length=1000, unique=True),
        ),
    ]
