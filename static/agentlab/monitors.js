/* A live scorer's charts (drawn through charts.js) from the page's #scorer-data JSON
   (agentlab/monitors/figures.py): each score and its rolling average; per day, the scores,
   the failures and the cost. */
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", () => {
    if (!window.AgentLabCharts) return;
    const { bar, axis, any } = AgentLabCharts;
    bar("chart-rolling", "scorer-data", ({ rolling: r }) => ({
      data: { labels: r.labels, datasets: [
        { type: "line", label: "rolling average", data: r.rolling, borderColor: "#2563eb",
          backgroundColor: "#2563eb", pointRadius: 0, borderWidth: 2, order: 0 },
        { label: "score", data: r.score, backgroundColor: "rgba(107,112,128,.35)", order: 1 },
      ] },
      options: { scales: { x: { ticks: { maxTicksLimit: 8 } },
                           y: axis("left", "score", { min: 0, max: 1 }) } },
    }));
    bar("chart-days", "scorer-data", ({ days: d }) => {
      const datasets = [
        { label: "scored", data: d.done, backgroundColor: "#15803d", stack: "n", yAxisID: "y" },
        { label: "could not score", data: d.error, backgroundColor: "#b91c1c", stack: "n",
          yAxisID: "y" },
      ];
      const scales = { x: { stacked: true }, y: axis("left", "scores", { stacked: true,
                                                                         ticks: { precision: 0 } }) };
      if (any(d.cost)) {
        datasets.push({ type: "line", label: "cost (USD)", data: d.cost, borderColor: "#b45309",
                        backgroundColor: "#b45309", yAxisID: "cost" });
        scales.cost = axis("right", "USD");
      }
      return { data: { labels: d.labels, datasets }, options: { scales } };
    });
  });
})();
