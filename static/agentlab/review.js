/* Agent Lab review queues: working through an item with the keyboard.
   1–9 choose a value of the highlighted rubric key (↑ ↓ move the highlight), a / b / t the
   better run in pairwise mode, n the note, Enter submits, s skips, j k → ← move between items,
   ? shows the keys. Folding the step tree as on the run page. Plain JS, no build step. */
(function () {
  "use strict";

  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName)) &&
      !(el.tagName === "INPUT" && /^(radio|checkbox)$/.test(el.type));
  }

  function initKeys() {
    var form = document.getElementById("review-form");
    var skip = document.getElementById("skip-form");
    var help = document.getElementById("review-keys");
    var helpButton = document.getElementById("review-keys-button");
    var groups = Array.prototype.slice.call(document.querySelectorAll(".rubric-group"));
    var active = 0;

    function highlight(i) {
      if (!groups.length) return;
      active = Math.max(0, Math.min(groups.length - 1, i));
      groups.forEach(function (g, j) { g.classList.toggle("is-active", j === active); });
    }
    function firstUnanswered() {
      for (var i = 0; i < groups.length; i++) {
        if (!groups[i].querySelector("input:checked") &&
            !(groups[i].querySelector("input:not([type=radio]), select") || {}).value) return i;
      }
      return 0;
    }
    function choose(group, n) {
      var radios = group.querySelectorAll("input[type=radio]");
      if (radios.length) {
        if (n < 1 || n > radios.length) return false;
        radios[n - 1].checked = true;
        radios[n - 1].dispatchEvent(new Event("change", { bubbles: true }));
        return true;
      }
      var input = group.querySelector("input, select");
      if (!input) return false;
      input.focus();
      if (input.tagName === "INPUT") input.value = String(n);
      return true;
    }
    function go(which) {
      var link = document.querySelector('[data-nav="' + which + '"]');
      if (link) window.location.href = link.href;
    }
    function toggleHelp() {
      if (!help) return;
      if (help.open) help.close(); else help.showModal();
    }
    function submit() {
      if (form) { if (form.requestSubmit) form.requestSubmit(); else form.submit(); }
    }

    highlight(firstUnanswered());
    groups.forEach(function (g, i) {
      g.addEventListener("focusin", function () { highlight(i); });
      g.addEventListener("change", function (e) {
        if (e.target.type === "radio") highlight(i + 1);
      });
    });
    if (helpButton) helpButton.addEventListener("click", toggleHelp);

    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (e.altKey || e.metaKey) return;
      if (typing(t)) {
        if (e.key === "Escape") { t.blur(); e.preventDefault(); }
        else if (e.key === "Enter" && e.ctrlKey) { e.preventDefault(); submit(); }
        return;
      }
      if (e.ctrlKey) return;
      if (help && help.open && e.key !== "?") return;  // the dialog has the keys while open
      var key = e.key;
      var letter = document.querySelector('.rubric-option kbd[data-key="' + key + '"]');
      if (/^[1-9]$/.test(key) && groups.length) {
        if (choose(groups[active], parseInt(key, 10))) e.preventDefault();
      } else if (letter) {
        var input = letter.parentNode.querySelector("input");
        input.checked = true;
        input.dispatchEvent(new Event("change", { bubbles: true }));
        e.preventDefault();
      } else if (key === "ArrowDown" && groups.length) { highlight(active + 1); e.preventDefault(); }
      else if (key === "ArrowUp" && groups.length) { highlight(active - 1); e.preventDefault(); }
      else if (key === "n" && form && form.elements.note) { form.elements.note.focus(); e.preventDefault(); }
      else if (key === "Enter" && form && !/^(A|BUTTON|SUMMARY)$/.test(t.tagName)) {
        e.preventDefault(); submit();
      }
      else if (key === "s" && skip) { e.preventDefault(); skip.submit(); }
      else if (key === "j" || key === "ArrowRight") { e.preventDefault(); go("next"); }
      else if (key === "k" || key === "ArrowLeft") { e.preventDefault(); go("previous"); }
      else if (key === "?") { e.preventDefault(); toggleHelp(); }
    });
  }

  // The step tree folds as on the run page: a step's ▾ hides the steps inside it.
  function initFolding() {
    var list = document.querySelector("#review-steps .steps");
    if (!list) return;
    list.addEventListener("click", function (e) {
      var toggle = e.target.closest(".tree-toggle");
      if (!toggle) return;
      var step = toggle.closest(".step");
      var open = toggle.getAttribute("aria-expanded") !== "false";
      toggle.setAttribute("aria-expanded", open ? "false" : "true");
      var depth = parseInt(step.dataset.depth, 10);
      for (var n = step.nextElementSibling; n && parseInt(n.dataset.depth, 10) > depth;
           n = n.nextElementSibling) {
        n.classList.toggle("folded-away", open);
      }
    });
  }

  ready(function () { initKeys(); initFolding(); });
})();
