// hgemm-bench report: view selection, leaderboard layout filter, per-shape table (sort, filter),
// the plots' data marks.
// Plain ES2017, no dependencies: the site must work offline from disk.
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("hg-data").textContent);
  var COLS = DATA.columns;
  var MI = COLS.indexOf("method");
  // Decode the compact table JSON (reports/tabledata.py): method, layout and flags cells hold an
  // index into DATA.values[column]; a best-layout row that repeats a measured row of the same view
  // is [index of that row, speedup]. Rows are rebuilt once, so sorting, filtering and display
  // see plain rows. DATA.keys[i]: the short key of DATA.values.method[i] (null: the name is short).
  var LI = COLS.indexOf("layout"), SI = COLS.indexOf("speedup");
  var CODED = Object.keys(DATA.values).map(function (c) { return [COLS.indexOf(c), DATA.values[c]]; });
  Object.keys(DATA.views).forEach(function (id) {
    var rows = DATA.views[id];
    rows.forEach(function (r) {
      if (r.length === COLS.length) CODED.forEach(function (c) { r[c[0]] = c[1][r[c[0]]]; });
    });
    DATA.views[id] = rows.map(function (r) {
      if (r.length === COLS.length) return r;
      var row = rows[r[0]].slice();
      row[LI] = "best (" + row[LI] + ")";
      row[SI] = r[1];
      return row;
    });
  });
  var KEY = Object.create(null);  // full method name -> short key (long names only)
  DATA.values.method.forEach(function (name, i) { if (DATA.keys[i]) KEY[name] = DATA.keys[i]; });
  function keyOf(name) { return KEY[name] || ""; }
  // Plot marks (reports/svg.py Chart.table_marks): a <g data-marks="x,y,row[,fill] ..."> holds
  // one series' marks as data, each naming the row of its view's table it plots. Each becomes a
  // <circle> with its hover <title> written from that row, as reports/plots.py _tip writes it
  // for a heatmap cell: the text is in the page once, in the table data, not again per mark.
  var SVG_NS = "http://www.w3.org/2000/svg";
  var TI = COLS.indexOf("time_us"), TFI = COLS.indexOf("tflops"), EFI = COLS.indexOf("efficiency");
  // The last line of a mark's hover text, by its <g>'s data-tip. Numbers are shown as the table
  // data holds them (4 significant digits): rounding them again would round some the other way.
  var TIP_VALUES = {
    speedup: function (r) { return "speedup " + pyG(r[SI], 4) + "x"; },
    tflops: function (r) { return pyG(r[TFI], 4) + " TFLOP/s"; },
    efficiency: function (r) { return "efficiency " + pyG(100 * r[EFI], 4) + "%"; }
  };

  // Python's format(v, ".<p>g"), which reports/plots.py _tip uses: p significant digits, trailing
  // zeros dropped, exponent form (e+04) from 10^p and below 1e-4. (An exact tie rounds up here,
  // to even in Python; a value of the table data, already at 4 digits, is never one.)
  function pyG(v, p) {
    var s = v.toExponential(p - 1), e = Number(s.slice(s.indexOf("e") + 1));
    var exp = "";
    if (e < -4 || e >= p) {
      exp = "e" + (e < 0 ? "-" : "+") + (Math.abs(e) < 10 ? "0" : "") + Math.abs(e);
      s = s.slice(0, s.indexOf("e"));
    } else {
      s = v.toFixed(p - 1 - e);
    }
    if (s.indexOf(".") >= 0) s = s.replace(/\.?0+$/, "");
    return s + exp;
  }

  // A best-layout row's hover text: method key, shape and winning layout, time, plotted value.
  function markTip(r, value) {
    return (keyOf(r[MI]) || r[MI]) + "\nM=" + r[0] + " N=" + r[1] + " K=" + r[2] + " " +
      r[LI].replace(/^best /, "") + "\n" + pyG(r[TI], 4) + " us\n" + TIP_VALUES[value](r);
  }

  function drawMarks(view) {
    var rows = DATA.views[view.querySelector("table.shapes").dataset.view];
    view.querySelectorAll("svg.chart g[data-marks]").forEach(function (g) {
      var r = g.getAttribute("data-r"), value = g.getAttribute("data-tip");
      var frag = document.createDocumentFragment();
      g.getAttribute("data-marks").split(" ").forEach(function (m) {
        var p = m.split(",");
        var c = document.createElementNS(SVG_NS, "circle"), t = document.createElementNS(SVG_NS, "title");
        c.setAttribute("cx", p[0]);
        c.setAttribute("cy", p[1]);
        c.setAttribute("r", r);
        if (p[3]) c.setAttribute("fill", p[3]);
        t.textContent = markTip(rows[Number(p[2])], value);
        c.appendChild(t);
        frag.appendChild(c);
      });
      g.appendChild(frag);
    });
  }

  var CI = COLS.indexOf("ci_lo");
  var MAX_ROWS = 500;
  var LABELS = {offline: "offline", server: "server", warm: "warm", cold: "cold",
                device: "device time", host: "host time"};
  var state = {run: null, mode: null, cache: null, metric: null};

  function runEl() { return document.getElementById(state.run); }
  function views(run) { return Array.prototype.slice.call(run.querySelectorAll("section.view")); }
  function uniq(a) { return a.filter(function (v, i) { return a.indexOf(v) === i; }); }

  // Pick a complete (mode, cache, metric) that exists in the run, keeping as much of the current
  // choice as possible, so switching one dimension never lands on an empty page.
  function resolve() {
    var vs = views(runEl());
    var dims = ["mode", "cache", "metric"];
    var best = vs[0], bestScore = -1;
    vs.forEach(function (v) {
      var s = 0;
      dims.forEach(function (d, i) { if (v.dataset[d] === state[d]) s += 1 << (2 - i); });
      if (s > bestScore) { bestScore = s; best = v; }
    });
    dims.forEach(function (d) { state[d] = best.dataset[d]; });
    return best;
  }

  function renderSegs() {
    var vs = views(runEl());
    document.querySelectorAll("nav .seg").forEach(function (seg) {
      var dim = seg.dataset.dim;
      var opts = uniq(vs.map(function (v) { return v.dataset[dim]; }));
      seg.innerHTML = "";
      opts.forEach(function (o) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = LABELS[o] || o;
        b.className = o === state[dim] ? "on" : "";
        b.addEventListener("click", function () { state[dim] = o; show(true); });
        seg.appendChild(b);
      });
    });
  }

  // Views are linkable (#r0-offline-warm-device); the hash is only written on user changes, since
  // a hash set during page load makes the browser scroll to it when loading completes.
  function show(userChange) {
    document.querySelectorAll("section.run").forEach(function (r) { r.hidden = r.id !== state.run; });
    var v = resolve();
    views(runEl()).forEach(function (x) { x.hidden = x !== v; });
    renderSegs();
    renderTable(v);
    if (userChange && location.hash.slice(1) !== v.id) history.replaceState(null, "", "#" + v.id);
  }

  // Leaderboard: show one layout family and number the rows shown.
  function layoutFilter(view, layout) {
    view.querySelectorAll(".lb-layout button").forEach(function (b) {
      b.className = b.dataset.layout === layout ? "on" : "";
    });
    var n = 0;
    view.querySelectorAll("tr.lb-row").forEach(function (tr) {
      var vis = layout === "all" || tr.dataset.layout === layout;
      tr.hidden = !vis;
      if (vis) tr.querySelector(".rank").textContent = String(++n);
    });
  }

  // Filters: a number ("1024") or a comparison ("<=4096", ">512") for M/N/K; substrings otherwise.
  function matcher(col, text) {
    text = text.trim();
    if (!text) return null;
    if (col === "m" || col === "n" || col === "k") {
      var m = /^(<=|>=|<|>|=)?\s*(\d+)$/.exec(text);
      if (!m) return function () { return false; };
      var op = m[1] || "=", x = Number(m[2]);
      return function (v) {
        return op === "=" ? v === x : op === "<" ? v < x : op === ">" ? v > x : op === "<=" ? v <= x : v >= x;
      };
    }
    if (col === "layout") return function (v) { return String(v).indexOf(text) === 0; };
    if (col === "method") return function (v) {
      return (v + " " + keyOf(v)).toLowerCase().indexOf(text.toLowerCase()) >= 0;
    };
    return function (v) { return String(v).toLowerCase().indexOf(text.toLowerCase()) >= 0; };
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return "—";
    v = Number(v);
    if (Math.abs(v) >= 1e4) return Math.round(v).toLocaleString("en-US");
    var s = v.toPrecision(digits || 4);
    return s.indexOf("e") >= 0 ? String(v) : s;
  }

  function renderTable(view) {
    var table = view.querySelector("table.shapes");
    var rows = DATA.views[table.dataset.view] || [];
    var tests = [];
    view.querySelectorAll(".filters .f").forEach(function (f) {
      var t = matcher(f.dataset.col, f.value);
      if (t) tests.push([COLS.indexOf(f.dataset.col), t]);
    });
    var sel = rows.filter(function (r) { return tests.every(function (t) { return t[1](r[t[0]]); }); });
    var sc = table.dataset.sort, dir = table.dataset.dir === "desc" ? -1 : 1;
    if (sc) {
      var i = COLS.indexOf(sc);
      sel = sel.slice().sort(function (a, b) {
        var x = a[i], y = b[i];
        if (x === null) return 1;
        if (y === null) return -1;
        return (x < y ? -1 : x > y ? 1 : 0) * dir;
      });
    }
    var hasCi = !!table.querySelector("th[data-col=ci_lo]");
    var html = sel.slice(0, MAX_ROWS).map(function (r) {
      var sp = r[SI];
      var cls = r[3].indexOf("best") === 0 ? ' class="derived"' : "";
      var key = keyOf(r[MI]) ? '<b class="key">' + esc(keyOf(r[MI])) + "</b> " : "";
      var cells = [r[0], r[1], r[2], esc(r[3]), key + esc(r[MI]), fmt(r[5])];
      if (hasCi) cells.push(r[CI] === null ? "—" : fmt(r[CI]) + " – " + fmt(r[CI + 1]));
      cells.push(sp === null ? "—" : '<span class="' + (sp > 1 ? "good" : sp < 1 ? "bad" : "") + '">' + fmt(sp, 3) + "×</span>");
      cells.push(fmt(r[COLS.indexOf("tflops")], 3));
      var e = r[COLS.indexOf("efficiency")];
      cells.push(e === null ? "—" : (100 * e).toFixed(1) + "%");
      cells.push('<span class="flag">' + esc(r[COLS.indexOf("flags")] || "") + "</span>");
      return "<tr" + cls + "><td>" + cells.join("</td><td>") + "</td></tr>";
    }).join("");
    table.querySelector("tbody").innerHTML = html;
    view.querySelector(".filters .count").textContent =
      sel.length + " of " + rows.length + " rows" + (sel.length > MAX_ROWS ? " (first " + MAX_ROWS + " shown; filter to see more)" : "");
    table.querySelectorAll("th").forEach(function (th) {
      th.className = th.dataset.col === sc ? (dir > 0 ? "asc" : "desc") : "";
    });
  }

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function fromHash() {
    var target = document.getElementById(location.hash.slice(1));
    if (!target || !target.classList.contains("view")) return false;
    state.run = target.closest("section.run").id;
    ["mode", "cache", "metric"].forEach(function (d) { state[d] = target.dataset[d]; });
    document.getElementById("sel-run").value = state.run;
    return true;
  }

  function wire() {
    var sel = document.getElementById("sel-run");
    sel.addEventListener("change", function () { state.run = sel.value; show(true); });
    document.querySelectorAll("section.view").forEach(function (view) {
      drawMarks(view);
      view.querySelectorAll(".lb-layout button").forEach(function (b) {
        b.addEventListener("click", function () { layoutFilter(view, b.dataset.layout); });
      });
      layoutFilter(view, view.querySelector("tr.lb-row[data-layout=best]") ? "best" : "all");
      view.querySelectorAll(".filters .f").forEach(function (f) {
        f.addEventListener("input", function () { renderTable(view); });
      });
      view.querySelectorAll("table.shapes th").forEach(function (th) {
        th.addEventListener("click", function () {
          var t = th.closest("table");
          t.dataset.dir = t.dataset.sort === th.dataset.col && t.dataset.dir !== "desc" ? "desc" : "asc";
          t.dataset.sort = th.dataset.col;
          renderTable(view);
        });
      });
      var ms = view.querySelector(".map-sel");
      if (ms) ms.addEventListener("change", function () {
        // one layer per method in the view's map chart; only the chosen one is displayed
        view.querySelectorAll(".map g.layer").forEach(function (g) {
          g.setAttribute("display", g.getAttribute("data-key") === ms.value ? "inline" : "none");
        });
      });
    });
    // Restore a view from the URL hash (#r0-offline-warm-device) so views can be linked.
    if (!fromHash()) state.run = sel.value;
    window.addEventListener("hashchange", function () { if (fromHash()) show(false); });
    show(false);
  }

  wire();
})();
