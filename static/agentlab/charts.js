/* Shared Chart.js set-up for the compare, experiment and dashboard pages (vendored Chart.js,
   static/agentlab/vendor/chart.umd.min.js; load this after it and before the page's script).
   Each chart is a <canvas id> plus a json_script element; htmx swaps re-run the page's draw
   code, so a canvas is drawn at most once. */
(function () {
  "use strict";
  const BASE_OPTIONS = { responsive: true, maintainAspectRatio: false, animation: false };

  /* Draws a bar chart on #canvasId from the JSON in #dataId; makeConfig(data) returns
     { data, options } (options are merged over BASE_OPTIONS). Returns the Chart, or null when
     the canvas, its data or Chart.js is missing, or the canvas is already drawn. */
  function bar(canvasId, dataId, makeConfig) {
    const canvas = document.getElementById(canvasId);
    const data = document.getElementById(dataId);
    if (!canvas || !data || canvas.dataset.drawn || !window.Chart) return null;
    canvas.dataset.drawn = "1";
    const config = makeConfig(JSON.parse(data.textContent));
    return new Chart(canvas, {
      type: "bar",
      data: config.data,
      options: Object.assign({}, BASE_OPTIONS, config.options || {}),
    });
  }

  /* A linear value axis from zero titled `text`; a right-hand axis draws no grid of its own so
     a two-axis chart keeps one set of grid lines. `extra` overrides (e.g. min/max). */
  function axis(position, text, extra) {
    return Object.assign({ type: "linear", position, beginAtZero: true,
                           title: { display: true, text } },
                         position === "right" ? { grid: { drawOnChartArea: false } } : {},
                         extra || {});
  }

  /* Whether a series has anything to draw: an axis of costs that are all $0 says nothing. */
  function any(values) { return (values || []).some((v) => Number(v) > 0); }

  window.AgentLabCharts = { bar, axis, any };
})();
