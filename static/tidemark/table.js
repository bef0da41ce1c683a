// Table page: charts from the embedded samples, plan preview through the JSON API, live run progress.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("chart-data").textContent);
  const css = getComputedStyle(document.documentElement);
  const color = (name) => css.getPropertyValue(name).trim();
  const timeAxis = { type: "time", grid: { display: false }, ticks: { maxRotation: 0, autoSkipPadding: 16 },
    time: { tooltipFormat: "yyyy-MM-dd HH:mm:ss", minUnit: "second",
      displayFormats: { second: "MMM d HH:mm:ss", minute: "MMM d HH:mm", hour: "MMM d HH:mm", day: "MMM d" } } };
  // Binary units as the pages' filesize filter prints them: "1.5 KiB", "0.99 MiB", never four digits.
  const size = (n) => {
    let v = Number(n) || 0;
    for (const unit of ["B", "KiB", "MiB", "GiB", "TiB"]) {
      if (Math.abs(v) < 1000 || unit === "TiB") return unit === "B" ? v.toFixed(0) + " B" : v.toFixed(Math.abs(v) < 1 ? 2 : 1) + " " + unit;
      v /= 1024;
    }
    return v.toFixed(1) + " TiB";
  };
  // Vertical markers (as chartjs-plugin-annotation draws them, without that dependency): a chart's
  // options.plugins.verticalMarkers = { markers: [{ x: ISO time, label, color }] } draws a dashed line at
  // each time inside the x range, labelled at the top.
  const verticalMarkers = {
    id: "verticalMarkers",
    afterDatasetsDraw(chart, _args, opts) {
      const x = chart.scales.x;
      const area = chart.chartArea;
      if (!x || !opts || !opts.markers) return;
      const ctx = chart.ctx;
      ctx.save();
      for (const m of opts.markers) {
        const at = x.getPixelForValue(Date.parse(m.x));
        if (!(at >= area.left && at <= area.right)) continue;
        ctx.strokeStyle = m.color;
        ctx.lineWidth = 1.5;
        ctx.setLineDash([5, 4]);
        ctx.beginPath();
        ctx.moveTo(at, area.top);
        ctx.lineTo(at, area.bottom);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = m.color;
        ctx.font = "11px " + (css.getPropertyValue("--font").trim() || "system-ui");
        ctx.textAlign = at > area.right - 60 ? "right" : "left";
        ctx.fillText(m.label, at + (ctx.textAlign === "left" ? 4 : -4), area.top + 11);
      }
      ctx.restore();
    },
  };
  Chart.register(verticalMarkers);
  Chart.defaults.font.family = css.getPropertyValue("--font").trim() || "system-ui";
  Chart.defaults.color = color("--muted");
  Chart.defaults.maintainAspectRatio = false;

  function emptyNote(canvas, text) {
    const note = document.createElement("p");
    note.className = "empty";
    note.textContent = text;
    canvas.parentElement.replaceChildren(note);
  }

  // ---- backlog and freshness lag over time --------------------------------------------------
  const series = data.series;
  const backlogCanvas = document.getElementById("backlog-chart");
  const lagCanvas = document.getElementById("lag-chart");
  if (series.length === 0) {
    emptyNote(backlogCanvas, "No metric samples yet.");
    emptyNote(lagCanvas, "No metric samples yet.");
  } else {
    const points = (key, scale) => series.map((s) => ({ x: s.t, y: s[key] === null ? null : s[key] / (scale || 1) }));
    // Completed compactions as markers on both charts (triangles on the time axis).
    const first = series[0].t;
    const markers = (data.compactions || []).filter((c) => c.t >= first);
    // Rollbacks: the backlog comes back and "complete up to" moves back, so each is marked where it happened.
    const rollbacks = { markers: (data.rollbacks || []).filter((r) => r.t >= first)
      .map((r) => ({ x: r.t, label: "rollback " + r.instant, color: color("--bad") })) };
    const markerSet = (axis) => ({ label: "compaction", data: markers.map((c) => ({ x: c.t, y: 0 })), yAxisID: axis,
      showLine: false, pointStyle: "triangle", pointRadius: 7, pointHoverRadius: 9, borderColor: color("--ok"),
      backgroundColor: color("--ok"), instants: markers.map((c) => c.instant) });
    new Chart(backlogCanvas, {
      type: "line",
      data: { datasets: [
        { label: "log files", data: points("files"), borderColor: color("--accent"), yAxisID: "count", stepped: true },
        { label: "slices with logs", data: points("slices"), borderColor: color("--info"), yAxisID: "count", stepped: true },
        { label: "log MiB", data: points("bytes", 1048576), borderColor: color("--warn"), yAxisID: "bytes",
          borderDash: [4, 3], stepped: true },
        markerSet("count"),
      ] },
      options: { parsing: true, pointRadius: series.length > 60 ? 0 : 2, interaction: { mode: "index", intersect: false },
        plugins: { verticalMarkers: rollbacks },
        scales: { x: timeAxis, count: { beginAtZero: true, position: "left", title: { display: true, text: "count" } },
                  bytes: { beginAtZero: true, position: "right", grid: { display: false }, title: { display: true, text: "MiB" } } } },
    });
    const lagSets = [{ label: "freshness lag (h)", data: points("lag", 3600), borderColor: color("--accent"),
      backgroundColor: color("--accent-soft"), fill: true, stepped: true }, markerSet("y")];
    if (data.sla_seconds) {
      lagSets.push({ label: "SLA", data: [{ x: series[0].t, y: data.sla_seconds / 3600 },
        { x: series[series.length - 1].t, y: data.sla_seconds / 3600 }], borderColor: color("--bad"),
        borderDash: [6, 4], pointRadius: 0, fill: false });
    }
    new Chart(lagCanvas, { type: "line", data: { datasets: lagSets },
      options: { pointRadius: series.length > 60 ? 0 : 2, interaction: { mode: "index", intersect: false },
        plugins: { verticalMarkers: rollbacks },
        scales: { x: timeAxis, y: { beginAtZero: true, title: { display: true, text: "hours" } } } } });
  }

  // ---- compaction trends: duration, bytes rewritten, cost (core-seconds) per completed compaction ------
  const trendCanvas = document.getElementById("trend-chart");
  const trends = data.trends || [];
  if (trendCanvas && trends.length === 0) {
    emptyNote(trendCanvas, "No completed compaction yet.");
  } else if (trendCanvas) {
    const at = (key, scale) => trends.map((p) => ({ x: p.t, y: p[key] === null ? null : p[key] / (scale || 1) }));
    new Chart(trendCanvas, {
      type: "line",
      data: { datasets: [
        { label: "duration (s)", data: at("seconds"), borderColor: color("--accent"), yAxisID: "seconds", order: 1 },
        // bars, drawn behind the lines: visible even where the cost equals the duration (a one-core run)
        { type: "bar", label: "cost (core-seconds)", data: at("core_seconds"), backgroundColor: color("--warn-bg"),
          borderColor: color("--warn"), borderWidth: 1, yAxisID: "seconds", order: 2, maxBarThickness: 18 },
        { label: "rewritten (MiB)", data: at("bytes", 1048576), borderColor: color("--info"), yAxisID: "bytes", order: 0,
          borderDash: [5, 3] },
      ] },
      options: { pointRadius: trends.length > 60 ? 0 : 3, interaction: { mode: "index", intersect: false },
        plugins: { tooltip: { callbacks: { footer: (items) => "run #" + trends[items[0].dataIndex].run } } },
        scales: { x: timeAxis, seconds: { beginAtZero: true, position: "left", title: { display: true, text: "seconds" } },
                  bytes: { beginAtZero: true, position: "right", grid: { display: false }, title: { display: true, text: "MiB" } } } },
    });
  }

  // Empty buckets are absent from the engine's tide; fill them with zeros so bars keep their width and
  // gaps in event time stay visible.
  function contiguous(unsorted) {
    const known = [...unsorted].sort((a, b) => Date.parse(a.start) - Date.parse(b.start));
    if (known.length < 2) return known;
    const width = Date.parse(known[0].end) - Date.parse(known[0].start);
    const at = new Map(known.map((b) => [Date.parse(b.start), b]));
    const first = Date.parse(known[0].start);
    const last = Date.parse(known[known.length - 1].start);
    if (!(width > 0) || (last - first) / width > 5000) return known;
    const out = [];
    for (let t = first; t <= last; t += width) {
      out.push(at.get(t) || { start: new Date(t).toISOString(), end: new Date(t + width).toISOString(),
        log_files: 0, log_records: 0, log_bytes: 0 });
    }
    return out;
  }

  // ---- tide: log records (or bytes, when no write stat counts records) per event-time bucket ------
  const tideCanvas = document.getElementById("tide-chart");
  const buckets = contiguous((data.tide || []).filter((b) => b.start && b.end));
  const byRecords = buckets.some((b) => b.log_records !== null && b.log_records !== undefined);
  let tide = null;
  function tideColors(threshold) {
    const cut = threshold ? Date.parse(threshold) : null;
    return buckets.map((b) => (cut !== null && Date.parse(b.end) <= cut ? color("--accent") : color("--info-soft")));
  }
  if (buckets.length === 0) {
    emptyNote(tideCanvas, "No log backlog with a known event time: every record is in base files.");
  } else {
    tide = new Chart(tideCanvas, {
      type: "bar",
      data: { datasets: [{ label: byRecords ? "records in logs" : "MiB in logs",
        data: buckets.map((b) => ({ x: b.start, y: byRecords ? b.log_records : b.log_bytes / 1048576 })),
        backgroundColor: tideColors(null), barPercentage: 1.0, categoryPercentage: 0.95 }] },
      options: { plugins: { legend: { display: false }, tooltip: { callbacks: {
          title: (items) => { const b = buckets[items[0].dataIndex]; return b.start.slice(0, 16).replace("T", " ") + " → " + b.end.slice(0, 16).replace("T", " "); },
          afterLabel: (item) => { const b = buckets[item.dataIndex]; return b.log_files + " log files, " + size(b.log_bytes); } } } },
        scales: { x: { ...timeAxis, offset: true }, y: { beginAtZero: true, title: { display: true, text: byRecords ? "records" : "MiB" } } } },
    });
  }
  function markThreshold(threshold) {
    if (!tide) return;
    tide.data.datasets[0].backgroundColor = tideColors(threshold);
    tide.update();
  }

  // ---- preview ---------------------------------------------------------------------------------
  const form = document.getElementById("trigger-form");
  const previewBox = document.getElementById("preview");
  const csrf = () => (document.querySelector("[name=csrfmiddlewaretoken]") || {}).value;
  const logs = (count, bytes) => count + " log" + (count === 1 ? "" : "s") + '<span class="sub">' + size(bytes) + "</span>";
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

  async function preview() {
    const body = {};
    for (const field of ["threshold", "data_latency", "carry_over", "exact"]) {
      const value = form.elements[field].value.trim();
      if (value) body[field] = field === "exact" ? value === "true" : value;
    }
    if (form.elements.confirm_future.checked) body.confirm_future = true;
    previewBox.hidden = false;
    previewBox.innerHTML = '<p class="sub">Planning (dry run, writes nothing)…</p>';
    const response = await fetch(form.dataset.previewUrl, { method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() }, body: JSON.stringify(body) });
    const answer = await response.json();
    if (!response.ok) {
      // The same validation as the form: a far-future T asks for the confirmation box.
      if (answer.needs === "confirm_future") document.getElementById("confirm-future-label").hidden = false;
      previewBox.innerHTML = '<p class="msg error">' + esc(answer.error || response.statusText) + "</p>";
      return;
    }
    renderPreview(answer);
  }

  function renderPreview(answer) {
    const plan = answer.plan;
    const rows = answer.partitions;
    const total = rows.reduce((t, r) => ({ lc: t.lc + r.logs_compacted, lk: t.lk + r.logs_carried,
      bc: t.bc + r.bytes_compacted, bk: t.bk + r.bytes_carried }), { lc: 0, lk: 0, bc: 0, bk: 0 });
    // Three columns fit the side card: per partition what the plan folds and what it carries over.
    const body = rows.map((r) => '<tr><td class="mono part" title="' + esc(r.partition || "(unpartitioned)") + '">' +
      esc(r.partition || "(unpartitioned)") + '</td><td class="num">' + logs(r.logs_compacted, r.bytes_compacted) +
      '</td><td class="num">' + logs(r.logs_carried, r.bytes_carried) + "</td></tr>").join("");
    previewBox.innerHTML =
      '<div class="preview-head"><div><span class="label">Threshold T</span><span class="mono">' + esc(plan.threshold || "—") +
      '</span></div><div><span class="label">Publishes “complete up to” at least</span><span class="mono strong" id="preview-completion">' +
      esc(plan.projected_ro_completion_time || "—") + "</span></div></div>" +
      (rows.length === 0 ? '<p class="empty">' + esc(plan.message || "Nothing to compact at this threshold.") + "</p>" :
      '<table class="grid compact" id="preview-table"><colgroup><col class="part"><col><col></colgroup><thead><tr>' +
      '<th>Partition</th><th class="num">Compacted</th><th class="num">Carried over</th></tr></thead><tbody>' + body +
      '</tbody><tfoot><tr><th>' + plan.operations.length + ' file group' + (plan.operations.length === 1 ? "" : "s") +
      '</th><th class="num">' + logs(total.lc, total.bc) + '</th><th class="num">' + logs(total.lk, total.bk) +
      "</th></tr></tfoot></table>") +
      '<p class="sub">carry-over: ' + esc(plan.carry_over || "") + (plan.exact ? " · exact" : "") + "</p>";
    markThreshold(plan.threshold);
  }

  if (form) {
    document.getElementById("preview-button").addEventListener("click", () => preview().catch((e) => {
      previewBox.hidden = false;
      previewBox.innerHTML = '<p class="msg error">Preview failed: ' + esc(e) + "</p>";
    }));
    form.elements.threshold.addEventListener("change", () => markThreshold(form.elements.threshold.value || null));
  }

  // ---- live progress ---------------------------------------------------------------------------
  const box = document.getElementById("progress");
  const el = (id) => document.getElementById(id);

  async function poll() {
    const response = await fetch(box.dataset.runUrl, { credentials: "same-origin" });
    if (!response.ok) return setTimeout(poll, 3000);
    const run = await response.json();
    // Words and classes come shaped by the server (webapp.tables.status.run_dict: kind_label, state_class,
    // bar_class, progress_text, detail), as the server-rendered pages show them; only the width is computed here.
    el("progress-kind").textContent = run.kind_label;
    el("progress-state").textContent = run.state;
    el("progress-state").className = "badge " + run.state_class;
    const p = run.progress;
    const pct = p.total ? Math.round((100 * p.done) / p.total) : (run.final ? 100 : 0);
    el("progress-bar").style.width = pct + "%";
    el("progress-bar").className = run.bar_class;
    el("progress-text").textContent = run.progress_text;
    el("progress-detail").textContent = run.detail;
    if (!run.final) return setTimeout(poll, 1000);
    if (el("cancel-form")) el("cancel-form").remove();
    // "queued as run #N" must not sit above a refusal or a failure.
    if (run.bar_class !== "ok") document.querySelectorAll(".messages .msg.success").forEach((m) => m.remove());
    if (!reloaded) showFinished();
  }

  // The worker records a run's outcome and the table's new sample in one transaction: once the run is
  // final, the page reloaded now shows the new "complete up to", backlog and recent runs together.
  function showFinished() {
    const url = new URL(window.location.href);
    url.searchParams.delete("run");
    url.searchParams.set("done", box.dataset.runUrl.split("/").pop());
    window.location.replace(url.toString());
  }

  const reloaded = new URL(window.location.href).searchParams.has("done");
  if (box && box.dataset.runUrl) poll();

  // ---- ingestion lag, live ----------------------------------------------------------------------
  // The lag ticks every second from the last write's completion time and the server's clock at render (the
  // browser's own clock may be off: only its elapsed time is used). Every 30 s the table's JSON (the latest
  // sample, as the page shows it) brings a newer last write, batch and watermark without reloading.
  const lagEl = el("ingestion-lag");
  // Seconds in words, as the pages' `duration` filter writes them ("45 s", "2 h 5 min", "3 d 4 h").
  const duration = (seconds) => {
    let s = Math.max(0, Math.round(seconds));
    if (s < 60) return s + " s";
    let minutes = Math.floor(s / 60); s %= 60;
    if (minutes < 60) return s && minutes < 10 ? `${minutes} min ${s} s` : `${minutes} min`;
    let hours = Math.floor(minutes / 60); minutes %= 60;
    if (hours < 48) return minutes ? `${hours} h ${minutes} min` : `${hours} h`;
    const days = Math.floor(hours / 24); hours %= 24;
    return hours ? `${days} d ${hours} h` : `${days} d`;
  };
  const serverNow = lagEl ? Number(lagEl.dataset.nowMs) : 0;
  const loadedAt = Date.now();
  function tick() {
    const done = Number(lagEl.dataset.lastWriteMs);
    if (!done) return;
    lagEl.textContent = duration((serverNow + (Date.now() - loadedAt) - done) / 1000);
  }
  const iso = (text) => (text ? text.replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC") : "—");
  async function refreshIngestion() {
    const response = await fetch(box.dataset.tableUrl, { credentials: "same-origin" });
    if (!response.ok) return;
    const ing = ((await response.json()).activity || {}).ingestion;
    if (!ing || !ing.last_write_at_ms || ing.last_write_at_ms <= Number(lagEl.dataset.lastWriteMs)) return;
    lagEl.dataset.lastWriteMs = ing.last_write_at_ms;
    el("last-write").textContent = ing.last_write;
    el("last-write-at").textContent = iso(ing.last_write_at);
    if (ing.stream && el("stream")) {
      el("stream-query").textContent = ing.stream.query_id || "—";
      el("stream-batch").textContent = ing.stream.batch_id ?? "—";
      el("stream-watermark").textContent = iso(ing.stream.watermark);
    }
    tick();
  }
  if (lagEl && lagEl.dataset.lastWriteMs) {
    tick();
    setInterval(tick, 1000);
    if (box && box.dataset.tableUrl) setInterval(refreshIngestion, 30000);
  }
})();
