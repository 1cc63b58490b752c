// hgemm-bench report: one table widget for every table of the page. Sort by clicking a header
// (again: descending), filter with the input under each header (numbers: "1024", ">=512",
// "<4096"; text: a substring), download what is shown (every filtered row, in the shown
// order) as CSV. Plain ES2017, no dependencies.
(function () {
  "use strict";
  var MAX_ROWS = 500;  // rows drawn at once; the CSV holds every filtered row

  function esc(s) {
    return String(s === null || s === undefined ? "" : s)
      .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  // A filter's test for one column: a number or a comparison for numeric columns, else a substring.
  function matcher(col, text) {
    text = text.trim();
    if (!text) return null;
    if (col.num) {
      var m = /^(<=|>=|<|>|=)?\s*(-?[\d.]+(?:e[+-]?\d+)?)$/i.exec(text);
      if (!m) return function () { return false; };
      var op = m[1] || "=", x = Number(m[2]);
      return function (v) {
        if (v === null || v === undefined) return false;
        return op === "=" ? v === x : op === "<" ? v < x : op === ">" ? v > x : op === "<=" ? v <= x : v >= x;
      };
    }
    var low = text.toLowerCase();
    return function (v, row) {
      var s = col.search ? col.search(row) : v;
      return String(s === null || s === undefined ? "" : s).toLowerCase().indexOf(low) >= 0;
    };
  }

  function csvCell(v) {
    if (v === null || v === undefined) return "";
    var s = String(v);
    return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  // A CSV of rows under the columns' keys (raw values, not the formatted cells).
  function toCsv(columns, rows) {
    var lines = [columns.map(function (c) { return csvCell(c.csvName || c.key); }).join(",")];
    rows.forEach(function (r) {
      lines.push(columns.map(function (c) { return csvCell(c.csv ? c.csv(r) : r[c.key]); }).join(","));
    });
    return lines.join("\n") + "\n";
  }

  function download(name, text) {
    var url = URL.createObjectURL(new Blob([text], {type: "text/csv"}));
    var a = document.createElement("a");
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }

  // opts: columns [{key, label, num, title, cell(row) -> html, csv(row), search(row)}], rows,
  // sort {key, dir: 1 | -1}, filters {key: text} (shown in the filter inputs), csv (file name), cls,
  // onRow(row) (rows become links to it), rowCls(row).
  function Table(host, opts) {
    var state = {sort: opts.sort ? opts.sort.key : null, dir: opts.sort ? opts.sort.dir || 1 : 1,
                 filters: Object.assign({}, opts.filters || {})};
    var cols = opts.columns;
    host.innerHTML = "";
    var bar = document.createElement("div");
    bar.className = "tbar";
    bar.innerHTML = '<span class="count"></span> <button type="button" class="csv">Download CSV</button>';
    var box = document.createElement("div");
    box.className = "tablebox";
    var table = document.createElement("table");
    table.className = "grid " + (opts.cls || "");
    var head = "<thead><tr>" + cols.map(function (c) {
      return '<th data-col="' + esc(c.key) + '"' + (c.title ? ' title="' + esc(c.title) + '"' : "") +
        (c.num ? ' class="num"' : "") + ">" + esc(c.label) + "</th>";
    }).join("") + '</tr><tr class="filters">' + cols.map(function (c) {
      return '<th><input class="f" data-col="' + esc(c.key) + '" aria-label="filter ' + esc(c.label) +
        '" placeholder="' + (c.num ? "=, <, >" : "filter") + '" value="' + esc(state.filters[c.key] || "") + '"></th>';
    }).join("") + "</tr></thead><tbody></tbody>";
    table.innerHTML = head;
    box.appendChild(table);
    host.appendChild(bar);
    host.appendChild(box);

    function shown() {
      var tests = [];
      cols.forEach(function (c) {
        var t = state.filters[c.key] ? matcher(c, state.filters[c.key]) : null;
        if (t) tests.push([c.key, t]);
      });
      var sel = opts.rows.filter(function (r) {
        return tests.every(function (t) { return t[1](r[t[0]], r); });
      });
      if (state.sort) {
        var k = state.sort, d = state.dir;
        sel = sel.slice().sort(function (a, b) {
          var x = a[k], y = b[k];
          if (x === null || x === undefined) return y === null || y === undefined ? 0 : 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : x > y ? 1 : 0) * d;
        });
      }
      return sel;
    }

    function draw() {
      var sel = shown();
      var body = sel.slice(0, MAX_ROWS).map(function (r, i) {
        var cls = (opts.rowCls ? opts.rowCls(r) : "") + (opts.onRow ? " link" : "");
        return '<tr data-i="' + i + '"' + (cls.trim() ? ' class="' + cls.trim() + '"' : "") + ">" + cols.map(function (c) {
          return "<td" + (c.num ? ' class="num"' : "") + ">" + (c.cell ? c.cell(r) : esc(r[c.key])) + "</td>";
        }).join("") + "</tr>";
      }).join("");
      table.tBodies[0].innerHTML = body;
      bar.querySelector(".count").textContent = sel.length + " of " + opts.rows.length + " rows" +
        (sel.length > MAX_ROWS ? " (first " + MAX_ROWS + " drawn; filter to see more, the CSV has all)" : "");
      table.querySelectorAll("thead tr:first-child th").forEach(function (th) {
        th.className = (th.dataset.col === state.sort ? (state.dir > 0 ? "asc" : "desc") : "") +
          (cols.filter(function (c) { return c.key === th.dataset.col; })[0].num ? " num" : "");
      });
      table._shown = sel;
    }

    table.querySelectorAll("thead tr:first-child th").forEach(function (th) {
      th.addEventListener("click", function () {
        state.dir = state.sort === th.dataset.col && state.dir > 0 ? -1 : 1;
        state.sort = th.dataset.col;
        draw();
      });
    });
    table.querySelectorAll("input.f").forEach(function (inp) {
      inp.addEventListener("input", function () { state.filters[inp.dataset.col] = inp.value; draw(); });
    });
    bar.querySelector(".csv").addEventListener("click", function () {
      download(opts.csv || "table.csv", toCsv(cols, shown()));
    });
    if (opts.onRow) {
      table.tBodies[0].addEventListener("click", function (ev) {
        if (ev.target.closest("a")) return;
        var tr = ev.target.closest("tr");
        if (tr) opts.onRow(table._shown[Number(tr.dataset.i)]);
      });
    }
    draw();
    return {redraw: draw, setRows: function (rows) { opts.rows = rows; draw(); }};
  }

  window.HGTable = {Table: Table, esc: esc, toCsv: toCsv};
})();
