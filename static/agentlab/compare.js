/* Compare page. The live columns are live.js's [data-live-run] elements (one /ws/runs/<id>/
   socket each); this file refreshes the summary as soon as every column has finished (htmx
   polling covers a missed frame) and draws the cost / wall-time chart (vendored Chart.js). */
(function () {
  "use strict";
  const FINISHED = ["succeeded", "failed", "cancelled", "timed_out", "interrupted"];

  function columns() { return [...document.querySelectorAll(".compare-col[data-live-run]")]; }

  function refreshWhenAllFinished() {
    const cols = columns();
    if (!cols.length || !cols.every((c) => FINISHED.includes(c.dataset.status))) return;
    const summary = document.getElementById("compare-summary");
    if (summary && summary.hasAttribute("hx-get") && window.htmx) htmx.trigger(summary, "refresh");
  }

  function drawChart() {
    const canvas = document.getElementById("compare-chart");
    const data = document.getElementById("compare-chart-data");
    if (!canvas || !data || canvas.dataset.drawn || !window.Chart) return;
    canvas.dataset.drawn = "1";
    const d = JSON.parse(data.textContent);
    new Chart(canvas, {
      type: "bar",
      data: {
        labels: d.labels,
        datasets: [
          { label: "Cost (USD)", data: d.cost_usd, yAxisID: "cost" },
          { label: "Wall time (s)", data: d.wall_s, yAxisID: "time" },
        ],
      },
      options: {
        responsive: true, maintainAspectRatio: false, animation: false,
        scales: {
          cost: { type: "linear", position: "left", beginAtZero: true,
                  title: { display: true, text: "USD" } },
          time: { type: "linear", position: "right", beginAtZero: true,
                  grid: { drawOnChartArea: false }, title: { display: true, text: "seconds" } },
        },
      },
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
