from django.contrib import admin
from django.http import HttpRequest

from webapp.model_admin import ModelAdmin
from webapp.tables.models import AuditEvent, MetricSample, RegisteredTable, Run, TableLease


@admin.register(RegisteredTable)
class RegisteredTableAdmin(ModelAdmin):
    list_display = ("name", "path", "schedule_minutes", "data_latency", "freshness_sla_minutes", "carry_over",
                    "exact", "created_at", "created_by")
    search_fields = ("name", "path")


@admin.register(Run)
class RunAdmin(ModelAdmin):
    list_display = ("id", "table", "kind", "state", "instant", "trigger", "requested_by", "queued_at",
                    "finished_at", "refusal_reason")
    list_filter = ("state", "kind", "trigger", "table")
    search_fields = ("instant", "table__name", "requested_by__username")
    date_hierarchy = "queued_at"


@admin.register(MetricSample)
class MetricSampleAdmin(ModelAdmin):
    list_display = ("table", "taken_at", "ro_completion_time", "freshness_lag_seconds", "remaining_log_files",
                    "remaining_log_bytes", "file_slices_with_logs", "pending_compactions", "sla_breached")
    list_filter = ("table", "sla_breached")
    date_hierarchy = "taken_at"


@admin.register(AuditEvent)
class AuditEventAdmin(ModelAdmin):
    list_display = ("at", "actor", "action", "table", "run", "outcome")
    list_filter = ("action", "outcome", "table")
    search_fields = ("actor", "action")
    date_hierarchy = "at"

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False  # the audit trail is append-only

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False


@admin.register(TableLease)
class TableLeaseAdmin(ModelAdmin):
    list_display = ("location", "table", "owner", "acquired_at", "heartbeat_at", "expires_at")
