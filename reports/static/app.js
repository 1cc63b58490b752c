// hgemm-bench report: the page. Routes (the URL hash, so every view can be linked):
//   ""                      the headline run (the site index names it)
//   #board                  every method once, in the latest run that measured it
//   #<view id>              one view of one run (r3-offline-warm-device); #r3 its first view
//   #<view id>/<M_N_K>      one shape of that view: every method and layout on it
// A run's data is a script (data/r3.js calling HG.run) loaded the first time the run is shown,
// so the first paint waits only for the small index inlined in index.html. Plain ES2017.
(function () {
  "use strict";
  var INDEX = JSON.parse(document.getElementById("hg-index").textContent);
  var T = window.HGTable, C = window.HGCharts, esc = T.esc;
  var app = document.getElementById("app");
  var RUNS = Object.create(null), WAIT = Object.create(null);
  var META = Object.create(null);
  INDEX.runs.forEach(function (r) { META[r.id] = r; });
  var LABELS = {offline: "offline", server: "server", warm: "warm cache", cold: "cold cache",
                device: "device time", host: "host time"};
  var ROLE_TEXT = {baseline: "baseline", peer: "peer", kernel: ""};

  // ---- data ------------------------------------------------------------------------------------
  // Decode a run's compact tables (reports/tabledata.py) into row objects: coded cells index
  // values[column]; a best-layout row [i, speedup] copies row i of its view with layout
  // "best (<its layout>)". Derived fields for the charts: shape, flop, ai, key, best_of, entry.
  function decode(p) {
    var t = p.tables, cols = t.columns;
    var coded = Object.keys(t.values).map(function (c) { return [cols.indexOf(c), t.values[c]]; });
    var keyOf = Object.create(null);
    t.values.method.forEach(function (m, i) { keyOf[m] = t.keys[i] || m; });
    var li = cols.indexOf("layout"), si = cols.indexOf("speedup");
    p.rows = {};
    Object.keys(t.views).forEach(function (vid) {
      var raw = t.views[vid];
      raw.forEach(function (r) {
        if (r.length === cols.length) coded.forEach(function (c) { r[c[0]] = c[1][r[c[0]]]; });
      });
      var full = raw.map(function (r) {
        if (r.length === cols.length) return r;
        var row = raw[r[0]].slice();
        row[li] = "best (" + row[li] + ")";
        row[si] = r[1];
        return row;
      });
      p.rows[vid] = full.map(function (r) {
        var o = {};
        cols.forEach(function (c, i) { o[c] = r[i]; });
        o.shape = o.m + "_" + o.n + "_" + o.k;
        o.flop = 2 * o.m * o.n * o.k;
        o.ai = o.flop / (2 * (o.m * o.k + o.k * o.n + o.m * o.n));
        o.key = keyOf[o.method];
        o.best = o.layout.indexOf("best") === 0;
        o.best_of = o.best ? o.layout.slice(6, -1) : o.layout;
        o.entry = o.key + " (" + o.layout + ")";
        return o;
      });
    });
    return p;
  }

  window.HG = {
    run: function (p) {
      RUNS[p.id] = decode(p);
      (WAIT[p.id] || []).forEach(function (cb) { cb(RUNS[p.id]); });
      delete WAIT[p.id];
    }
  };

  function withRun(id, cb) {
    if (RUNS[id]) return cb(RUNS[id]);
    if (WAIT[id]) return WAIT[id].push(cb);
    WAIT[id] = [cb];
    var s = document.createElement("script");
    s.src = META[id].file;
    s.onerror = function () { console.error("could not load " + META[id].file); };
    document.head.appendChild(s);
  }

  // ---- formatting --------------------------------------------------------------------------------
  function num(v, digits) {
    if (v === null || v === undefined) return "—";
    if (Math.abs(v) >= 1e4) return Math.round(v).toLocaleString("en-US");
    var s = Number(v).toPrecision(digits || 4);
    return s.indexOf("e") >= 0 ? String(v) : s;
  }
  function times(v) {
    if (v === null || v === undefined) return "—";
    return '<span class="' + (v > 1 ? "good" : v < 1 ? "bad" : "") + '">' + Number(v).toFixed(3) + "×</span>";
  }
  function pct(v) { return v === null || v === undefined ? "—" : Math.round(100 * v) + "%"; }
  function methodCell(key, name, role) {
    var tag = role && ROLE_TEXT[role] ? ' <span class="tag ' + role + '">' + ROLE_TEXT[role] + "</span>" : "";
    if (key === name) return esc(name) + tag;
    return '<b class="key">' + esc(key) + '</b> <span class="spec" title="' + esc(name) + '">' + esc(name) + "</span>" + tag;
  }
  function h(tag, cls, html) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function chartWidth() { return Math.max(320, Math.min(app.clientWidth, 1200) - 260); }

  // ---- navigation --------------------------------------------------------------------------------
  var select = document.getElementById("sel-run");
  select.innerHTML = INDEX.runs.map(function (r) {
    return '<option value="' + r.id + '">' + esc(r.label) + (r.id === INDEX.headline ? "  ★ headline" : "") + "</option>";
  }).join("");
  select.addEventListener("change", function () { location.hash = "#" + select.value; });

  function firstView(run) {
    var vs = run.views;
    var pick = vs.filter(function (v) { return v.mode === "offline" && v.cache === "warm" && v.metric === INDEX.metric; })[0];
    return pick || vs.filter(function (v) { return v.metric === INDEX.metric; })[0] || vs[0];
  }

  function route() {
    var hash = decodeURIComponent(location.hash.slice(1));
    document.getElementById("nav-board").className = hash === "board" ? "on" : "";
    document.getElementById("nav-headline").className = hash === "" ? "on" : "";
    if (hash === "board") return showBoard();
    var parts = hash.split("/");
    var runId = parts[0] ? parts[0].split("-")[0] : INDEX.headline;
    if (!META[runId]) runId = INDEX.headline;
    var meta = META[runId];
    var view = meta.views.filter(function (v) { return v.id === parts[0]; })[0] || firstView(meta);
    select.value = runId;
    app.innerHTML = '<p class="loading">Loading ' + esc(meta.name) + "…</p>";
    withRun(runId, function (run) {
      if (parts[1]) showShape(run, view, parts[1]);
      else showView(run, view, hash === "");
    });
  }
  window.addEventListener("hashchange", route);

  // ---- the cross-run leaderboard -------------------------------------------------------------------
  function showBoard() {
    app.innerHTML = "";
    var s = h("section", "board");
    s.appendChild(h("h2", "", "All methods: each scored in the latest run that measured it"));
    s.appendChild(h("p", "fine",
      "Geometric-mean speedup over <b>" + esc(INDEX.baseline) + "</b> (offline, warm cache, device time, each " +
      "method's faster layout per shape vs the baseline's), over all its shapes and per shape class. Every speedup " +
      "is paired within its own run; rows of different runs cover different shapes and times, so each row names " +
      "its run. The list starts with methods measured on at least " + INDEX.board_min_shapes + " shapes (the fewest " +
      "with a CI; clear the filter under <i>shapes</i> for every method). Classes: " + INDEX.classes.map(function (c) { return "<b>" + c.id + "</b> " + esc(c.text); }).join("; ") + "."));
    var cols = [
      {key: "method", label: "method", cell: function (r) { return methodCell(r.key, r.method, r.role); },
       search: function (r) { return r.key + " " + r.method + " " + r.role; }},
      {key: "geomean", label: "speedup (geomean)", num: true, cell: function (r) { return times(r.geomean); }},
      {key: "ci_lo", label: "95% CI", num: true, title: "bootstrap over the method's shapes", cell: function (r) {
        return r.ci_lo === null ? "no CI" : r.ci_lo.toFixed(3) + "× – " + r.ci_hi.toFixed(3) + "×";
      }, csv: function (r) { return r.ci_lo === null ? "" : r.ci_lo + ".." + r.ci_hi; }},
      {key: "win_rate", label: "win rate", num: true, cell: function (r) { return pct(r.win_rate); }},
      {key: "shapes", label: "shapes", num: true}
    ];
    INDEX.classes.forEach(function (c) {
      cols.push({key: c.id, label: c.id, num: true, title: c.text, cell: function (r) {
        return r[c.id] === null ? "—" : times(r[c.id]) + ' <small>(' + r[c.id + "_n"] + ")</small>";
      }});
    });
    cols.push({key: "run_name", label: "run", cell: function (r) {
      return '<a href="#' + r.run + '">' + esc(r.run_name) + "</a> <small>" + esc(r.started) + "</small>";
    }, csv: function (r) { return r.run_name + " (" + r.run_id + ")"; }});
    var host = h("div");
    s.appendChild(host);
    app.appendChild(s);
    T.Table(host, {columns: cols, rows: INDEX.board, sort: {key: "geomean", dir: -1}, csv: "leaderboard-all-runs.csv",
                   filters: {shapes: ">=" + INDEX.board_min_shapes},
                   cls: "board", rowCls: function (r) { return r.role; }});
  }

  // ---- one view of one run -----------------------------------------------------------------------
  function viewSwitch(run, view) {
    var bar = h("div", "switch");
    ["mode", "cache", "metric"].forEach(function (dim) {
      var opts = [];
      run.views.forEach(function (v) { if (opts.indexOf(v[dim]) < 0) opts.push(v[dim]); });
      var seg = h("span", "seg");
      seg.dataset.dim = dim;
      opts.forEach(function (o) {
        var want = {mode: view.mode, cache: view.cache, metric: view.metric};
        want[dim] = o;
        // the closest existing view: keep as much of the current choice as possible
        var best = run.views[0], score = -1;
        run.views.forEach(function (v) {
          var sc = (v.mode === want.mode ? 4 : 0) + (v.cache === want.cache ? 2 : 0) + (v.metric === want.metric ? 1 : 0) +
            (v[dim] === o ? 8 : 0);
          if (sc > score) { score = sc; best = v; }
        });
        var a = h("a", o === view[dim] ? "on" : "", esc(LABELS[o] || o));
        a.href = "#" + best.id;
        seg.appendChild(a);
      });
      bar.appendChild(seg);
    });
    return bar;
  }

  function headlineSentence(view) {
    var top = view.entries.filter(function (e) {
      return e.layout === "best" && !e.baseline && e.geomean !== null && e.ranked;
    })[0];
    if (!view.baseline || !top) {
      return view.baseline ? '<p class="headline">No method other than the baseline was measured on enough shapes ' +
        "here for a confidence interval; the leaderboard lists them below.</p>" : "";
    }
    var lead = top.geomean > 1 ? "Fastest: <b>" + esc(top.method) + "</b>" :
      "No method beats <b>" + esc(view.baseline) + "</b> on average; the closest is <b>" + esc(top.method) + "</b>";
    return '<p class="headline">' + lead + ", geometric-mean speedup " + times(top.geomean) + " over <b>" +
      esc(view.baseline) + "</b> (" + esc(top.ci_long) + "), faster on " + top.wins + " of " + top.covered +
      " shapes, best layout per shape.</p>";
  }

  function showView(run, viewMeta, isHeadline) {
    var view = run.views.filter(function (v) { return v.id === viewMeta.id; })[0];
    var rows = run.rows[view.id];
    app.innerHTML = "";
    var s = h("section", "view");
    s.id = view.id;
    s.dataset.run = run.id;
    if (isHeadline) {
      var full = "a full comparison (every cuBLAS-family baseline and at least one other method, offline, on a GPU)";
      s.appendChild(h("p", "banner lead", "<b>Headline</b>: " + (INDEX.headline_chosen ?
        "the run chosen for this site" + (META[run.id].full ? ", " + full + "." : ".") :
        (META[run.id].full ? "the latest " + full.slice(2) + "." : "the run chosen for this site.")) +
        ' Other runs: the <b>Run</b> list; every method at once: <a href="#board">All methods</a>.'));
    }
    if (run.cpu) {
      s.appendChild(h("p", "banner cpu", "CPU results: this run measured on the CPU (device = cpu). The numbers test the pipeline; they say nothing about GPU kernels."));
    }
    s.appendChild(h("h2", "", esc(run.name)));
    s.appendChild(h("p", "runmeta", esc(run.gpu) + " · started " + esc(META[run.id].started) + " UTC · run <code>" +
      esc(run.run_id) + "</code> · " + META[run.id].methods + " methods · " + META[run.id].shapes + " shapes"));
    s.appendChild(viewSwitch(run, view));
    s.appendChild(h("h3", "", esc(view.mode) + " · " + esc(view.cache) + " cache · " + esc(view.metric_label)));
    s.insertAdjacentHTML("beforeend", headlineSentence(view));
    if (view.baseline_note) s.appendChild(h("p", "note", esc(view.baseline_note)));

    s.appendChild(h("h3", "", "Leaderboard"));
    var lay = h("span", "seg lb-layout");
    ["best", "nn", "tn", "all"].forEach(function (l) {
      var b = h("button", l === "best" ? "on" : "", l === "best" ? "best layout" : l);
      b.type = "button";
      b.dataset.layout = l;
      lay.appendChild(b);
    });
    s.appendChild(lay);
    var lbHost = h("div", "leaderboard");
    s.appendChild(lbHost);
    var entryCols = [
      {key: "rank", label: "#", num: true, title: "methods with a CI first (enough shapes), then by speedup"},
      {key: "label", label: "method", cell: function (e) {
        return methodCell(run.keys[e.method] || e.method, e.label, run.roles[e.method]) +
          (e.baseline ? ' <span class="tag ref">speedups are over this</span>' : "");
      }, search: function (e) { return (run.keys[e.method] || "") + " " + e.label; }},
      {key: "geomean", label: "speedup (geomean)", num: true, cell: function (e) { return times(e.geomean); }},
      {key: "ci", label: "95% CI", title: "bootstrap over shapes", cell: function (e) { return '<span class="nowrap">' + esc(e.ci) + "</span>"; }},
      {key: "win_rate", label: "win rate", num: true, cell: function (e) {
        return e.baseline ? "—" : pct(e.win_rate) + " <small>(" + e.wins + "/" + e.covered + ")</small>";
      }},
      {key: "covered", label: "shapes", num: true, cell: function (e) { return e.covered + "/" + e.shapes; }},
      {key: "gate_failures", label: "gate failures", num: true},
      {key: "suspect", label: "suspect", num: true, title: "rows faster than the physical floor: never ranked"},
      {key: "time_us", label: "time (geomean µs)", num: true, cell: function (e) { return num(e.time_us); }}
    ];
    if (view.entries.some(function (e) { return e.compile_s !== null; })) {
      entryCols.push({key: "compile_s", label: "compile (s, median)", num: true,
                      title: "seconds the method spent compiling per shape (compile_s), median over its rows",
                      cell: function (e) { return e.compile_s === null ? "—" : num(e.compile_s, 3); }});
    }
    function entriesFor(l) {
      return view.entries.filter(function (e) { return l === "all" || e.layout === l; });
    }
    var lb = T.Table(lbHost, {columns: entryCols, rows: entriesFor("best"),
                              csv: run.name.replace(/\W+/g, "-") + "-" + view.id + "-leaderboard.csv",
                              rowCls: function (e) { return e.baseline ? "baseline" : e.ranked ? "" : "few"; }});
    lay.addEventListener("click", function (ev) {
      var b = ev.target.closest("button");
      if (!b) return;
      lay.querySelectorAll("button").forEach(function (x) { x.className = x === b ? "on" : ""; });
      lb.setRows(entriesFor(b.dataset.layout));
    });
    s.appendChild(h("p", "fine", "Speedup = " + esc(view.baseline || "baseline") + " median / method median, paired " +
      "per shape within this run, same layout (best layout: each method's faster layout per shape vs the baseline's " +
      "faster layout). Win rate: shapes where the method is faster. Methods on fewer than " + INDEX.board_min_shapes +
      " shapes (no CI; greyed) are listed after the rest. Gate failures and suspect rows are never ranked."));

    s.appendChild(h("h3", "", "Charts"));
    var charts = h("div", "charts");
    s.appendChild(charts);

    var byModel = modelRows(rows);
    if (byModel.length) {
      s.appendChild(h("h3", "", "By model layer"));
      s.appendChild(h("p", "fine", "Shapes taken from model configs (<code>--shapes model:…</code>), grouped by the " +
        "model layer they come from (a shape several layers share counts for each): geometric-mean speedup " +
        "over the layer's shapes, best layout per shape."));
      var mHost = h("div", "models");
      s.appendChild(mHost);
      T.Table(mHost, {columns: [
        {key: "origin", label: "model layer"},
        {key: "method", label: "method", cell: function (r) { return methodCell(r.key, r.method, run.roles[r.method]); },
         search: function (r) { return r.key + " " + r.method; }},
        {key: "speedup", label: "speedup (geomean)", num: true, cell: function (r) { return times(r.speedup); }},
        {key: "shapes", label: "shapes", num: true},
        {key: "ms", label: "M (tokens)", csv: function (r) { return r.ms; }}
      ], rows: byModel, csv: run.name.replace(/\W+/g, "-") + "-" + view.id + "-by-model-layer.csv"});
    }

    s.appendChild(h("h3", "", "Per-shape results"));
    s.appendChild(h("p", "fine", "Click a row for that shape: every method and layout on it, with a chart."));
    var shapeHost = h("div", "shapes");
    s.appendChild(shapeHost);
    T.Table(shapeHost, {columns: rowColumns(view, run), rows: rows, sort: {key: "m", dir: 1},
                        csv: run.name.replace(/\W+/g, "-") + "-" + view.id + "-shapes.csv",
                        rowCls: function (r) { return r.best ? "derived" : ""; },
                        onRow: function (r) { location.hash = "#" + view.id + "/" + r.shape; }});
    s.appendChild(runInfo(run));
    app.appendChild(s);
    if (isHeadline && window.performance && performance.mark) performance.mark("hg-headline");

    var best = rows.filter(function (r) { return r.best; });
    var w = chartWidth();
    var specs = [C.speedupVsSize(best, view.baseline, w), C.distribution(best, view.baseline, w)];
    if (view.metric === "device") specs.push(C.roofline(best, INDEX.meta.floor, w), C.throughput(best, w));
    specs.forEach(function (spec) {
      var d = h("figure", "chart");
      charts.appendChild(d);
      C.draw(d, spec);
    });
    if (view.metric === "device") charts.appendChild(h("p", "fine", esc(INDEX.meta.floor)));
  }

  // Best-layout rows of model shapes, grouped by (model layer, method): geomean speedup, shapes, Ms.
  function modelRows(rows) {
    var groups = Object.create(null), out = [];
    rows.forEach(function (r) {
      if (!r.best || !r.origin || r.speedup === null) return;
      r.origin.split("; ").forEach(function (o) {
        var g = groups[o + "\u0000" + r.method];
        if (!g) {
          g = groups[o + "\u0000" + r.method] = {origin: o, method: r.method, key: r.key, logs: 0, shapes: 0, m: []};
          out.push(g);
        }
        g.logs += Math.log(r.speedup);
        g.shapes += 1;
        if (g.m.indexOf(r.m) < 0) g.m.push(r.m);
      });
    });
    return out.map(function (g) {
      return {origin: g.origin, method: g.method, key: g.key, shapes: g.shapes,
              speedup: Number(Math.exp(g.logs / g.shapes).toPrecision(4)),
              ms: g.m.sort(function (a, b) { return a - b; }).join(", ")};
    });
  }

  function rowColumns(view, run) {
    var cols = [
      {key: "m", label: "M", num: true}, {key: "n", label: "N", num: true}, {key: "k", label: "K", num: true},
      {key: "layout", label: "layout"},
      {key: "method", label: "method", cell: function (r) { return methodCell(r.key, r.method, run.roles[r.method]); },
       search: function (r) { return r.key + " " + r.method; }},
      {key: "time_us", label: "time (µs)", num: true, cell: function (r) { return num(r.time_us); }}
    ];
    if (view.metric === "device") {
      cols.push({key: "ci_lo", label: "median CI (µs)", num: true, cell: function (r) {
        return r.ci_lo === null ? "—" : num(r.ci_lo) + " – " + num(r.ci_hi);
      }, csv: function (r) { return r.ci_lo === null ? "" : r.ci_lo + ".." + r.ci_hi; }});
    }
    cols.push(
      {key: "speedup", label: "speedup", num: true, cell: function (r) { return times(r.speedup); }},
      {key: "tflops", label: "TFLOP/s", num: true, cell: function (r) { return num(r.tflops, 3); }},
      {key: "efficiency", label: "roofline eff.", num: true, title: INDEX.meta.floor, cell: function (r) {
        return r.efficiency === null ? "—" : (100 * r.efficiency).toFixed(1) + "%";
      }},
      {key: "shape_class", label: "class"},
      {key: "origin", label: "model layer", title: "the model GEMM(s) this shape is (model: shapes)"},
      {key: "flags", label: "flags", cell: function (r) { return '<span class="flag">' + esc(r.flags) + "</span>"; }}
    );
    return cols;
  }

  // ---- one shape ---------------------------------------------------------------------------------
  function showShape(run, viewMeta, shape) {
    var view = run.views.filter(function (v) { return v.id === viewMeta.id; })[0];
    var rows = run.rows[view.id].filter(function (r) { return r.shape === shape; });
    app.innerHTML = "";
    var s = h("section", "drill");
    s.id = view.id + "/" + shape;
    s.appendChild(h("p", "crumbs", '<a href="#' + view.id + '">← ' + esc(run.name) + " · " + esc(view.mode) + " · " +
      esc(view.cache) + " · " + esc(view.metric_label) + "</a>"));
    if (!rows.length) {
      s.appendChild(h("p", "note", "No rows for shape " + esc(shape) + " in this view."));
      app.appendChild(s);
      return;
    }
    var r0 = rows[0];
    s.appendChild(h("h2", "", "M = " + r0.m + ", N = " + r0.n + ", K = " + r0.k));
    s.appendChild(h("p", "runmeta", "class <b>" + esc(r0.shape_class) + "</b> · " + num(r0.flop / 1e9, 3) + " GFLOP" +
      (r0.origin ? " · from " + esc(r0.origin) : "") + " · speedups over " + esc(view.baseline || "—")));
    var chart = h("figure", "chart");
    s.appendChild(chart);
    var host = h("div", "shape-rows");
    s.appendChild(host);
    app.appendChild(s);
    T.Table(host, {columns: rowColumns(view, run), rows: rows, sort: {key: "time_us", dir: 1},
                   csv: run.name.replace(/\W+/g, "-") + "-" + view.id + "-" + shape + ".csv",
                   rowCls: function (r) { return r.best ? "derived" : ""; }});
    C.draw(chart, C.shapeTimes(rows, view.metric_label, chartWidth()));
  }

  // ---- a run's facts -------------------------------------------------------------------------------
  function runInfo(run) {
    var d = h("details", "runinfo");
    d.appendChild(h("summary", "", "Run details: gate failures, environment, clocks, method, data"));
    d.appendChild(h("h3", "", "Gate failures, errors and suspect rows (never ranked)"));
    if (run.excluded.length) {
      var ex = h("div");
      d.appendChild(ex);
      T.Table(ex, {columns: ["mode", "cache", "shape", "layout", "method", "why", "rel_fro", "tol_rel_fro",
                             "max_norm", "tol_max_norm", "device_us", "floor_us"].map(function (k) {
        return {key: k, label: k.replace(/_/g, " "), num: /err|fro|norm|_us/.test(k)};
      }), rows: run.excluded, csv: run.run_id + "-excluded.csv", cls: "excluded"});
    } else {
      d.appendChild(h("p", "", "None: every measured row passed the gate and is above the physical floor."));
    }
    if (run.unsupported.length) {
      d.appendChild(h("h3", "", "Not run (the method does not support the shape or device)"));
      d.appendChild(h("table", "grid", "<thead><tr><th>method</th><th>reason</th><th>rows</th><th>shapes</th><th>layouts</th></tr></thead><tbody>" +
        run.unsupported.map(function (u) {
          return "<tr><td>" + esc(u.method) + "</td><td>" + esc(u.reason) + '</td><td class="num">' + u.rows +
            '</td><td class="num">' + u.shapes + "</td><td>" + esc(u.layouts) + "</td></tr>";
        }).join("") + "</tbody>"));
    }
    d.appendChild(h("h3", "", "Environment"));
    d.appendChild(h("table", "env", run.env.map(function (kv) {
      return "<tr><th>" + esc(kv[0]) + "</th><td>" + esc(kv[1]) + "</td></tr>";
    }).join("")));
    var clocks = h("figure", "chart");
    d.appendChild(clocks);
    d.appendChild(h("h3", "", "Method"));
    run.methodology.forEach(function (p) { d.appendChild(h("p", "", esc(p))); });
    d.appendChild(h("h3", "", "Data"));
    d.appendChild(h("ul", "downloads", run.downloads.map(function (f) {
      return '<li><a href="' + esc(f.href) + '" download>' + esc(f.name) + "</a> (" + f.rows + " result rows, schema v" +
        f.schema_version + ")" + (f.samples_dir ? ' · raw samples: <a href="' + esc(f.samples_dir) + '">' +
        f.samples.length + " Parquet parts</a> (" + f.sample_rows + " rows)" : "") + "</li>";
    }).join("")));
    var drawn = false;
    d.addEventListener("toggle", function () {
      if (d.open && !drawn) {
        drawn = true;
        if (run.clocks.length) C.draw(clocks, C.clocks(run.clocks, chartWidth()));
        else clocks.appendChild(h("p", "note", "No clock or power readings in this run (CPU run, or NVML absent)."));
      }
    });
    return d;
  }

  document.getElementById("footer").innerHTML = "Built " + esc(INDEX.meta.built_at) + " by <code>hgemm-bench report</code> from " +
    INDEX.meta.files + " results file(s). Static page: no server, nothing fetched from the network. Charts: Vega-Lite.";
  route();
})();
