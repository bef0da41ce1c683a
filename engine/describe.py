"""`tidemark show`: the table as its timeline and file-system view see it (no data decoded)."""
from __future__ import annotations

from engine.eventtime import iso
from engine.fsview import FileSystemView
from engine.logformat import scan_log_file
from engine.properties import load_table_config
from engine.timeline import Timeline


def describe_table(base_path: str) -> dict:
    cfg = load_table_config(base_path)
    timeline = Timeline.load(base_path)
    view = FileSystemView(base_path, timeline)
    committed = view.committed_instants
    groups = []
    for group in view.file_groups():
        groups.append({
            "partition": group.partition_path,
            "file_id": group.file_id,
            "slices": [_slice(sl, committed) for sl in group.slices],
        })
    return {
        "table": cfg.name,
        "path": base_path,
        "table_version": cfg.version,
        "record_key": cfg.record_key_fields,
        "partition_fields": cfg.partition_fields,
        "ordering_field": cfg.ordering_field,
        "event_time_field": cfg.event_time_field,
        "merge_mode": cfg.merge_mode,
        "timeline": [{"instant": i.timestamp, "action": i.action, "state": i.state.name.lower()}
                     for i in timeline.instants],
        "file_groups": groups,
    }


def _slice(sl, committed: set[str]) -> dict:
    logs = []
    for lf in sl.log_files:
        scan = scan_log_file(lf.path)
        mins = [b.min_event_time for b in scan.blocks if b.min_event_time is not None and b.instant_time in committed]
        logs.append({"name": lf.name, "size": lf.size, "blocks": len(scan.blocks), "corrupt_blocks": len(scan.corrupt),
                     "min_event_time": iso(min(mins)) if mins else None,
                     "instants": sorted({b.instant_time for b in scan.blocks if b.instant_time})})
    return {"base_instant": sl.base_instant,
            "base_file": sl.base_file.name if sl.base_file else None,
            "log_files": logs}


def render_table_description(d: dict) -> str:
    lines = [f"table {d['table']} (v{d['table_version']}, {d['merge_mode']}) at {d['path']}",
             f"  record key {','.join(d['record_key'])}; partitions {','.join(d['partition_fields']) or '-'}; "
             f"ordering {d['ordering_field']}; event time {d['event_time_field']}", "timeline:"]
    lines += [f"  {i['instant']} {i['action']:<13} {i['state']}" for i in d["timeline"]]
    lines.append("file groups:")
    for g in d["file_groups"]:
        lines.append(f"  {g['partition'] or '(root)'} / {g['file_id']}")
        for s in g["slices"]:
            lines.append(f"    slice {s['base_instant']}: base {s['base_file'] or '-'}")
            for lf in s["log_files"]:
                lines.append(f"      {lf['name']}  {lf['size']} B  {lf['blocks']} blocks  min event time "
                             f"{lf['min_event_time']}")
    return "\n".join(lines)
