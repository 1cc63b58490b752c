// hgemm-bench report: the charts, as Vega-Lite specs drawn by vega-embed. The three vendored
// libraries (static/vendor/) are loaded on first use, so the first paint never waits for them.
// Each spec takes the rows of a view's per-shape table (best-layout rows: one point per method
// and shape) and says what it plots in its title and axes. Plain ES2017.
(function () {
  "use strict";
  var LIBS = ["static/vendor/vega.min.js", "static/vendor/vega-lite.min.js", "static/vendor/vega-embed.min.js"];
  var state = "idle", waiting = [];

  function withVega(cb) {
    if (state === "ready") return cb();
    waiting.push(cb);
    if (state !== "idle") return;
    state = "loading";
    (function next(i) {
      if (i === LIBS.length) {
        state = "ready";
        waiting.splice(0).forEach(function (f) { f(); });
        return;
      }
      var s = document.createElement("script");
      s.src = LIBS[i];
      s.onload = function () { next(i + 1); };
      s.onerror = function () { console.error("could not load " + LIBS[i]); };
      document.head.appendChild(s);
    })(0);
  }

  var LOG = {type: "log"};
  var SI = {format: "~s", labelOverlap: "greedy"};  // 1e9 -> "1G"
  var TIP = [
    {field: "key", title: "method"}, {field: "shape", title: "M_N_K"}, {field: "best_of", title: "layout"},
    {field: "time_us", title: "time (µs)", format: ".4g"}, {field: "speedup", title: "speedup", format: ".4g"}
  ];

  function legend(n) {
    return {title: "method", columns: n > 24 ? 2 : 1, symbolLimit: 0, labelLimit: 180};
  }

  function base(title, values, width, height) {
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v6.json",  // an identifier only: nothing is fetched
      title: title, width: width, height: height, data: {values: values},
      config: {view: {stroke: "#ddd"}, axis: {labelFontSize: 11, titleFontSize: 12}, legend: {labelFontSize: 11}}
    };
  }

  function oneRule(y) {
    return {mark: {type: "rule", strokeDash: [4, 4], color: "#555"}, encoding: {y: {datum: y}}};
  }

  function speedupVsSize(rows, baseline, width) {
    var pts = rows.filter(function (r) { return r.speedup !== null && r.method !== baseline; });
    var s = base("Speedup over " + baseline + " vs problem size (best layout per shape)", pts, width, 320);
    s.layer = [oneRule(1), {
      mark: {type: "point", filled: true, size: 36, opacity: 0.8},
      encoding: {
        x: {field: "flop", type: "quantitative", scale: LOG, axis: SI, title: "problem size: 2·M·N·K FLOP (log)"},
        y: {field: "speedup", type: "quantitative", scale: LOG, title: "speedup over " + baseline + " (log; > 1 faster)"},
        color: {field: "key", type: "nominal", legend: legend(count(pts))}, tooltip: TIP
      }
    }];
    return pts.length ? s : null;
  }

  function distribution(rows, baseline, width) {
    var pts = rows.filter(function (r) { return r.speedup !== null && r.method !== baseline; });
    var n = count(pts);
    var s = base("Per-shape speedups over " + baseline + ", per method (box: quartiles, whiskers: min to max)",
                 pts, width, Math.max(60, 22 * n));
    s.layer = [{mark: {type: "rule", strokeDash: [4, 4], color: "#555"}, encoding: {x: {datum: 1}}}, {
      mark: {type: "boxplot", extent: "min-max", size: 14},
      encoding: {
        y: {field: "key", type: "nominal", title: null, sort: {op: "median", field: "speedup", order: "descending"}},
        x: {field: "speedup", type: "quantitative", scale: LOG, title: "speedup over " + baseline + " (log; > 1 faster)"},
        color: {field: "key", type: "nominal", legend: null}
      }
    }];
    return pts.length ? s : null;
  }

  function roofline(rows, floor, width) {
    var pts = rows.filter(function (r) { return r.efficiency !== null; });
    var s = base("Roofline efficiency: physical floor / measured time", pts, width, 300);
    s.description = floor;
    s.layer = [oneRule(1), {
      mark: {type: "point", filled: true, size: 30, opacity: 0.8},
      encoding: {
        x: {field: "ai", type: "quantitative", scale: LOG, title: "arithmetic intensity: FLOP per minimum byte (log)"},
        y: {field: "efficiency", type: "quantitative", scale: LOG, title: "efficiency (log; 1 = at the floor)"},
        color: {field: "key", type: "nominal", legend: legend(count(pts))},
        tooltip: TIP.concat([{field: "efficiency", title: "efficiency", format: ".1%"}])
      }
    }];
    return pts.length ? s : null;
  }

  function throughput(rows, width) {
    var pts = rows.filter(function (r) { return r.tflops !== null; });
    var s = base("Throughput vs problem size (this run only: never compare across runs)", pts, width, 300);
    s.layer = [{
      mark: {type: "point", filled: true, size: 30, opacity: 0.8},
      encoding: {
        x: {field: "flop", type: "quantitative", scale: LOG, axis: SI, title: "problem size: 2·M·N·K FLOP (log)"},
        y: {field: "tflops", type: "quantitative", scale: LOG, title: "TFLOP/s (log)"},
        color: {field: "key", type: "nominal", legend: legend(count(pts))},
        tooltip: TIP.concat([{field: "tflops", title: "TFLOP/s", format: ".4g"}])
      }
    }];
    return pts.length ? s : null;
  }

  // One shape: every method and layout's time with its median CI.
  function shapeTimes(rows, metricLabel, width) {
    var pts = rows.filter(function (r) { return r.time_us !== null && r.layout.indexOf("best") !== 0; });
    var s = base("Time per call, " + metricLabel + " (bar: median; line: its 95% CI where measured)",
                 pts, width, Math.max(60, 20 * pts.length));
    var y = {field: "entry", type: "nominal", title: null, sort: {field: "time_us", order: "ascending"}};
    s.layer = [{
      mark: {type: "bar", height: 14},
      encoding: {
        y: y, x: {field: "time_us", type: "quantitative", title: "µs"},
        color: {field: "layout", type: "nominal", title: "layout"},
        tooltip: [{field: "entry", title: "method"}, {field: "time_us", title: "median µs", format: ".4g"},
                  {field: "ci_lo", title: "CI low", format: ".4g"}, {field: "ci_hi", title: "CI high", format: ".4g"},
                  {field: "speedup", title: "speedup", format: ".4g"}]
      }
    }, {
      mark: {type: "rule", color: "#222"},
      encoding: {y: y, x: {field: "ci_lo", type: "quantitative"}, x2: {field: "ci_hi"}}
    }];
    return pts.length ? s : null;
  }

  function clocks(points, width) {
    if (!points.length) return null;
    function panel(v, lo, hi, title) {
      return {
        height: 150, width: width,
        layer: [
          {mark: {type: "rule", opacity: 0.5}, encoding: {
            x: {field: "row", type: "quantitative", title: "row in measurement order"},
            y: {field: lo, type: "quantitative", scale: {zero: false}, title: title}, y2: {field: hi},
            color: {field: "series", type: "nominal", title: "mode/cache"}}},
          {mark: {type: "point", filled: true, size: 18}, encoding: {
            x: {field: "row", type: "quantitative"}, y: {field: v, type: "quantitative", scale: {zero: false}},
            color: {field: "series", type: "nominal"},
            tooltip: [{field: "series"}, {field: "row", title: "first row"}, {field: "rows", title: "rows"},
                      {field: v, title: title + " (mean)", format: ".4g"}, {field: lo, title: "min", format: ".4g"},
                      {field: hi, title: "max", format: ".4g"}, {field: "throttled", title: "rows throttled"}]}}
        ]
      };
    }
    var s = base("SM clock and power through the run (a point: mean of its rows; a line: their min to max)",
                 points, undefined, undefined);
    delete s.width;
    delete s.height;
    s.vconcat = [panel("sm", "sm_lo", "sm_hi", "SM clock (MHz)"), panel("power", "power_lo", "power_hi", "power (W)")];
    return s;
  }

  function count(pts) {
    var seen = Object.create(null), n = 0;
    pts.forEach(function (p) { if (!seen[p.key]) { seen[p.key] = 1; n += 1; } });
    return n;
  }

  // Draw spec into host (nothing when spec is null); errors reach the console, where tests see them.
  function draw(host, spec) {
    if (!spec) {
      host.innerHTML = '<p class="note">Nothing to plot in this view.</p>';
      return;
    }
    host.classList.add("pending");
    withVega(function () {
      window.vegaEmbed(host, spec, {actions: false, renderer: "svg"}).then(function () {
        host.classList.remove("pending");
        host.classList.add("drawn");
      }).catch(function (e) { console.error("chart failed: " + e); });
    });
  }

  window.HGCharts = {
    draw: draw, speedupVsSize: speedupVsSize, distribution: distribution, roofline: roofline,
    throughput: throughput, shapeTimes: shapeTimes, clocks: clocks
  };
})();
