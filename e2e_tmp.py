import os, time, tempfile
from pathlib import Path
from tests.support.s3_server import S3Server
from tests.oracle import hudi_read, rows_by_key
with S3Server() as s3:
    os.environ.update(s3.env())
    s3.make_bucket("lake")
    from engine import Table
    from tests.support.tables import day_file
    tmp = Path(tempfile.mkdtemp())
    t = Table.create("s3://lake/t", name="t", record_keys=["id"], ordering_field="seq", event_time_field="ts",
                     settings={"hoodie.bucket.index.num.buckets": "1"})
    print(t.path)
    for i, day in enumerate(("01","02","03")):
        print(t.write(day_file(tmp, i, day)).instant)
    print(t.read("snapshot", local=True))
    print(rows_by_key(hudi_read("s3://lake/t", storage_options=s3.storage_options())))
    s3.reset_counts()
    plan = t.schedule_compaction(threshold="2024-01-02T12:00:00Z")
    c = s3.counts()
    print("plan", plan.instant, len(c), [ (x['method'], x['path'][-40:], x['range'], x['query'][:30]) for x in c])
    s3.reset_counts()
    res = t.run_compaction(plan.instant)
    c = s3.counts()
    print("run", len(c), [ (x['method'], x['path'][-40:], x['range'], x['copy_source'][-30:]) for x in c])
    print(res)
    print(rows_by_key(hudi_read("s3://lake/t", storage_options=s3.storage_options())))
    print(rows_by_key(hudi_read("s3://lake/t", "read_optimized", storage_options=s3.storage_options())))
