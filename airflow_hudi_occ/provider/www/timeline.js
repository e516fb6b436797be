// The Hudi timeline page: draws the JSON of /hudi-occ/api/tables/{name}/timeline as an SVG
// Gantt chart plus tables of conflicts, retries and live writers. Plain DOM, no build step.
// Every value from the table goes through textContent or setAttribute, never innerHTML.
(function () {
  "use strict";
  var params = new URLSearchParams(window.location.search);
  var focus = {dag_id: params.get("dag_id"), task_id: params.get("task_id"),
               run_id: params.get("run_id"), instant: params.get("instant")};
  var OUTCOMES = ["committed", "conflict", "aborted", "error", "running", "stale", "rolled_back", "service"];
  var timer = null;

  var $ = HudiDom.$, el = HudiDom.el, sv = HudiDom.sv;
  function setStatus(s) { $("status").textContent = s; }
  function showError(msg) { var e = $("errors"); e.hidden = !msg; e.textContent = msg || ""; }
  function utc(ms) { return ms == null ? "" : new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC"); }
  function hms(ms) { return new Date(ms).toISOString().substr(11, 12); }
  function writerText(w) {
    if (!w) return "";
    var parts = [];
    if (w.dag_id || w.task_id) parts.push((w.dag_id || "?") + " \u203a " + (w.task_id || "?"));
    if (w.run_id) parts.push("run " + w.run_id);
    if (w.try_number) parts.push("try " + w.try_number);
    if (w.attempt) parts.push("attempt " + w.attempt);
    if (!parts.length && w.writer_id) parts.push("writer " + w.writer_id);
    return parts.join(", ");
  }
  // An attempt's admission wait (the write operator's labels, kept by the attempt log):
  // "waited 12.5 s for <instant> (<dag>.<task>) on partitions a, b; ..."
  function waitText(w) {
    if (!w) return "";
    return "waited " + w.seconds + " s" + (w.waited_for && w.waited_for.length ?
      " for " + w.waited_for.join("; ") : "");
  }
  function matchesFocus(r) {
    var w = r.writer || {};
    if (focus.instant && r.instant === focus.instant) return true;
    if (!focus.dag_id && !focus.task_id && !focus.run_id) return false;
    return (!focus.dag_id || w.dag_id === focus.dag_id) && (!focus.task_id || w.task_id === focus.task_id) &&
           (!focus.run_id || w.run_id === focus.run_id);
  }

  var api = HudiDom.api;

  function legend() {
    var box = $("legend");
    box.textContent = "";
    OUTCOMES.forEach(function (o) {
      var s = el("span", {"class": "legend-item"});
      s.appendChild(el("span", {"class": "swatch outcome-" + o}));
      s.appendChild(document.createTextNode(o.replace("_", " ")));
      box.appendChild(s);
    });
    var c = el("span", {"class": "legend-item"});
    c.appendChild(el("span", {"class": "swatch swatch-compaction"}));
    c.appendChild(document.createTextNode("compaction (dashed: scheduled)"));
    box.appendChild(c);
  }
  function compactionText(c) {
    return "compaction " + c.state + ": " + c.file_groups.length + " file group" +
      (c.file_groups.length === 1 ? "" : "s") + ", " + c.log_files + " log file" + (c.log_files === 1 ? "" : "s");
  }

  function showDetail(r) {
    var d = $("detail");
    d.hidden = false;
    var lines = [
      "instant " + r.instant + " (" + r.action + ", " + r.state + ") \u2014 " + r.outcome,
      "writer: " + writerText(r.writer),
      "requested " + utc(r.start_ms) + "; ended " + utc(r.end_ms) + " (" + r.end_kind + ")"];
    if (r.wait) lines.push(waitText(r.wait) + " before it began");
    if (r.operation) lines.push("operation: " + r.operation);
    if (r.other_instant) lines.push("lost to " + r.other_instant);
    if (r.file_groups && r.file_groups.length) lines.push("file groups: " + r.file_groups.join(", "));
    if (r.seconds_discarded) lines.push("discarded: " + r.seconds_discarded + " s, " + r.files_discarded + " files");
    if (r.retry_of) lines.push("retry of " + r.retry_of);
    if (r.retried_by) lines.push("retried as " + r.retried_by);
    if (r.rolled_back_by) lines.push("rolled back by " + r.rolled_back_by);
    if (r.rolled_back && r.rolled_back.length) lines.push("rolled back " + r.rolled_back.join(", "));
    if (r.heartbeat_age_s != null) lines.push("heartbeat age: " + r.heartbeat_age_s + " s");
    if (r.message) lines.push("message: " + r.message);
    if (r.compaction) {
      lines.push(compactionText(r.compaction));
      if (r.compaction.appended.length)
        lines.push("appended meanwhile (logs go to its new slice): " + r.compaction.appended.join(", "));
      if (r.compaction.conflicted.length) lines.push("lost to it: " + r.compaction.conflicted.join(", "));
    }
    d.textContent = lines.join("\n");
  }

  // Time -> pixels, piecewise linear: busy stretches keep their proportions, idle gaps longer
  // than a tenth of the busy time shrink to a fixed width (drawn as a break), so a writer that
  // started minutes after the others does not squash everything else into a sliver.
  function timeScale(rows, nowMs, plotW) {
    var iv = rows.filter(function (r) { return r.start_ms != null; }).map(function (r) {
      return [r.start_ms, Math.max(r.end_ms == null ? r.start_ms : r.end_ms, r.start_ms)]; });
    iv.sort(function (a, b) { return a[0] - b[0]; });
    var merged = [];
    iv.forEach(function (v) {
      var last = merged[merged.length - 1];
      if (last && v[0] <= last[1]) last[1] = Math.max(last[1], v[1]); else merged.push([v[0], v[1]]);
    });
    var busy = merged.reduce(function (a, m) { return a + (m[1] - m[0]); }, 0) || 1;
    var minGap = Math.max(busy / 10, 1000), gapPx = 28;
    var blocks = [];
    merged.forEach(function (m) {
      var last = blocks[blocks.length - 1];
      if (last && m[0] - last[1] < minGap) last[1] = Math.max(last[1], m[1]); else blocks.push([m[0], m[1]]);
    });
    var span = blocks.reduce(function (a, b) { return a + Math.max(b[1] - b[0], 1); }, 0);
    var pad = span * 0.02 + 1;
    blocks[0][0] -= pad; blocks[blocks.length - 1][1] += pad; span += 2 * pad;
    var avail = plotW - gapPx * (blocks.length - 1), p = 0, segs = [];
    blocks.forEach(function (b, i) {
      if (i > 0) { segs.push({gap: true, t0: blocks[i - 1][1], t1: b[0], p0: p, p1: p + gapPx}); p += gapPx; }
      var w = avail * Math.max(b[1] - b[0], 1) / span;
      segs.push({gap: false, t0: b[0], t1: b[1], p0: p, p1: p + w}); p += w;
    });
    return {segments: segs, px: function (ms) {
      for (var i = 0; i < segs.length; i++) {
        var sg = segs[i];
        if (ms <= sg.t1 || i === segs.length - 1) {
          if (ms <= sg.t0) return sg.p0;
          return sg.p0 + (Math.min(ms, sg.t1) - sg.t0) / Math.max(sg.t1 - sg.t0, 1) * (sg.p1 - sg.p0);
        }
      }
      return 0;
    }};
  }

  // Axis ticks at round times (1 s, 5 min, ...), chosen per drawn segment from the pixels it
  // has, then labelled left to right only where a label fits beside the last one: segments
  // that meet at an idle break, or narrow windows, would otherwise print labels over each other.
  var STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5,
               9e5, 18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5, 1728e5, 6048e5];
  var CHAR_PX = 6.4, LABEL_GAP = 10;
  function tickText(ms, step, longRange) {
    var iso = new Date(ms).toISOString();
    if (step >= 864e5) return iso.substr(5, 5);
    var t = step < 1000 ? iso.substr(11, 12) : step < 6e4 ? iso.substr(11, 8) : iso.substr(11, 5);
    return longRange ? iso.substr(5, 5) + " " + t : t;
  }
  // Two passes: first the start of every drawn stretch (after an idle break the reader needs
  // to know *when* the burst was), then round ticks wherever they still fit.
  function axisTicks(scale, rangeMs) {
    var longRange = rangeMs > 20 * 36e5, starts = [], rounds = [];
    scale.segments.forEach(function (sg, i) {
      if (sg.gap || sg.p1 <= sg.p0) return;
      var pxPerMs = (sg.p1 - sg.p0) / Math.max(sg.t1 - sg.t0, 1);
      var sample = tickText(sg.t0, 1000, longRange).length * CHAR_PX + LABEL_GAP;
      var step = STEPS.filter(function (s) { return s * pxPerMs >= sample; })[0] || STEPS[STEPS.length - 1];
      if (i > 0) starts.push({ms: sg.t0, label: tickText(sg.t0, longRange ? 6e4 : 1000, longRange), start: true});
      for (var ms = Math.ceil(sg.t0 / step) * step; ms <= sg.t1; ms += step)
        rounds.push({ms: ms, label: tickText(ms, step, longRange)});
    });
    // a label may reach a little past the plot on either side (into the lane labels' column,
    // above the rows; into the right margin), never past the picture
    var placed = [], last = scale.segments[scale.segments.length - 1];
    var lo = -20, hi = last ? last.p1 + 18 : 0;
    function tryPlace(t) {
      var w = t.label.length * CHAR_PX, px = scale.px(t.ms), a = px - w / 2, b = px + w / 2;
      if (a < lo || b > hi) return false;
      for (var k = 0; k < placed.length; k++)
        if (a < placed[k][1] + LABEL_GAP && placed[k][0] < b + LABEL_GAP) return false;
      placed.push([a, b]);
      return true;
    }
    var out = [];
    starts.concat(rounds).forEach(function (t) {
      if (!tryPlace(t)) t.label = null;
      out.push(t);
    });
    return out;
  }

  var lastView = null, ganttDrawnAt = null;
  function gantt(view) {
    lastView = view;
    ganttDrawnAt = $("gantt-wrap").clientWidth;
    var svg = $("gantt");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    // One drawn row per sub-row of a lane: attempts of one task that ran at the same time
    // (lane_row from the read model) get rows of their own, so no bar hides another.
    var lanes = [];
    view.lanes.forEach(function (l, li) {
      for (var k = 0; k < (l.rows || 1); k++) lanes.push({lane: l.lane, row: k, index: li, of: l.rows || 1});
    });
    var rows = view.instants;
    // Narrow windows get a narrower lane column (labels shortened, full text on hover)
    // rather than a plot squeezed to nothing; below 360 px the chart scrolls sideways.
    var width = Math.max(360, ($("gantt-wrap").clientWidth || 900) - 2);
    var labelW = Math.round(Math.min(260, Math.max(130, width * 0.25))), rowH = 28, top = 30, right = 20;
    var height = top + lanes.length * rowH + 10;
    svg.setAttribute("width", width); svg.setAttribute("height", height);
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    if (!rows.length) { svg.appendChild(sv("text", {x: 10, y: 20}, "no instants")); return; }
    var plotW = width - labelW - right;
    var scale = timeScale(rows, view.now_ms, plotW);
    function x(ms) { return labelW + scale.px(ms); }
    var rowOf = {};
    lanes.forEach(function (l, i) { rowOf[l.lane + "\u0000" + l.row] = i; });
    function y(r) { return top + rowOf[r.lane + "\u0000" + (r.lane_row || 0)] * rowH; }
    var g = sv("g", {"class": "axis"});
    lanes.forEach(function (l, i) {
      // sub-rows of one lane share its background, so they read as one writer
      g.appendChild(sv("rect", {"class": "lane-bg", x: 0, y: top + i * rowH, width: width, height: rowH,
                                fill: l.index % 2 ? "#f8f9fb" : "#ffffff"}));
      var text = l.row ? "\u21b3 concurrent run " + (l.row + 1) : l.lane;
      var maxChars = Math.floor((labelW - 12) / CHAR_PX);
      var label = sv("text", {x: 6, y: top + i * rowH + rowH / 2 + 4,
                              "class": "lane-label" + (l.row ? " lane-sub" : ""), "data-lane": l.lane,
                              "data-lane-row": l.row},
                     text.length > maxChars ? text.substr(0, maxChars - 1) + "\u2026" : text);
      label.appendChild(sv("title", {}, l.row ? l.lane + ": row " + (l.row + 1) + " of " + l.of +
        " (attempts that ran while another of this task was running)" : l.lane));
      g.appendChild(label);
    });
    scale.segments.forEach(function (sg) {
      if (!sg.gap) return;
      g.appendChild(sv("rect", {x: labelW + sg.p0, y: top, width: sg.p1 - sg.p0, height: height - top - 10,
                                fill: "#eef0f3", "class": "gap"}));
      g.lastChild.appendChild(sv("title", {}, "idle " + ((sg.t1 - sg.t0) / 1000).toFixed(1) + " s not to scale"));
    });
    axisTicks(scale, view.range && view.range.end_ms - view.range.start_ms).forEach(function (t) {
      var xx = x(t.ms);
      g.appendChild(sv("line", {x1: xx, x2: xx, y1: top - 4, y2: height - 10}));
      if (t.label) g.appendChild(sv("text", {x: xx, y: top - 10, "text-anchor": "middle", "class": "tick-label"}, t.label));
    });
    svg.appendChild(g);
    var pos = {};
    var bars = sv("g", {"class": "bars"});
    rows.forEach(function (r) {
      if (r.start_ms == null) return;
      var x0 = x(r.start_ms), x1 = Math.max(x(r.end_ms == null ? r.start_ms : r.end_ms), x0 + 4);
      var yy = y(r) + 5, h = rowH - 10;
      pos[r.instant] = {x0: x0, x1: x1, y: yy + h / 2};
      var cls = "bar " + r["class"] + (matchesFocus(r) ? " task-match" : "") +
        (r.compaction ? " compaction compaction-" + r.compaction.state : "");
      var attrs = {"class": cls, x: x0, y: yy, width: x1 - x0, height: h, rx: 2,
                   "data-instant": r.instant, "data-outcome": r.outcome, "data-lane-row": r.lane_row || 0};
      if (r.compaction) attrs["data-compaction"] = r.compaction.state;
      if (r.wait) attrs["data-waited-s"] = r.wait.seconds;
      var rect = sv("rect", attrs);
      rect.appendChild(sv("title", {}, r.instant + " " + r.action + " " + r.outcome + "\n" + writerText(r.writer) +
        (r.compaction ? "\n" + compactionText(r.compaction) : "") +
        (r.other_instant ? "\nlost to " + r.other_instant : "") +
        (r.wait ? "\n" + waitText(r.wait) + " before it began" : "") +
        (r.file_groups && r.file_groups.length ? "\nfile groups: " + r.file_groups.join(", ") : "") +
        (r.seconds_discarded ? "\ndiscarded " + r.seconds_discarded + " s" : "")));
      rect.addEventListener("click", function () { showDetail(r); });
      bars.appendChild(rect);
    });
    svg.appendChild(bars);
    var edges = sv("g", {"class": "edges"});
    view.conflicts.forEach(function (c) {
      var a = pos[c.instant], b = pos[c.other_instant];
      if (a && b) edges.appendChild(sv("line", {"class": "conflict-edge", x1: a.x1, y1: a.y, x2: b.x1, y2: b.y,
                                                  "data-from": c.instant, "data-to": c.other_instant}));
    });
    rows.forEach(function (r) {
      var a = pos[r.instant], b = r.retried_by && pos[r.retried_by];
      if (a && b) edges.appendChild(sv("line", {"class": "retry-edge", x1: a.x1, y1: a.y, x2: b.x0, y2: b.y,
                                                  "data-from": r.instant, "data-to": r.retried_by}));
    });
    (view.compactions || []).forEach(function (c) {
      var b = pos[c.instant];
      c.appended.forEach(function (a) {
        var p = pos[a.instant];
        if (p && b) edges.appendChild(sv("line", {"class": "compaction-edge", x1: p.x1, y1: p.y, x2: b.x0, y2: b.y,
                                                    "data-from": a.instant, "data-to": c.instant}));
      });
    });
    svg.appendChild(edges);
  }

  function fillTable(id, items, cells, highlight) {
    var body = $(id).querySelector("tbody");
    body.textContent = "";
    if (!items.length) {
      var tr = el("tr", {"class": "empty"});
      tr.appendChild(el("td", {colspan: $(id).querySelectorAll("th").length}, "none"));
      body.appendChild(tr);
      return;
    }
    items.forEach(function (it) {
      var tr = el("tr", {"class": "row" + (highlight && highlight(it) ? " highlight" : "")});
      cells(it).forEach(function (c) { tr.appendChild(el("td", {"class": c[1] || ""}, c[0])); });
      body.appendChild(tr);
    });
  }

  function render(view) {
    $("table-info").textContent = view.table.name + " \u2014 " + view.table.base_path + " (table version " +
      view.table.version + "; " + view.instants.length + " instants" + (view.truncated ? ", newest shown" : "") +
      "; heartbeat expiry " + view.heartbeat.expiry_ms + " ms)";
    gantt(view);
    fillTable("conflicts", view.conflicts, function (c) {
      return [[c.instant, "mono"], [writerText(c.writer)], [c.other_instant || "unknown", "mono"],
              [c.other_hidden ? "(a DAG you may not read)" : c.other_lane || ""], [(c.file_groups || []).join(", "), "mono"], [c.seconds_discarded],
              [c.files_discarded], [c.retried_by || "\u2014", "mono"]];
    }, function (c) { return matchesFocus({instant: c.instant, writer: c.writer}); });
    $("conflict-count").textContent = view.conflicts.length;
    fillTable("retries", view.retries, function (r) {
      return [[r.key], [r.attempts.map(function (a) {
                return "#" + (a.attempt || "?") + " " + a.instant + ": " + a.outcome +
                  (a.other_instant ? " (lost to " + a.other_instant + ")" : "") +
                  (a.wait ? "; " + waitText(a.wait) + " before it began" : ""); }).join("\n"), "mono"],
              [r.final_outcome], [r.seconds_discarded]];
    }, function (r) { return matchesFocus({writer: {dag_id: r.dag_id, task_id: r.task_id, run_id: r.run_id}}); });
    $("retry-count").textContent = view.retries.length;
    fillTable("live-writers", view.live_writers, function (w) {
      return [[w.instant, "mono"], [w.action], [writerText(w.writer) || w.lane], [w.heartbeat_age_s],
              [(w.partitions || []).join(", ") || "(none yet)"], [(w.file_groups || []).join(", "), "mono"]];
    });
    $("live-count").textContent = view.live_writers.length;
    var comps = view.compactions || [];
    fillTable("compactions", comps, function (c) {
      return [[c.instant, "mono"], [c.state + (c.heartbeat_age_s != null ? " (heartbeat " + c.heartbeat_age_s + " s)" : "")],
              [writerText(c.writer) || c.lane], [c.file_groups.join(", "), "mono"], [c.log_files],
              [c.appended.map(function (a) { return a.instant + " (" + a.lane + ")"; }).join("\n") || "\u2014", "mono"],
              [c.conflicted.map(function (a) { return a.instant + " (" + a.lane + ")" +
                 (a.retried_by ? ", retried as " + a.retried_by : ""); }).join("\n") || "\u2014", "mono"]];
    });
    $("compaction-count").textContent = comps.length;
    if (focus.instant) {
      var r = view.instants.filter(function (i) { return i.instant === focus.instant; })[0];
      if (r) showDetail(r);
    }
  }

  function load() {
    var name = $("table-select").value;
    if (!name) return Promise.resolve();
    setStatus("loading\u2026");
    return api("api/tables/" + encodeURIComponent(name) + "/timeline").then(function (view) {
      showError("");
      render(view);
      document.body.setAttribute("data-loaded", name);
      setStatus("updated " + new Date().toISOString().substr(11, 8) + " UTC");
    }).catch(function (e) { showError(e.message); setStatus(""); document.body.setAttribute("data-loaded", "error"); });
  }

  function schedule() {
    if (timer) clearInterval(timer);
    timer = $("auto-refresh").checked ? setInterval(load, 10000) : null;
  }

  function init() {
    legend();
    api("api/tables").then(function (doc) {
      var sel = $("table-select");
      doc.tables.forEach(function (t) { sel.appendChild(el("option", {value: t.name}, t.name)); });
      if (doc.config_errors && doc.config_errors.length) showError("configuration: " + doc.config_errors.join("; "));
      if (!doc.tables.length) {
        showError("No tables configured: set [hudi_occ] tables = NAME=PATH,... in airflow.cfg or HUDI_OCC_TABLES.");
        document.body.setAttribute("data-loaded", "none");
        return;
      }
      var want = params.get("table");
      sel.addEventListener("change", function () {
        focus = {};
        showError("");
        var blank = sel.querySelector("option[value='']");
        if (blank && sel.value) sel.removeChild(blank);
        if (window.HudiTrends) window.HudiTrends.show(sel.value);
        load();
      });
      $("auto-refresh").addEventListener("change", schedule);
      if (want && !doc.tables.some(function (t) { return t.name === want; })) {
        // A link to a table that is not (or no longer) configured: say so and show nothing,
        // rather than another table's timeline under a link that named this one.
        sel.insertBefore(el("option", {value: ""}, "choose a table\u2026"), sel.firstChild);
        sel.value = "";
        showError("Table " + want + " is not configured on this Airflow. Configured: " +
          doc.tables.map(function (t) { return t.name; }).join(", ") +
          " (what to do: choose one above, or add " + want + "=PATH to [hudi_occ] tables or HUDI_OCC_TABLES).");
        document.body.setAttribute("data-loaded", "unknown-table");
        schedule();  // refreshes nothing until a table is chosen, then that one
        return;
      }
      if (want) sel.value = want;
      if (window.HudiTrends) window.HudiTrends.show(sel.value);
      return load().then(schedule);
    }).catch(function (e) { showError(e.message); document.body.setAttribute("data-loaded", "error"); });
  }

  // Redraw when the chart's box changes width (window resized, or the page's scrollbar came
  // or went as sections above it filled): the SVG is drawn to the box's width.
  if (window.ResizeObserver) new ResizeObserver(function () {
    if (lastView && $("gantt-wrap").clientWidth !== ganttDrawnAt) gantt(lastView);
  }).observe($("gantt-wrap"));

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
