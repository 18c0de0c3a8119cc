"""The warm engine's token on the cluster row, and the editors' permission to write the lab's objects (through the
dashboard, `karp` as a user, or the Kubernetes API): groups made before it existed get it once, here."""

from django.db import migrations, models

KUBEOBJECT = ("add_kubeobject", "change_kubeobject", "delete_kubeobject")


def editors_write_lab_objects(apps, schema_editor):
    group = apps.get_model("auth", "Group").objects.filter(name="editors").first()
    if group is None:
        return  # a new install: the groups are made after migrating, with this permission (services.ROLES)
    # The group was made by an earlier migrate, whose post_migrate also made the kubeobject permissions.
    permissions = apps.get_model("auth", "Permission").objects.filter(
        content_type__app_label="karpui", codename__in=KUBEOBJECT
    )
    group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [("karpui", "0009_trends"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="engine_token",
            field=models.CharField(blank=True, max_length=32),
        ),
        migrations.RunPython(editors_write_lab_objects, migrations.RunPython.noop),
    ]
