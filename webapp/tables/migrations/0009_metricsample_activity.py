from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tables', '0008_table_version'),
    ]

    operations = [
        migrations.AddField(
            model_name='metricsample',
            name='activity',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
