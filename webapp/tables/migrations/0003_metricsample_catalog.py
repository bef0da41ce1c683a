from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tables', '0002_metricsample_corrupt_log_blocks'),
    ]

    operations = [
        migrations.AddField(
            model_name='metricsample',
            name='catalog',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
