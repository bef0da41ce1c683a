"""`ModelAdmin` with the type argument django-stubs expects, for the apps' admin classes.

Django's ModelAdmin is generic only in django-stubs; at runtime it takes no type argument (django_stubs_ext
would patch one in, but it is a test-only dependency), so the subscripted form is seen by the type checker alone.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin

if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin[Any]
else:
    ModelAdmin = admin.ModelAdmin
