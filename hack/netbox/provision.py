"""Provision users and API tokens in a fresh NetBox database (run by hack/netbox/up.sh).

Runs inside the NetBox venv with NETBOX_ROOT pointing at the instance. Prints
KEY=VALUE lines on stdout:

  NETBOX_TOKEN_V1        v1 token (40 hex chars), write-enabled, superuser
  NETBOX_TOKEN_V2        v2 token "nbt_<key>.<secret>", write-enabled, superuser
  NETBOX_TOKEN_READONLY  v1 token, write_enabled=False, for a non-superuser who only
                         holds a "view" ObjectPermission on ipam/extras/tenancy models
"""

import os
import secrets
import sys

os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'netbox.settings')

import django  # noqa: E402

django.setup()

from django.db import transaction  # noqa: E402

from core.models import ObjectType  # noqa: E402
from users.constants import TOKEN_PREFIX  # noqa: E402
from users.models import ObjectPermission, Token, User  # noqa: E402

admin_name = os.environ.get('NB_ADMIN_USER', 'admin')
admin_password = os.environ['NB_ADMIN_PASSWORD']
ro_name = os.environ.get('NB_RO_USER', 'readonly')


def v1_token(user, write_enabled, description):
    # A v1 token stores its plaintext; supply a classic 40-hex value explicitly (the REST
    # API only generates random alphanumerics and never accepts a client-supplied value).
    token = Token(user=user, version=1, write_enabled=write_enabled, description=description,
                  token=secrets.token_hex(20))
    token.full_clean()
    token.save()
    return token.token


with transaction.atomic():
    admin = User.objects.filter(username=admin_name).first()
    if admin is None:
        admin = User.objects.create_superuser(admin_name, f'{admin_name}@example.invalid', admin_password)
    else:
        admin.is_superuser = True
        admin.set_password(admin_password)
        admin.save()

    ro = User.objects.filter(username=ro_name).first() or User.objects.create_user(
        ro_name, f'{ro_name}@example.invalid', secrets.token_urlsafe(24))
    perm, _ = ObjectPermission.objects.get_or_create(
        name='harness-view-only',
        defaults={'description': 'view ipam/extras/tenancy (hack/netbox/up.sh)', 'actions': ['view']},
    )
    perm.object_types.set(ObjectType.objects.filter(app_label__in=('ipam', 'extras', 'tenancy')))
    ro.object_permissions.add(perm)

    tok_v1 = v1_token(admin, True, 'harness v1 write token')

    v2 = Token(user=admin, version=2, write_enabled=True, description='harness v2 write token')
    v2.full_clean()
    v2.save()
    tok_v2 = f'{TOKEN_PREFIX}{v2.key}.{v2.token}'

    tok_ro = v1_token(ro, False, 'harness v1 read-only token')

print(f'NETBOX_TOKEN_V1={tok_v1}')
print(f'NETBOX_TOKEN_V2={tok_v2}')
print(f'NETBOX_TOKEN_READONLY={tok_ro}')
print(f'provisioned users {admin_name!r} (superuser) and {ro_name!r} (view-only); '
      f'{perm.object_types.count()} object types viewable', file=sys.stderr)
