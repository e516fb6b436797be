// The trends section of the Hudi timeline page: draws /hudi-occ/api/tables/{name}/trends
// (conflicts and retries per hour or day, cost per DAG and per file group, who beat whom).
// Plain DOM, no build step; values go through textContent / setAttribute only. timeline.js
// calls HudiTrends.show(table) when a table is chosen; the window and DAG choices live in
// the URL (?window=7d&trend_dag=...) so a link reproduces what was seen.
(function () {
  "use strict";
  var CHAR_PX = 6.4;
  var state = {table: null, seq: 0, last: null};

  var $ = HudiDom.$, el = HudiDom.el, sv = HudiDom.sv;
  function dur(ms) {
    if (ms == null) return "\u2014";
    if (ms < 1000) return ms + " ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 2 : 1) + " s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + " min " + Math.round(s - m * 60) + " s";
    return Math.floor(m / 60) + " h " + (m % 60) + " min";
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  function secs(s) { return s ? dur(Math.round(s * 1000)) : "0 s"; }
  function dagName(d) { return d == null ? "(no DAG)" : d; }
  function utcDay(ms) { return ms == null ? "" : new Date(ms).toISOString().substr(0, 16).replace("T", " ") + " UTC"; }

  function setParam(k, v) {
    var p = new URLSearchParams(window.location.search);
    if (v) p.set(k, v); else p.delete(k);
    var qs = p.toString();
    window.history.replaceState(null, "", window.location.pathname + (qs ? "?" + qs : ""));
  }

  function fetchTrends(table, windowText, dag) {
    var url = "api/tables/" + encodeURIComponent(table) + "/trends?window=" + encodeURIComponent(windowText) +
      (dag ? "&dag_id=" + encodeURIComponent(dag) : "");
    return HudiDom.api(url);
  }

  // Bars per bucket: conflicts and retries side by side. Bucket labels are thinned to every
  // n-th bucket so that each label has the width it needs (30 days on a phone keep one label
  // a week); the full numbers of every bucket are in its hover title.
  function chart(tr) {
    var svg = $("trend-chart");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var buckets = tr.buckets, hourly = tr.window.bucket === "hour";
    var width = Math.max(300, ($("trend-chart-wrap").clientWidth || 600) - 2);
    var left = 34, right = 10, top = 22, plotH = 130, bottom = 34, height = top + plotH + bottom;
    svg.setAttribute("width", width); svg.setAttribute("height", height);
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    var max = 0;
    buckets.forEach(function (b) { max = Math.max(max, b.conflicts, b.retries); });
    var stepY = max <= 5 ? 1 : Math.ceil(max / 5 / Math.pow(10, Math.floor(Math.log10(max / 5)))) *
      Math.pow(10, Math.floor(Math.log10(max / 5)));
    var topY = Math.max(stepY, Math.ceil(max / stepY) * stepY);
    function y(v) { return top + plotH - v / topY * plotH; }
    var grid = sv("g", {"class": "grid"});
    for (var v = 0; v <= topY; v += stepY) {
      grid.appendChild(sv("line", {x1: left, x2: width - right, y1: y(v), y2: y(v)}));
      grid.appendChild(sv("text", {x: left - 6, y: y(v) + 4, "text-anchor": "end"}, v));
    }
    svg.appendChild(grid);
    var legend = sv("g", {"class": "legend"});
    var lx = left;
    [["conflicts", "#d64541"], ["retries", "#2c3e91"]].forEach(function (l) {
      var text = l[0] + " per " + tr.window.bucket;
      legend.appendChild(sv("rect", {x: lx, y: 6, width: 10, height: 10, fill: l[1]}));
      legend.appendChild(sv("text", {x: lx + 14, y: 15}, text));
      lx += 14 + text.length * CHAR_PX + 16;
    });
    svg.appendChild(legend);
    var n = buckets.length, bw = (width - left - right) / Math.max(n, 1);
    var labelText = function (b) {
      var iso = new Date(b.start_ms).toISOString();
      return hourly ? (iso.substr(11, 2) === "00" ? iso.substr(5, 5) : iso.substr(11, 5)) : iso.substr(5, 5);
    };
    var need = 5 * CHAR_PX + 10;  // "11-20" or "14:00"
    var every = Math.max(1, Math.ceil(need / bw));
    if (hourly && every > 1) every = [2, 3, 4, 6, 12, 24].filter(function (e) { return e >= every; })[0] || every;
    var bars = sv("g", {"class": "bars"});
    buckets.forEach(function (b, i) {
      var x0 = left + i * bw, inner = Math.max(1, bw * 0.8), w = Math.max(1, inner / 2 - 0.5);
      var g = sv("g", {"class": "bucket", "data-start": b.start_ms, "data-conflicts": b.conflicts,
                       "data-retries": b.retries});
      g.appendChild(sv("rect", {"class": "bucket-hit", x: x0, y: top, width: bw, height: plotH}));
      if (b.conflicts) g.appendChild(sv("rect", {"class": "bar-conflicts", x: x0 + bw * 0.1, y: y(b.conflicts),
                                                 width: w, height: top + plotH - y(b.conflicts)}));
      if (b.retries) g.appendChild(sv("rect", {"class": "bar-retries", x: x0 + bw * 0.1 + w + 1, y: y(b.retries),
                                               width: w, height: top + plotH - y(b.retries)}));
      g.appendChild(sv("title", {}, b.label + " UTC: " + b.conflicts + " conflicts, " + b.retries + " retries, " +
        b.attempts + " attempts, " + b.committed + " committed, " + secs(b.seconds_discarded) + " and " +
        b.files_discarded + " files discarded"));
      // Labels are counted from the newest bucket back, so today always has one.
      if ((n - 1 - i) % every === 0) {
        var cx = x0 + bw / 2, text = labelText(b), half = text.length * CHAR_PX / 2;
        cx = Math.min(Math.max(cx, half + 2), width - half - 2);
        g.appendChild(sv("line", {x1: x0 + bw / 2, x2: x0 + bw / 2, y1: top + plotH, y2: top + plotH + 4,
                                  stroke: "#99a"}));
        g.appendChild(sv("text", {x: cx, y: top + plotH + 16, "text-anchor": "middle", "class": "tick-label"}, text));
      }
      bars.appendChild(g);
    });
    svg.appendChild(bars);
    svg.appendChild(sv("text", {x: left, y: height - 4, "class": "axis-note"},
                       hourly ? "hours (UTC); midnight shows the date" : "days (UTC)"));
  }

  function fill(id, items, cells) {
    var body = $(id).querySelector("tbody");
    body.textContent = "";
    if (!items.length) {
      var tr = el("tr", {"class": "empty"});
      tr.appendChild(el("td", {colspan: $(id).querySelectorAll("th").length}, "none in this window"));
      body.appendChild(tr);
      return;
    }
    items.forEach(function (it) {
      var tr = el("tr", {"class": "row"});
      cells(it).forEach(function (c) { tr.appendChild(el("td", {"class": c[1] || ""}, c[0])); });
      body.appendChild(tr);
    });
  }

  function render(tr) {
    var t = tr.totals, w = tr.window;
    var s = $("trend-summary");
    s.textContent = "";
    s.appendChild(el("strong", {}, plural(t.conflicts, "conflict") + ", " +
      (t.retries === 1 ? "1 retry" : t.retries + " retries")));
    s.appendChild(document.createTextNode(" in " + plural(t.attempts, "attempt") + " since " + utcDay(w.start_ms) +
      "; " + secs(t.seconds_discarded) + " of work and " + plural(t.files_discarded, "file") + " thrown away" +
      (tr.dag_id ? " (DAG " + tr.dag_id + " only)" : "") + "."));
    // Only when a clean really pruned records this window reaches: a young table's log simply
    // starts late, and saying "clean prunes" there would invent a loss.
    var pr = tr.pruned;
    if (pr && pr.newest_ms != null && pr.newest_ms >= w.start_ms)
      s.appendChild(el("span", {"class": "note pruned-note"}, " Clean pruned " + plural(pr.count, "attempt record") +
        " (the newest from " + utcDay(pr.newest_ms) + "; it keeps every record younger than " + pr.retained_days +
        " days): days before " + utcDay(pr.newest_ms) + " may miss attempts."));
    if (tr.filtered)
      s.appendChild(el("span", {"class": "note"}, " Attempts of DAGs you may not read are left out."));
    chart(tr);
    fill("trend-dags", tr.dags, function (d) {
      return [[dagName(d.dag_id), "nowrap"], [d.attempts, "num"], [d.conflicts, "num"], [d.retries, "num"],
              [secs(d.seconds_discarded), "num"], [d.files_discarded, "num"],
              [dur(d.commit_latency.median_ms) + " / " + dur(d.commit_latency.p95_ms), "num"],
              [dur(d.batch_latency.median_ms) + " / " + dur(d.batch_latency.p95_ms), "num"]];
    });
    fill("trend-hot", tr.file_groups, function (g) {
      return [[g.file_group, "mono"], [g.conflicts, "num"], [g.failed_attempts, "num"],
              [secs(g.seconds_discarded), "num"], [g.files_discarded, "num"], [g.dags.join(", ")],
              [utcDay(g.last_ms), "nowrap"]];
    });
    fill("trend-fights", tr.fights, function (f) {
      return [[dagName(f.loser_dag)],
              [f.winner_hidden ? "(a DAG you may not read)" : f.winner_dag == null ? "(unknown writer)" : f.winner_dag],
              [f.conflicts, "num"], [secs(f.seconds_discarded), "num"]];
    });
    var sel = $("trend-dag");
    if (!tr.dag_id) {  // the DAG list comes from the unfiltered answer
      var keep = sel.value;
      while (sel.options.length > 1) sel.remove(1);
      tr.dags.forEach(function (d) { if (d.dag_id != null) sel.appendChild(el("option", {value: d.dag_id}, d.dag_id)); });
      sel.value = keep;
    } else if (!Array.prototype.some.call(sel.options, function (o) { return o.value === tr.dag_id; })) {
      sel.appendChild(el("option", {value: tr.dag_id}, tr.dag_id));
      sel.value = tr.dag_id;
    }
  }

  function load() {
    if (!state.table) return Promise.resolve();
    var seq = ++state.seq, win = $("trend-window").value, dag = $("trend-dag").value;
    $("trend-status").textContent = "loading\u2026";
    return fetchTrends(state.table, win, dag).then(function (tr) {
      if (seq !== state.seq) return;  // a newer choice is on its way
      var e = $("trend-errors"); e.hidden = true; e.textContent = "";
      state.last = tr;
      render(tr);
      $("trend-status").textContent = "";
      document.body.setAttribute("data-trends", state.table + " " + tr.window.text);
    }).catch(function (err) {
      if (seq !== state.seq) return;
      var e = $("trend-errors"); e.hidden = false; e.textContent = err.message;
      $("trend-status").textContent = "";
      document.body.setAttribute("data-trends", "error");
    });
  }

  function init() {
    var p = new URLSearchParams(window.location.search);
    var win = p.get("window"), dag = p.get("trend_dag");
    if (win) {
      if (!Array.prototype.some.call($("trend-window").options, function (o) { return o.value === win; }))
        $("trend-window").appendChild(el("option", {value: win}, "last " + win));
      $("trend-window").value = win;
    }
    if (dag) { $("trend-dag").appendChild(el("option", {value: dag}, dag)); $("trend-dag").value = dag; }
    $("trend-window").addEventListener("change", function () { setParam("window", this.value); load(); });
    $("trend-dag").addEventListener("change", function () { setParam("trend_dag", this.value); load(); });
    // Redraw when the chart's box changes width: a window resize, and also the page's
    // scrollbar appearing when the timeline below arrives, which no resize event reports.
    var drawnAt = null;
    if (window.ResizeObserver) new ResizeObserver(function () {
      var w = $("trend-chart-wrap").clientWidth;
      if (state.last && w !== drawnAt) { drawnAt = w; chart(state.last); }
    }).observe($("trend-chart-wrap"));
  }

  window.HudiTrends = {
    show: function (table) { state.table = table; return load(); }
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
