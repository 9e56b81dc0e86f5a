/* Evaluation pages. The experiment fragment (#experiment-live) is re-fetched by htmx every
   second while the experiment runs; this file keeps the ticked diff cells across those swaps,
   allows "Diff" only for exactly two cells, draws the summary chart (charts.js), and
   on the index page ticks one default agent per paradigm. */
(function () {
  "use strict";
  let ticked = new Set();

  function boxes() { return [...document.querySelectorAll('input[type=checkbox][form="diff-form"]')]; }

  function updateDiff() {
    const button = document.querySelector("[data-diff-button]");
    if (!button) return;
    const n = boxes().filter((b) => b.checked).length;
    button.disabled = n !== 2;
    const hint = document.querySelector("[data-diff-hint]");
    if (hint) hint.textContent = n === 2 ? "Diff the two ticked runs." :
      `Tick two cells to diff their runs (${n} ticked); click a score for its trace.`;
  }

  function restoreTicks() {
    boxes().forEach((b) => { b.checked = ticked.has(b.value); });
    updateDiff();
  }

  function drawChart() {
    if (!window.AgentLabCharts) return;
    AgentLabCharts.bar("evals-chart", "evals-chart-data", (d) => ({
      data: { labels: d.labels, datasets: [
        { label: "Mean score (%)", data: d.mean_score, yAxisID: "pct" },
        { label: "Pass rate (%)", data: d.pass_rate, yAxisID: "pct" },
        { label: "Mean time per case (s)", data: d.mean_wall_s, yAxisID: "time" }] },
      options: { scales: { pct: AgentLabCharts.axis("left", "%", { min: 0, max: 100 }),
                           time: AgentLabCharts.axis("right", "seconds") } },
    }));
  }

  document.addEventListener("change", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.getAttribute("form") !== "diff-form") return;
    if (box.checked) ticked.add(box.value); else ticked.delete(box.value);
    updateDiff();
  });

  document.addEventListener("click", (event) => {
    const pick = event.target.closest("[data-pick-agents]");
    if (!pick) return;
    const form = pick.closest("form");
    const wanted = new Set(pick.dataset.pickAgents.split(","));
    const suite = form.querySelector('select[name="suite"]');
    if (suite && pick.dataset.suite) suite.value = pick.dataset.suite;
    form.querySelectorAll('input[name="agents"]').forEach((b) => {
      b.checked = wanted.has(b.value);
    });
  });

  document.addEventListener("DOMContentLoaded", () => {
    ticked = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
    updateDiff();
    drawChart();
  });
  document.addEventListener("htmx:afterSettle", () => { restoreTicks(); drawChart(); });
})();
