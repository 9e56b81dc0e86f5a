/* The graph of a run (traces/views/graph.py): the scrubber walks the run over the graph. The
   slider, ← → Home End, or ?step=N: the step's node and the edges it came by are highlighted
   (asked of /runs/<id>/graph/step/<n>/). On the run page, the "Graph" link carries the step
   the replay is at. Plain JS, no build step, no inline script (the CSP forbids them). */
(function () {
  "use strict";

  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }

  // A folded node stands for the rest of its type ("tool:…other").
  function nodeFor(svg, key) {
    var nodes = Array.prototype.slice.call(svg.querySelectorAll(".g-node"));
    var found = nodes.filter(function (n) { return n.dataset.key === key; })[0];
    if (found) return found;
    var other = key.split(":")[0] + ":…other";
    return nodes.filter(function (n) { return n.dataset.key === other; })[0] || null;
  }

  // On a narrow screen the graph scrolls in its box: bring the step's node into view.
  function reveal(node) {
    var box = node.closest(".graph-box");
    if (!box || box.scrollWidth <= box.clientWidth) return;
    var b = box.getBoundingClientRect(), n = node.getBoundingClientRect();
    box.scrollLeft += n.left - b.left - (b.width - n.width) / 2;
  }

  function highlight(svg, place) {
    svg.querySelectorAll(".g-node.at, .g-edge.at").forEach(function (el) {
      el.classList.remove("at");
    });
    if (!place) return;
    var node = nodeFor(svg, place.node);
    if (node) { node.classList.add("at"); reveal(node); }
    place.edges.forEach(function (pair) {
      var from = nodeFor(svg, pair[0]), to = nodeFor(svg, pair[1]);
      if (!from || !to) return;
      svg.querySelectorAll(".g-edge").forEach(function (e) {
        if (e.dataset.source === from.dataset.key && e.dataset.target === to.dataset.key) {
          e.classList.add("at");
        }
      });
    });
  }

  function initWalk() {
    var page = document.getElementById("graph-page");
    if (!page) return;
    var svg = document.getElementById("graph");
    var slider = document.getElementById("graph-slider");
    var label = document.getElementById("graph-step-label");
    var link = document.getElementById("graph-trace-link");
    var last = parseInt(page.dataset.last, 10) || 0;
    var current = page.dataset.current ? parseInt(page.dataset.current, 10) : null;
    var asked = 0;

    function go(n) {
      if (!last) return;
      n = Math.min(Math.max(n, 1), last);
      current = n;
      slider.value = n;
      label.textContent = "step " + n + " / " + last;
      link.href = page.dataset.traceUrl + "?step=" + n;
      link.textContent = "Step " + n + " in the trace";
      var url = new URL(window.location.href);
      url.searchParams.set("step", n);
      history.replaceState(history.state, "", url.toString());
      var ask = ++asked;
      fetch(page.dataset.stepUrl.replace(/0\/$/, n + "/"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (place) { if (ask === asked) highlight(svg, place); });
    }
    function revealCurrent() {
      var node = svg && svg.querySelector(".g-node.at");
      if (node) reveal(node);
    }
    revealCurrent();
    window.addEventListener("resize", revealCurrent);
    function step(delta) { go(current === null ? (delta > 0 ? 1 : last) : current + delta); }

    slider.addEventListener("input", function () { go(parseInt(slider.value, 10)); });
    page.querySelectorAll("[data-walk]").forEach(function (b) {
      b.addEventListener("click", function () {
        var what = b.dataset.walk;
        if (what === "first") go(1);
        else if (what === "last") go(last);
        else step(what === "next" ? 1 : -1);
      });
    });
    document.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      var t = e.target;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)) &&
          t !== slider) return;
      var moves = { ArrowRight: 1, ArrowLeft: -1 };
      if (e.key in moves) { e.preventDefault(); step(moves[e.key]); }
      else if (e.key === "Home") { e.preventDefault(); go(1); }
      else if (e.key === "End") { e.preventDefault(); go(last); }
    });
  }

  // The run page: the "Graph" link opens the graph at the step the replay shows.
  function initRunLink() {
    var link = document.getElementById("graph-link");
    if (!link) return;
    link.addEventListener("click", function () {
      var n = new URL(window.location.href).searchParams.get("step");
      if (n && /^\d+$/.test(n)) link.href = link.href.split("?")[0] + "?step=" + n;
    });
  }

  ready(function () { initWalk(); initRunLink(); });
})();
