"""The viewer and operator groups exist in every database (roles are checked by group name)."""
from django.db import migrations


def create_groups(apps, schema_editor) -> None:
    group = apps.get_model("auth", "Group")
    for name in ("viewer", "operator"):
        group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
