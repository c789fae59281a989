// Appended to a copy of the leaderboard page by tests/leaderboard/test_site.py: it drives the page as a reader
// would (real clicks, select and input events) and writes what the page then shows into
// a pre element (id driver-result) as JSON, for chromium --dump-dom to hand back.
(function () {
  "use strict";
  function tick() { return new Promise(function (r) { setTimeout(r, 20); }); }
  function text(node, sel) { var n = node.querySelector(sel); return n ? n.textContent.trim() : null; }

  function readTable() {
    var t = document.getElementById("board");
    if (!t) return null;
    function rows(sel) {
      return Array.prototype.map.call(t.querySelectorAll(sel), function (tr) {
        var cells = {};
        tr.querySelectorAll("td[data-task]").forEach(function (td) {
          var a = td.querySelector("a.cell");
          cells[td.getAttribute("data-task")] = a ? {
            v: text(a, ".v"), sd: text(a, ".sd"), n: text(a, ".n"), best: a.classList.contains("best"),
            tied: !!a.querySelector(".mk.tied"), few: !!a.querySelector(".mk.few"),
            chance: text(a, ".mk.chance"), href: a.getAttribute("href") } : null;
        });
        return { row: tr.getAttribute("data-row"), kind: tr.getAttribute("data-kind"),
          name: text(tr, "th .fam"), cells: cells };
      });
    }
    return { view: t.getAttribute("data-view"), protocol: t.getAttribute("data-protocol"),
      preset: t.getAttribute("data-preset"), device: t.getAttribute("data-device"),
      metric: t.getAttribute("data-metric"),
      measured: rows("tbody.measured tr[data-row]"), variants: rows("tbody.variants tr[data-row]"),
      published: rows("tbody.published tr.pub") };
  }

  function readDetail() {
    var d = document.getElementById("detail");
    if (!d || d.hidden) return null;
    return { heading: text(d, "h3"),
      seeds: Array.prototype.map.call(d.querySelectorAll("table.seeds thead th[data-seed]"),
        function (th) { return th.textContent.trim(); }),
      files: Array.prototype.map.call(d.querySelectorAll("table.seeds a.file"),
        function (a) { return a.getAttribute("href"); }),
      curves: d.querySelectorAll("svg polyline.line").length };
  }

  function state() {
    var visible = ["accuracy", "efficiency", "peers"].filter(function (p) {
      return !document.getElementById("page-" + p).hidden; });
    var cur = document.querySelector('#nav a[aria-current="page"]');
    return { hash: location.hash, page: visible, nav: cur ? cur.getAttribute("href") : null,
      warn: text(document, ".warn"), table: readTable(), detail: readDetail(),
      bubbles: document.querySelectorAll("#page-efficiency circle.bubble").length,
      settings: Array.prototype.map.call(document.querySelectorAll("#page-efficiency article.setting"),
        function (a) { return { id: a.id, scaling: a.querySelectorAll("figure.scaling-fig").length,
          oneLength: a.querySelectorAll("p.one-length").length }; }),
      peersRows: document.querySelectorAll("#page-peers table.peers tbody tr").length };
  }

  function order() { return readTable().measured.map(function (r) { return r.row; }); }

  async function actions(out) {
    var views = Array.prototype.map.call(document.querySelectorAll("#nav a"),
      function (a) { return a.getAttribute("href"); })
      .filter(function (h) { return h !== "#efficiency" && h !== "#peers" && h !== "#recall"; });
    out.tables = [];
    for (var i = 0; i < views.length; i++) {
      document.querySelector('#nav a[href="' + views[i] + '"]').click();
      await tick();
      var sel = document.getElementById("metric");
      for (var j = 0; j < sel.options.length; j++) {
        sel.value = sel.options[j].value;
        sel.dispatchEvent(new Event("change"));
        out.tables.push(readTable());
      }
    }
    document.querySelector('#nav a[href="' + views[0] + '"]').click();
    await tick();
    function sortBy(col) { document.querySelector('#board button[data-col="' + col + '"]').click(); }
    out.sort = { initial: order() };
    sortBy("listops"); out.sort.listopsFirst = order();
    sortBy("listops"); out.sort.listopsSecond = order();
    sortBy("name"); out.sort.nameFirst = order();
    sortBy("name"); out.sort.nameSecond = order();
    sortBy("name");
    var kind = document.getElementById("kind");
    kind.value = "state space";
    kind.dispatchEvent(new Event("change"));
    out.kindFilter = readTable().measured;
    kind.value = "";
    kind.dispatchEvent(new Event("change"));
    var q = document.getElementById("q");
    q.value = "MAMBA";
    q.dispatchEvent(new Event("input"));
    out.nameFilter = readTable().measured;
    q.value = "";
    q.dispatchEvent(new Event("input"));
    var pub = document.getElementById("published");
    pub.click();
    out.withPublished = readTable().published;
    pub.click();
    out.withoutPublished = readTable().published;
    var cell = document.querySelector('#board tr[data-row="mamba"] td[data-task="listops"] a.cell');
    cell.click();
    await tick();
    out.opened = { hash: location.hash, detail: readDetail() };
    document.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
    await tick();
    out.closed = { hash: location.hash, detail: readDetail() };
  }

  window.addEventListener("load", async function () {
    var out = { initial: state() };
    try {
      if (/[?&]actions=1/.test(location.search)) await actions(out);
    } catch (e) {
      out.error = String(e && e.stack || e);
    }
    var pre = document.createElement("pre");
    pre.id = "driver-result";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  });
})();
