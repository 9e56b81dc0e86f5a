/* Dashboard charts (drawn through charts.js). The data is
   the page's #dashboard-data JSON (agentlab/dashboard/views.py chart_data); a click on a bar
   opens its `links` entry: the runs list filtered to the runs behind that bar. */
(function () {
  "use strict";
  const OUTCOME_COLOURS = { succeeded: "#15803d", failed: "#b91c1c", timed_out: "#b45309",
                            cancelled: "#6b7080", interrupted: "#7c3aed" };

  function linkTo(links) {
    return (event, elements, chart) => {
      if (!elements.length) return;
      const { datasetIndex, index } = elements[0];
      const list = Array.isArray(links[0]) ? links[datasetIndex] : links;
      const url = list && list[index];
      if (url) window.location.href = url;
    };
  }

  function hover(event, elements) {
    event.native.target.style.cursor = elements.length ? "pointer" : "default";
  }

  // Every chart reads the one #dashboard-data element; makeConfig also gives the bars' links.
  function draw(id, makeConfig) {
    AgentLabCharts.bar(id, "dashboard-data", (d) => {
      const config = makeConfig(d);
      config.options = Object.assign({ onClick: linkTo(config.links), onHover: hover },
                                     config.options);
      return config;
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    if (!window.AgentLabCharts) return;
    const { axis } = AgentLabCharts;

    draw("chart-outcomes", ({ outcomes: o }) => ({
      data: { labels: o.labels, datasets: o.series.map((s) => ({
        label: s.label, data: s.data, backgroundColor: OUTCOME_COLOURS[s.key] })) },
      options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true,
        ticks: { precision: 0 }, title: { display: true, text: "runs" } } } },
      links: o.series.map((s) => s.links),
    }));

    draw("chart-usage", ({ usage: u }) => {
      const tokens = { label: "Tokens per run", data: u.tokens_per_run, yAxisID: "tokens" };
      const costs = window.AgentLabCharts.any(u.cost_usd);  // all $0: no empty cost axis
      return {
        data: { labels: u.labels, datasets: costs
          ? [tokens, { label: "Total cost (USD)", data: u.cost_usd, yAxisID: "cost" }] : [tokens] },
        options: { scales: costs ? { tokens: axis("left", "tokens / run"), cost: axis("right", "USD") }
                                 : { tokens: axis("left", "tokens / run") } },
        links: u.links,
      };
    });

    draw("chart-latency", ({ latency: l }) => ({
      data: { labels: l.labels, datasets: [
        { label: "p50 (s)", data: l.p50_s },
        { label: "p95 (s)", data: l.p95_s }] },
      options: { scales: { y: { beginAtZero: true, title: { display: true, text: "seconds" } } } },
      links: l.links,
    }));

    // Feedback over time: a stacked bar per group (agent…), and thumbs up and down.
    draw("chart-feedback", ({ feedback: f }) => ({
      data: { labels: f.labels, datasets: f.series.map((s) => ({ label: s.label, data: s.data })) },
      options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true,
        ticks: { precision: 0 }, title: { display: true, text: "feedback given" } } } },
      links: f.series.map((s) => f.labels.map(() => s.link)),
    }));

    draw("chart-thumbs", ({ feedback: f }) => ({
      data: { labels: f.labels, datasets: [
        { label: "thumbs up", data: f.up, backgroundColor: OUTCOME_COLOURS.succeeded },
        { label: "thumbs down", data: f.down, backgroundColor: OUTCOME_COLOURS.failed }] },
      options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true,
        ticks: { precision: 0 }, title: { display: true, text: "thumbs" } } } },
      links: [f.labels.map(() => f.up_link), f.labels.map(() => f.down_link)],
    }));

    draw("chart-tools", ({ tools: t }) => ({
      data: { labels: t.labels, datasets: [{ label: "Success rate (%)", data: t.success_pct }] },
      options: { indexAxis: "y", scales: { x: { min: 0, max: 100,
        title: { display: true, text: "% of calls that succeeded" } } } },
      links: t.links,
    }));
  });
})();
