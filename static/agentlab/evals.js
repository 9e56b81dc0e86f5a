/* Evaluation pages. The experiment fragment (#experiment-live) is re-fetched by htmx every
   second while the experiment runs; this file keeps the ticked diff cells across those swaps,
   allows "Diff" only for exactly two cells, draws the summary chart (charts.js), and
   on the index page ticks one default agent per paradigm and says, before the start, how many
   runs the form's experiment is and how long these agents' past runs say it takes (runs that
   share a model take turns on it: agentlab/evals/estimates.py). */
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
    updateEstimate();
  });

  // ---------------------------------------------------------------- the start form's estimate
  const BIG = 50; // more runs than this: ask before starting them
  function span(s) {
    if (s < 120) return `${Math.round(s)} s`;
    if (s < 5400) return `${Math.round(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }

  function updateEstimate() {
    const out = document.querySelector("[data-estimate]");
    const source = document.getElementById("evals-estimate-data");
    if (!out || !source) return;
    const data = JSON.parse(source.textContent);
    const form = out.closest("form");
    const suite = form.querySelector('select[name="suite"]');
    const agents = [...form.querySelectorAll('input[name="agents"]:checked')].map((b) => b.value);
    const tagBox = form.querySelector('input[name="case_tags"]');
    const wanted = (tagBox ? tagBox.value : "").split(",").map((t) => t.trim()).filter(Boolean);
    const perCase = (data.case_tags || {})[suite && suite.value] || [];
    const inSuite = wanted.length
      ? perCase.filter((tags) => tags.some((t) => wanted.includes(t))).length
      : Number(data.cases[suite && suite.value] || 0);
    const limit = parseInt(form.querySelector('input[name="case_limit"]').value, 10);
    const cases = limit > 0 ? Math.min(limit, inSuite) : inSuite;
    const concurrency = Math.max(1, parseInt(form.querySelector('input[name="concurrency"]').value, 10) || 1);
    const runs = cases * agents.length;
    if (!runs) {
      out.textContent = "Choose a suite and agents to see how many runs that is.";
      out.classList.remove("big");
      delete form.dataset.confirm;
      return;
    }
    const secs = agents.map((a) => data.seconds[a]);
    const known = secs.filter((s) => s !== null && s !== undefined);
    let text = `${cases} case${cases === 1 ? "" : "s"} × ${agents.length} agent${agents.length === 1 ? "" : "s"} = ${runs} run${runs === 1 ? "" : "s"}`;
    if (known.length) {
      // As agentlab/evals/estimates.py: every run's time spread over the concurrency, or, when
      // longer, each shared model's time spread over the requests it takes at once (the
      // embedded model: one), since runs take turns on it.
      let total = known.reduce((sum, s) => sum + cases * s, 0) / concurrency;
      let queued = false;
      const busy = new Map(); // model key -> [its seconds, its limit]
      agents.forEach((a) => {
        const model = (data.models || {})[a];
        const s = data.seconds[a];
        const m = (data.model_seconds || {})[a];
        if (s === null || s === undefined || !model || m === null || m === undefined) return;
        const [key, limit] = model;
        if (!(limit > 0 && limit < concurrency)) return;
        const seen = busy.get(key) || [0, limit];
        busy.set(key, [seen[0] + cases * m, limit]);
      });
      busy.forEach(([seconds, limit]) => {
        if (seconds / limit > total) { total = seconds / limit; queued = true; }
      });
      text += `, about ${span(total)}${known.length < secs.length ? " or more" : ""} (from these agents' past runs${queued ? "; they take turns on the model they share" : ""})`;
    } else {
      text += "; no past runs of these agents to estimate the time from";
    }
    out.textContent = text;
    out.classList.toggle("big", runs > BIG);
    if (runs > BIG) form.dataset.confirm = `This starts ${runs} runs. Start them all? (First N cases makes a smaller experiment.)`;
    else delete form.dataset.confirm;
  }

  document.addEventListener("input", (event) => {
    if (event.target.closest && event.target.closest(".evals-form")) updateEstimate();
  });
  document.addEventListener("change", (event) => {
    if (event.target.closest && event.target.closest(".evals-form")) updateEstimate();
  });

  document.addEventListener("DOMContentLoaded", () => {
    ticked = new Set(boxes().filter((b) => b.checked).map((b) => b.value));
    updateDiff();
    drawChart();
    updateEstimate();
  });
  document.addEventListener("htmx:afterSettle", () => { restoreTicks(); drawChart(); });
})();
