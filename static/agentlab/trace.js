/* Agent Lab trace viewer: replay of a recorded run (buttons, slider, ← → keys, ?step=N),
   folding the step tree, loading steps up to the current one, and picking two runs to diff.
   Plain JS, no build step; htmx does the rest. */
(function () {
  "use strict";

  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }

  // ------------------------------------------------------------------ runs list: pick two
  function initDiffPick() {
    var form = document.getElementById("diff-form");
    if (!form) return;
    var button = document.getElementById("diff-button");
    var hint = document.getElementById("diff-hint");
    function picked() {
      return Array.prototype.slice.call(
        document.querySelectorAll('input[type=checkbox][form="diff-form"]:checked'));
    }
    function update() {
      var n = picked().length;
      button.disabled = n !== 2;
      hint.textContent = n === 2 ? "Compare the two ticked runs." :
        n > 2 ? "Tick exactly two runs (" + n + " ticked)." : "Tick two runs to compare them.";
    }
    document.addEventListener("change", function (e) {
      if (e.target.matches && e.target.matches('input[form="diff-form"]')) update();
    });
    document.body.addEventListener("htmx:afterSettle", update);
    form.addEventListener("submit", function (e) {
      var runs = picked();
      if (runs.length !== 2) { e.preventDefault(); return; }
      e.preventDefault();
      // The older run is A (left): a fork or a replay is then compared against its origin.
      var ids = runs.map(function (r) { return parseInt(r.value, 10); })
        .sort(function (x, y) { return x - y; });
      window.location.href = form.action + "?a=" + ids[0] + "&b=" + ids[1];
    });
    update();
  }

  // ------------------------------------------------------------------ runs list: live
  // The first page reloads its table every data-refresh-s seconds (the server says how often:
  // often while a run on it is going), so runs show as they change and new ones (a received
  // trace) appear; not while the tab is hidden, nor while runs are ticked for a diff.
  function initRefresh() {
    if (!document.getElementById("run-table") || !window.htmx) return;
    var due = 0;
    setInterval(function () {
      var marker = document.querySelector("#run-table [data-refresh-s]");
      if (!marker || document.hidden) return;
      if (document.querySelector('#run-table input[name=run]:checked')) return;
      if ((due += 1) < Number(marker.dataset.refreshS)) return;
      due = 0;
      window.htmx.ajax("GET", marker.dataset.url, { target: "#run-table", swap: "outerHTML" });
    }, 1000);
  }

  // ------------------------------------------------------------------ runs list: add to suite
  // The ticked runs (the same boxes as "Diff selected") go to the "Add to suite" page as
  // run=… (agentlab/evals/case_views.py add_runs), which asks the suite and the answers.
  function initSuitePick() {
    var form = document.getElementById("suite-form");
    if (!form) return;
    var button = document.getElementById("suite-button");
    var hint = document.getElementById("suite-hint");
    var max = parseInt(form.dataset.max, 10) || 100;
    function picked() {
      return Array.prototype.slice.call(
        document.querySelectorAll('input[type=checkbox][form="diff-form"]:checked'));
    }
    function update() {
      var n = picked().length;
      button.disabled = n === 0 || n > max;
      button.textContent = n ? "Add " + n + " to suite…" : "Add to suite…";
      hint.textContent = n > max ? "At most " + max + " runs at once (" + n + " ticked)." :
        n ? "Their questions become cases, their answers the expected ones." :
        "Tick runs to make cases of a suite from them.";
    }
    document.addEventListener("change", function (e) {
      if (e.target.matches && e.target.matches('input[form="diff-form"]')) update();
    });
    document.body.addEventListener("htmx:afterSettle", update);
    form.addEventListener("submit", function (e) {
      var runs = picked();
      e.preventDefault();
      if (!runs.length || runs.length > max) return;
      var query = runs.map(function (r) { return "run=" + encodeURIComponent(r.value); });
      window.location.href = form.action + "?" + query.join("&");
    });
    update();
  }

  // ------------------------------------------------------------------ one run: replay
  // The page-wide listeners (keys, [data-go] links, htmx settles) are added once and act on
  // the trace shown now: live.js replaces the trace when a live run ends, and then this
  // starts again on the new one.
  var T = null;
  var wired = false;

  function wireDocument() {
    if (wired) return;
    wired = true;
    document.addEventListener("click", function (e) {
      var link = e.target.closest("[data-go]");
      if (!T || !link || e.metaKey || e.ctrlKey || e.shiftKey) return;
      e.preventDefault();
      T.go(parseInt(link.dataset.go, 10));
    });
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (!T || e.altKey || e.ctrlKey || e.metaKey) return;
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
      var keys = {ArrowRight: function () { return T.neighbour(1); },
                  ArrowLeft: function () { return T.neighbour(-1); },
                  Home: function () { return 1; }, End: function () { return T.last(); }};
      if (!keys[e.key]) return;
      e.preventDefault();
      T.go(keys[e.key]());
    });
    document.body.addEventListener("htmx:afterSettle", function () { if (T) T.settled(); });
    document.addEventListener("agentlab:trace-replaced", initTrace);
  }

  function initTrace() {
    wireDocument();
    var trace = document.getElementById("trace");
    T = null;
    if (!trace) return;
    var list = document.getElementById("steps");
    var slider = document.getElementById("replay-slider");
    var label = document.getElementById("replay-label");
    var messagesButton = document.getElementById("replay-messages");
    var last = parseInt(trace.dataset.last, 10) || 0;
    var stepsUrl = trace.dataset.stepsUrl;
    var current = trace.dataset.current ? parseInt(trace.dataset.current, 10) : null;
    var loading = null;
    var FAR = 1000;  // steps ahead beyond which the replay jumps rather than loads on

    function stepEls() { return list.querySelectorAll(".step[data-seq]"); }
    function seqOf(el) { return parseInt(el.dataset.seq, 10); }
    function loadedUpTo() {
      var els = stepEls();
      return els.length ? seqOf(els[els.length - 1]) : 0;
    }

    function loadedFrom() {
      var first = list.querySelector(".step[data-seq]");
      return first ? seqOf(first) : 0;
    }

    // A step far from those on the page: the page of steps around it replaces them (one
    // request, whatever the run's length), with "load earlier" and "load more" around it.
    function jumpTo(n) {
      var url = stepsUrl + "?around=" + encodeURIComponent(n);
      loading = fetch(url, {headers: {"HX-Request": "true"}, credentials: "same-origin"})
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
        .then(function (html) {
          list.innerHTML = html;
          if (window.htmx) htmx.process(list);
          markParents();
        })
        .finally(function () { loading = null; });
      return loading;
    }

    // Fetch pages until step n is in the page (or there is nothing more to load).
    function ensureLoaded(n) {
      var more = document.getElementById("steps-more");
      // while the slider is dragged, only the step it rests on is fetched
      if (loading) return loading.then(function () { if (current === n) return ensureLoaded(n); });
      var before = document.getElementById("steps-before");
      if ((before && n < loadedFrom()) || (more && n > loadedUpTo() + FAR)) return jumpTo(n);
      if (!more || loadedUpTo() >= n) return Promise.resolve();
      var after = more.dataset.after;
      loading = fetch(stepsUrl + "?after=" + encodeURIComponent(after) + "&upto=" + n,
                      {headers: {"HX-Request": "true"}, credentials: "same-origin"})
        .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
        .then(function (html) {
          var still = document.getElementById("steps-more");
          if (!still || still.dataset.after !== after) return;  // htmx got there first
          var tpl = document.createElement("template");
          tpl.innerHTML = html;
          var nodes = Array.prototype.slice.call(tpl.content.children);
          still.replaceWith(tpl.content);
          nodes.forEach(function (node) { if (window.htmx) htmx.process(node); });
          markParents();
        })
        .finally(function () { loading = null; });
      return loading.then(function () {
        var next = document.getElementById("steps-more");
        if (next && next.dataset.after !== after && loadedUpTo() < n) return ensureLoaded(n);
      });
    }

    function find(n) {
      // Seqs are 1..N without gaps in practice; fall back to the nearest earlier step.
      var el = document.getElementById("step-" + n);
      if (el) return el;
      var best = null;
      stepEls().forEach(function (s) { if (seqOf(s) <= n) best = s; });
      return best;
    }

    function show(n) {
      var el = find(n);
      current = n;
      stepEls().forEach(function (s) {
        var seq = seqOf(s);
        s.classList.toggle("current", s === el);
        s.classList.toggle("future", seq > n);
      });
      // a long run's bar is a bucket of one kind's steps (data-go..data-upto): the one that
      // holds step n is marked
      var kind = el ? el.dataset.kind : null;
      document.querySelectorAll(".waterfall .bar").forEach(function (b) {
        var from = parseInt(b.dataset.go, 10);
        var inBucket = b.dataset.upto && from <= n && n <= parseInt(b.dataset.upto, 10) &&
          b.classList.contains("k-" + kind);
        b.classList.toggle("current", from === n || !!inBucket);
      });
      slider.value = String(n);
      label.textContent = "step " + n + " / " + last;
      if (el) {
        unfold(el);
        el.scrollIntoView({block: "center"});
      }
      messagesButton.disabled = !(el && el.dataset.kind === "llm");
      var url = new URL(window.location.href);
      url.searchParams.set("step", String(n));
      history.replaceState(history.state, "", url.toString());
    }

    function go(n) {
      var seen = loadedUpTo();  // a live run's steps arrive after the page was drawn
      if (seen > last) { last = seen; slider.max = String(last); slider.disabled = false; }
      if (!last) return;
      n = Math.max(1, Math.min(last, n));
      current = n;
      slider.value = String(n);
      label.textContent = "step " + n + " / " + last + (loadedUpTo() < n ? " (loading…)" : "");
      return ensureLoaded(n).then(function () { if (current === n) show(n); });
    }

    function neighbour(delta) {
      if (current === null) return delta > 0 ? 1 : last;
      return current + delta;
    }

    trace.addEventListener("click", function (e) {
      var b = e.target.closest("[data-replay]");
      if (!b) return;
      var what = b.dataset.replay;
      go(what === "first" ? 1 : what === "last" ? last : neighbour(what === "next" ? 1 : -1));
    });
    slider.addEventListener("input", function () { go(parseInt(slider.value, 10)); });
    messagesButton.addEventListener("click", function () {
      var el = current && find(current);
      var panel = el && el.querySelector("details.messages");
      if (!panel) return;
      panel.open = true;  // the toggle event makes htmx load it
      panel.scrollIntoView({block: "nearest"});
    });

    // ---------------------------------------------------------------- the tree: fold children
    function markParents() {
      var els = stepEls();
      for (var i = 0; i < els.length; i++) {
        var next = els[i + 1];
        var has = next && parseInt(next.dataset.depth, 10) > parseInt(els[i].dataset.depth, 10);
        els[i].classList.toggle("has-children", !!has);
      }
    }
    function descendants(el) {
      var out = [], depth = parseInt(el.dataset.depth, 10), n = el.nextElementSibling;
      while (n && n.classList.contains("step") && parseInt(n.dataset.depth, 10) > depth) {
        out.push(n);
        n = n.nextElementSibling;
      }
      return out;
    }
    function unfold(el) {
      // A step hidden inside a folded parent is shown again when the replay reaches it.
      if (!el.classList.contains("folded-away")) return;
      var p = el.previousElementSibling;
      while (p) {
        var t = p.querySelector && p.querySelector(".tree-toggle[aria-expanded=false]");
        if (t && parseInt(p.dataset.depth, 10) < parseInt(el.dataset.depth, 10)) t.click();
        p = p.previousElementSibling;
      }
    }
    list.addEventListener("click", function (e) {
      var toggle = e.target.closest(".tree-toggle");
      if (!toggle) return;
      var el = toggle.closest(".step");
      var open = toggle.getAttribute("aria-expanded") !== "false";
      toggle.setAttribute("aria-expanded", open ? "false" : "true");
      descendants(el).forEach(function (d) { d.classList.toggle("folded-away", open); });
    });
    T = {
      go: go, neighbour: neighbour,
      last: function () { return last; },
      settled: function () {
        markParents();
        if (current !== null) {
          stepEls().forEach(function (s) { s.classList.toggle("future", seqOf(s) > current); });
        }
      },
    };

    markParents();
    if (current !== null) go(current);
  }

  ready(function () { initDiffPick(); initRefresh(); initSuitePick(); initTrace(); });
})();
