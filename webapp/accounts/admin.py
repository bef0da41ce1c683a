from django.contrib import admin

from webapp.accounts.models import ApiToken
from webapp.model_admin import ModelAdmin


@admin.register(ApiToken)
class ApiTokenAdmin(ModelAdmin):
    list_display = ("user", "name", "created_at", "last_used_at")
    readonly_fields = ("key_digest", "created_at", "last_used_at")
    search_fields = ("user__username", "name")
