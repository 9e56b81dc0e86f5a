/* Compare page. The live columns are live.js's [data-live-run] elements (one /ws/runs/<id>/
   socket each); this file refreshes the summary as soon as every column has finished (htmx
   polling covers a missed frame) and draws the cost / wall-time chart (charts.js). */
(function () {
  "use strict";
  // Defined once in traces/schema.py; templates/live/_assets.html puts them on the page.
  const FINISHED = JSON.parse(document.getElementById("run-statuses").textContent).finished;

  function columns() { return [...document.querySelectorAll(".compare-col[data-live-run]")]; }

  function refreshWhenAllFinished() {
    const cols = columns();
    if (!cols.length || !cols.every((c) => FINISHED.includes(c.dataset.status))) return;
    const summary = document.getElementById("compare-summary");
    if (summary && summary.hasAttribute("hx-get") && window.htmx) htmx.trigger(summary, "refresh");
  }

  function drawChart() {
    if (!window.AgentLabCharts) return;
    AgentLabCharts.bar("compare-chart", "compare-chart-data", (d) => {
      const time = { label: "Wall time (s)", data: d.wall_s, yAxisID: "time" };
      if (!AgentLabCharts.any(d.cost_usd)) {  // every run cost $0: no empty cost axis
        return { data: { labels: d.labels, datasets: [time] },
                 options: { scales: { time: AgentLabCharts.axis("left", "seconds") } } };
      }
      return {
        data: { labels: d.labels, datasets: [
          { label: "Cost (USD)", data: d.cost_usd, yAxisID: "cost" }, time] },
        options: { scales: { cost: AgentLabCharts.axis("left", "USD"),
                             time: AgentLabCharts.axis("right", "seconds") } },
      };
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    // live.js sets data-status on each column from the socket's status frames.
    const watch = new MutationObserver(refreshWhenAllFinished);
    columns().forEach((c) => watch.observe(c, { attributes: true, attributeFilter: ["data-status"] }));
    drawChart();
  });
  document.addEventListener("htmx:afterSettle", drawChart);
})();
