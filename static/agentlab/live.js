/* Agent Lab — the browser side of the live-run protocol (docs/LIVE_PROTOCOL.md).
 *
 * Sockets come from the htmx ws extension (ws-connect="…"): it connects, queues, and reconnects
 * with full-jitter backoff after an abnormal close. This file speaks JSON over them: on every
 * (re)open it sends {"action":"sync","last_seq":N} first, then inserts or replaces steps by seq
 * (never twice), streams tokens into the running LLM step, and drives the controls.
 *   [data-live-run]   one run: a run page's panel, or a chat turn while it runs
 *   [data-live-chat]  a conversation: "start" a turn, then watch that turn's run
 */
(function () {
  "use strict";
  // Defined once in traces/schema.py; templates/live/_assets.html puts them on the page.
  const STATUSES = JSON.parse(document.getElementById("run-statuses").textContent);
  const FINISHED = STATUSES.finished;
  // A status in words ("finished with an answer"); one this page does not know, as its value.
  const word = (s) => (STATUSES.words || {})[s] || String(s || "").replace(/_/g, " ");
  const REFUSED = 4403; // not yours to watch (or no longer): do not reconnect
  const BEHIND = 1013; // fell too far behind: the ws extension reconnects, then we sync
  const TOO_LARGE = 1009; // a frame over the server's limit: no reconnect

  function own(root, name) {
    // The root's own [data-live=name], not one inside a nested live element.
    for (const el of root.querySelectorAll(`[data-live="${name}"]`)) {
      if (el.closest("[data-live-run], [data-live-chat]") === root) return el;
    }
    return null;
  }

  // As templates/traces/_answer_label.html: only a succeeded run has a final answer.
  function answerLabel(status) {
    if (status === "succeeded") return "Final answer";
    if (status === "stopped") return "Answer from what was found when a limit stopped it";
    return "No answer: what the agent said as it stopped";
  }

  function pretty(value) {
    return JSON.stringify(value === undefined ? null : value, null, 2);
  }

  class LiveRun {
    constructor(root) {
      this.root = root;
      this.runId = Number(root.dataset.liveRun);
      this.socket = null;
      this.status = root.dataset.status || "";
      this.streamSeq = null;
      this.pendingSeq = null;
      this.pendingOriginal = "";
      // What the held call takes: "json" (its input), "observation" (a tool result the agent
      // sent, through the gateway), "request" or "response" (a gateway LLM call: its request,
      // or a reply the person writes); see agentlab/gateway/control.py.
      this.pendingMode = "json";
      this.pendingOriginalMode = "json";
      this.pendingOriginalText = "";
      this.expiresAt = null;
      this.countdown = null;
      this.gateway = !!root.dataset.gateway;
      this.approvalSeq = null;
      const target = root.dataset.stepsTarget;
      this.steps = (target && document.querySelector(target)) || own(root, "steps");
      root.addEventListener("htmx:wsOpen", (e) => this.opened(e));
      root.addEventListener("htmx:wsClose", (e) => this.closed(e));
      root.addEventListener("htmx:wsBeforeMessage", (e) => this.message(e));
      root.addEventListener("click", (e) => this.clicked(e));
      const debug = own(root, "debug");
      if (debug) debug.addEventListener("change", () => this.sendDebug());
      root.addEventListener("change", (e) => {
        if (e.target.name === "pending_mode" && e.target.closest("[data-live-run]") === root) {
          this.pendingMode = e.target.value;
          this.showMode();
        }
      });
      // What the run is doing now: the step, seconds ticking, tokens (see activity()).
      this.current = null;
      this.ticker = null;
      this.show();
    }

    // ------------------------------------------------------------ the socket

    opened(e) {
      if (e.target !== this.root) return;
      this.socket = e.detail.socketWrapper;
      this.note("live");
      // sendImmediately: the sync must go before anything queued while disconnected.
      this.socket.sendImmediately(JSON.stringify({ action: "sync", last_seq: this.lastSeq() }));
    }

    closed(e) {
      if (e.target !== this.root) return;
      this.socket = null;
      const code = e.detail.event && e.detail.event.code;
      if (code === REFUSED) this.note("you cannot watch this run");
      else if (code === TOO_LARGE) this.note("disconnected: a message was too large — reload the page");
      else if (code === BEHIND) this.note("fell behind — reconnecting to catch up…");
      else if (FINISHED.includes(this.status)) this.note("finished");
      else this.note("disconnected — reconnecting…");
    }

    send(frame) {
      if (!this.socket) {
        this.fail("not connected — wait for the connection to come back");
        return false;
      }
      this.socket.send(JSON.stringify(frame));
      return true;
    }

    message(e) {
      if (e.target !== this.root) return;
      e.preventDefault(); // JSON frames, not HTML for htmx to swap
      let frame;
      try { frame = JSON.parse(e.detail.message); } catch (_err) { return; }
      const handler = this["on_" + frame.type];
      if (handler) handler.call(this, frame);
    }

    // ------------------------------------------------------------ server -> browser

    on_step(frame) {
      if (!this.steps) return;
      const tpl = document.createElement("template");
      tpl.innerHTML = frame.html.trim();
      const el = tpl.content.firstElementChild;
      if (!el) return;
      el.dataset.seq = String(frame.seq);
      el.dataset.status = frame.status;
      const old = this.stepEl(frame.seq);
      if (old) {
        old.replaceWith(el); // an update of a step already shown
      } else {
        const after = [...this.steps.querySelectorAll(":scope > [data-seq]")]
          .find((s) => Number(s.dataset.seq) > frame.seq);
        this.steps.insertBefore(el, after || this.steps.querySelector(":scope > .steps-more"));
      }
      if (frame.kind === "llm" && frame.status === "running") this.startStream(frame.seq);
      if (window.htmx) window.htmx.process(el); // lazy payloads in the viewer's partial
      this.track(frame);
    }

    // ------------------------------------------------------------ what is happening now

    track(frame) {
      const step = frame.step || {};
      if (frame.status === "running") {
        const started = Number(step.started_at) * 1000;
        this.current = {
          seq: frame.seq, kind: frame.kind, name: step.name || "", role: step.role || "",
          started: Number.isFinite(started) && started > 0 ? Math.min(started, Date.now()) : Date.now(),
          tokens: 0, firstToken: null,
          // A call waiting for a busy model's turn (other runs or chats ask it first): not the
          // agent's time, and not charged to the run's time limit.
          waiting: step.waiting_for_model || null,
        };
      } else if (this.current && this.current.seq === frame.seq) {
        this.current = null;
      }
      this.activity();
    }

    activity() {
      const el = own(this.root, "activity");
      if (!el) return;
      const active = !FINISHED.includes(this.status) && this.status !== "queued";
      const now = this.current;
      if (!active || !now) {
        el.hidden = !active || this.status === "paused";
        if (active && this.status !== "paused") el.textContent = "working… waiting for the next step";
        this.tick(active && this.status !== "paused");
        return;
      }
      const secs = Math.max(0, (Date.now() - now.started) / 1000);
      let what;
      if (now.kind === "llm") what = `model call${now.name ? " to " + now.name : ""}`;
      else if (now.kind === "tool") what = `tool ${now.name}`;
      else what = `${now.kind}${now.name ? " " + now.name : ""}`;
      if (now.role && now.role !== "agent") what += ` (${now.role})`;
      let text = `Step ${now.seq}: ${what} · ${secs.toFixed(0)} s`;
      if (now.waiting) {
        const ahead = Number(now.waiting.ahead) || 0;
        const since = Number(now.waiting.since) * 1000;
        const waited = Number.isFinite(since) && since > 0 ? Math.max(0, (Date.now() - since) / 1000) : 0;
        text += ` · waiting for the model${ahead ? ` (${ahead} request${ahead === 1 ? "" : "s"} ahead)` : ""}`
          + ` for ${waited.toFixed(0)} s, not counted against the run's time limit`;
      } else if (now.tokens) {
        const since = Math.max(0.001, (Date.now() - now.firstToken) / 1000);
        text += ` · ${now.tokens} tokens so far · ${(now.tokens / since).toFixed(1)} tokens/s`;
      } else if (now.kind === "llm") {
        text += " · waiting for the reply (a reply that calls tools arrives whole, not token by token)";
      }
      el.textContent = this.status === "paused" ? `Paused before step ${now.seq}: ${what}` : text;
      el.hidden = false;
      this.tick(this.status !== "paused");
    }

    tick(on) {
      if (on && !this.ticker) this.ticker = setInterval(() => this.activity(), 1000);
      else if (!on && this.ticker) { clearInterval(this.ticker); this.ticker = null; }
    }

    on_token(frame) {
      if (!this.current || this.current.seq !== frame.seq) {
        // Tokens of a model call whose running step this page has not seen (it began before
        // the socket synced): they are the reply arriving, not something to wait for.
        this.current = { seq: frame.seq, kind: "llm", name: "", role: "", started: Date.now(),
                         tokens: 0, firstToken: null };
      }
      const first = !this.current.firstToken;
      if (first) this.current.firstToken = Date.now();
      this.current.tokens += 1; // one delta a token, as the stream sends them
      if (first) this.activity(); // "waiting for the reply" goes at once, not at the next tick
      const step = this.stepEl(frame.seq);
      if (step) {
        let pre = step.querySelector("[data-stream]");
        if (!pre) {
          pre = document.createElement("pre");
          pre.className = "live-stream";
          pre.dataset.stream = "";
          step.appendChild(pre);
        }
        pre.textContent += frame.delta;
      }
      const bubble = own(this.root, "stream");
      if (bubble) {
        if (this.streamSeq !== frame.seq) this.startStream(frame.seq);
        bubble.hidden = false;
        bubble.textContent += frame.delta;
      }
    }

    on_status(frame) {
      this.status = frame.status;
      this.root.dataset.status = frame.status;
      const detail = frame.detail || {};
      if (frame.status === "paused" && detail.waiting_for === "step" && detail.pending) {
        this.showPending(detail);
      } else {
        this.pendingSeq = null;
        this.expiresAt = null;
      }
      this.showExpiry();
      if (!(frame.status === "paused" && detail.waiting_for === "approval")) {
        this.approvalSeq = null;
      }
      const debug = frame.debug || detail.settings;
      if (debug) this.showDebug(debug);
      this.show(detail.reason);
      this.activity();
    }

    showDebug(debug) {
      // The run's real step mode and breakpoints (after a reload, another tab's changes).
      const box = own(this.root, "debug");
      if (!box) return;
      const field = (name) => box.querySelector(`[name="${name}"]`);
      for (const name of ["step_mode", "break_on_error", "break_on_reflection"]) {
        const f = field(name);
        if (f && document.activeElement !== f) f.checked = !!debug[name];
      }
      const tools = field("break_tools");
      if (tools && document.activeElement !== tools) tools.value = (debug.break_tools || []).join(", ");
      const kinds = debug.break_kinds || [];
      for (const f of box.querySelectorAll('[name="break_kinds"]')) {
        if (document.activeElement !== f) f.checked = kinds.includes(f.value);
      }
      if (debug.step_mode || (debug.break_tools || []).length || debug.break_on_error
          || debug.break_on_reflection || kinds.length) box.open = true;
    }

    on_approval(frame) {
      this.approvalSeq = frame.seq;
      const box = own(this.root, "approval");
      if (!box) return;
      box.querySelector('[data-live="approval-tool"]').textContent = frame.tool;
      box.querySelector('[data-live="approval-args"]').value = pretty(frame.arguments);
      const expiry = box.querySelector('[data-live="approval-expiry"]');
      if (expiry) {
        expiry.textContent = frame.expires_at
          ? `— denied if nobody decides by ${new Date(frame.expires_at * 1000).toLocaleTimeString()}`
          : "";
      }
      this.show();
    }

    on_final(frame) {
      this.status = frame.status;
      const answer = own(this.root, "answer");
      if (answer) answer.textContent = frame.answer || "";
      const final = own(this.root, "final");
      if (final) {
        final.hidden = !frame.answer;
        final.className = `answer answer-${frame.status}`;
      }
      const label = own(this.root, "answer-label");
      if (label) label.textContent = answerLabel(frame.status);
      const bubble = own(this.root, "stream");
      if (bubble) bubble.hidden = true;
      if (frame.error && frame.status !== "succeeded") this.fail(frame.error);
      this.pendingSeq = this.approvalSeq = null;
      this.expiresAt = null;
      this.showExpiry();
      this.current = null;
      this.note("finished");
      this.show();
      this.activity();
      // A conversation waits for this to let the next message go (LiveChat).
      this.root.dispatchEvent(new CustomEvent("agentlab:run-ended",
        { bubbles: true, detail: { run: this.runId, status: frame.status } }));
      this.finished();
    }

    finished() {
      // On a trace page the header, totals, timeline and replay bar were drawn while the run
      // was live: swap the whole page region for the finished trace (static/agentlab/trace.js
      // starts again on it), without a reload.
      const url = this.root.dataset.finishedUrl;
      if (!url || this.swapped) return;
      this.swapped = true;
      fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" })
        .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
        .then((html) => {
          const fresh = new DOMParser().parseFromString(html, "text/html")
            .getElementById("run-page");
          const old = document.getElementById("run-page");
          if (!fresh || !old) return;
          this.tick(false);
          old.replaceWith(document.adoptNode(fresh));
          if (window.htmx) window.htmx.process(fresh);
          document.dispatchEvent(new CustomEvent("agentlab:trace-replaced"));
        })
        .catch(() => { this.swapped = false; this.note("finished — reload the page for the whole trace"); });
    }

    on_error(frame) { this.fail(frame.error); }

    on_synced() {
      if (this.root.dataset.autostart && this.status === "queued") {
        delete this.root.dataset.autostart;
        this.sendDebug();
        this.send({ action: "start" });
      }
    }

    // ------------------------------------------------------------ browser -> server

    clicked(e) {
      const button = e.target.closest("[data-act]");
      if (!button || button.closest("[data-live-run]") !== this.root) return;
      const act = button.dataset.act;
      this.fail("");
      if (act === "edit") this.sendEdit();
      else if (act === "resume" || act === "step") {
        if (this.pendingSeq !== null && !this.sendEdit(true)) return;
        this.send({ action: act });
      } else if (act === "approve" || act === "deny") this.sendDecision(act);
      else if (act === "start") { this.sendDebug(); this.send({ action: "start" }); }
      else this.send({ action: act });
    }

    sendDebug() {
      const debug = own(this.root, "debug");
      if (!debug) return;
      const field = (name) => debug.querySelector(`[name="${name}"]`);
      this.send({
        action: "debug",
        step_mode: field("step_mode").checked,
        break_tools: field("break_tools").value.split(",").map((t) => t.trim()).filter(Boolean),
        break_on_error: field("break_on_error").checked,
        break_on_reflection: field("break_on_reflection").checked,
        break_kinds: [...debug.querySelectorAll('[name="break_kinds"]:checked')].map((f) => f.value),
      });
    }

    sendEdit(onlyIfChanged) {
      // Returns false when the edited text is not a JSON object (nothing is sent then).
      const area = own(this.root, "pending-input");
      if (!area || this.pendingSeq === null) return true;
      const mode = this.pendingMode;
      if (mode === "observation" || mode === "response") {
        const text = own(this.root, "pending-text").value;
        if (onlyIfChanged && mode === this.pendingOriginalMode && text === this.pendingOriginalText) {
          return true;
        }
        this.pendingOriginalText = text;
        this.pendingOriginalMode = mode;
        const input = mode === "observation" ? { observation: text } : { response: { text } };
        return this.send({ action: "edit", seq: this.pendingSeq, input });
      }
      if (onlyIfChanged && area.value === this.pendingOriginal && mode === this.pendingOriginalMode) {
        return true;
      }
      this.pendingOriginalMode = mode;
      let input;
      try { input = JSON.parse(area.value); } catch (err) {
        this.fail("The edited input is not valid JSON: " + err.message);
        return false;
      }
      this.pendingOriginal = area.value;
      return this.send({ action: "edit", seq: this.pendingSeq, input });
    }

    sendDecision(act) {
      const box = own(this.root, "approval");
      const frame = { action: act, seq: this.approvalSeq };
      if (act === "approve") {
        try { frame.arguments = JSON.parse(box.querySelector('[data-live="approval-args"]').value); }
        catch (err) { this.fail("The arguments are not valid JSON: " + err.message); return; }
      } else {
        frame.reason = box.querySelector('[data-live="approval-reason"]').value;
      }
      if (this.send(frame)) { this.approvalSeq = null; this.show(); }
    }

    // ------------------------------------------------------------ the page

    stepEl(seq) {
      return this.steps && this.steps.querySelector(`:scope > [data-seq="${seq}"]`);
    }

    lastSeq() {
      // The highest seq before the first step still running: a running step is asked for
      // again, so its final version cannot be missed across a reconnect.
      let last = 0;
      for (const el of this.steps ? this.steps.querySelectorAll(":scope > [data-seq]") : []) {
        const seq = Number(el.dataset.seq);
        const running = el.dataset.status === "running" || el.classList.contains("is-running");
        if (running) return Math.min(last, seq - 1);
        last = Math.max(last, seq);
      }
      return last;
    }

    startStream(seq) {
      this.streamSeq = seq;
      const bubble = own(this.root, "stream");
      if (bubble) bubble.textContent = "";
    }

    showPending(detail) {
      const pending = detail.pending;
      const fresh = this.pendingSeq !== pending.seq;
      this.pendingSeq = pending.seq;
      this.expiresAt = Number(detail.expires_at) > 0 ? Number(detail.expires_at) * 1000 : null;
      const input = pending.input && typeof pending.input === "object" ? pending.input : {};
      const byAgent = pending.kind === "tool" && (pending.meta || {}).ran_by === "agent";
      const written = pending.kind === "llm" && input.response && typeof input.response === "object";
      let mode = "json";
      if (byAgent) mode = "observation";
      else if (this.gateway && pending.kind === "llm") {
        // A reply saved earlier, or the choice the person made at this call, stays.
        mode = written || (!fresh && this.pendingMode === "response") ? "response" : "request";
      }
      const area = own(this.root, "pending-input");
      if (area && (document.activeElement !== area || !detail.edited)) {
        let shown = pending.input;
        if (mode === "request") {
          // Only the request's fields can be edited: not the passed-through "params", nor a
          // response written earlier (agentlab/gateway/protocol.py ChatRequest.recorded).
          shown = Object.fromEntries(Object.entries(input)
            .filter(([k]) => k !== "params" && k !== "response"));
        }
        area.value = pretty(shown);
        this.pendingOriginal = area.value;
      }
      const text = own(this.root, "pending-text");
      if (text && (document.activeElement !== text || !detail.edited)) {
        if (mode === "observation") {
          // The result the agent sent (the held step's text), or the edit saved since.
          text.value = detail.edited && typeof input.observation === "string"
            ? input.observation : String(pending.text || "");
        } else if (written) text.value = String(input.response.text || "");
        else if (fresh) text.value = "";
        this.pendingOriginalText = text.value;
      }
      if (fresh || detail.edited) this.pendingOriginalMode = mode;
      this.pendingMode = mode;
      const what = own(this.root, "pending-what");
      if (what) what.textContent = `${pending.kind} ${pending.name || ""} (step ${pending.seq})`;
      this.showMode();
    }

    showMode() {
      // The fields of what the held call takes (see pendingMode).
      const mode = this.pendingMode;
      const area = own(this.root, "pending-input");
      const choice = own(this.root, "pending-choice");
      const hint = own(this.root, "pending-hint");
      if (area) area.hidden = mode === "observation" || mode === "response";
      const box = own(this.root, "pending-text-box");
      if (box) box.hidden = !(mode === "observation" || mode === "response");
      const label = own(this.root, "pending-text-label");
      if (label) {
        label.textContent = mode === "observation" ? "Tool result the agent sent" : "Response to the agent";
      }
      if (choice) {
        choice.hidden = !(mode === "request" || mode === "response");
        for (const r of choice.querySelectorAll('[name="pending_mode"]')) r.checked = r.value === mode;
      }
      if (hint) {
        hint.textContent = {
          observation: "The agent ran this tool itself: edit the result it sent (the model reads yours, now and in every later call), then resume or step.",
          request: "Edit the request (JSON) the agent sent, then resume or step.",
          response: "Write the reply the agent gets instead of the model's, then resume or step.",
        }[mode] || "Edit its input (JSON), then resume or step.";
      }
    }

    showExpiry() {
      // A held gateway call waits only so long (AGENTLAB_GATEWAY_HOLD_S): then the gateway
      // answers the agent with a timeout error. Counts down while the call is held.
      const el = own(this.root, "hold-expiry");
      const on = this.expiresAt !== null && this.pendingSeq !== null;
      if (el) {
        el.hidden = !on;
        if (on) {
          const left = Math.max(0, Math.round((this.expiresAt - Date.now()) / 1000));
          el.textContent = left > 0
            ? `The agent's request waits ${left} s more before the gateway answers it with a timeout.`
            : "The gateway has answered the agent's request with a timeout.";
        }
      }
      if (on && !this.countdown) this.countdown = setInterval(() => this.showExpiry(), 1000);
      else if (!on && this.countdown) { clearInterval(this.countdown); this.countdown = null; }
    }

    show(reason) {
      const status = own(this.root, "status");
      if (status) {
        status.textContent = word(this.status);
        status.className = `status status-${this.status}`;
      }
      const pending = own(this.root, "pending");
      if (pending) pending.hidden = this.pendingSeq === null;
      if (reason !== undefined) {
        const why = own(this.root, "reason");
        if (why) why.textContent = reason ? `— ${reason}` : "";
      }
      const approval = own(this.root, "approval");
      if (approval) approval.hidden = this.approvalSeq === null;
      const active = !FINISHED.includes(this.status);
      // Pause / Resume / Step once: in the bar while it runs, in the pending box while it
      // waits there; none once the run has ended.
      const waiting = this.pendingSeq !== null;
      for (const b of this.root.querySelectorAll("[data-act]")) {
        if (b.closest("[data-live-run]") !== this.root || b.closest('[data-live="approval"]')) continue;
        const act = b.dataset.act;
        const inPending = !!b.closest('[data-live="pending"]');
        if (act === "start") b.hidden = this.status !== "queued";
        else if (act === "resume" || act === "step" || act === "pause") {
          b.hidden = !active || this.status === "queued" || (waiting && !inPending)
            || (act === "resume" && !inPending) || (act === "pause" && this.status === "paused");
        } else if (act === "cancel") b.hidden = !active || (waiting && !inPending);
        else b.hidden = !active;
      }
      const debug = own(this.root, "debug");
      if (debug) debug.hidden = !active;
    }

    note(text) {
      const el = own(this.root, "connection");
      if (el) el.textContent = text;
    }

    fail(message) {
      const el = own(this.root, "error");
      if (!el) return;
      el.textContent = message || "";
      el.hidden = !message;
    }
  }

  class LiveChat {
    // One answer at a time: while a turn's run goes, Send waits (the message typed meanwhile
    // stays in the box) and comes back when that run ends. The box is emptied only once the
    // server has taken the message (its "turn" frame); a refusal leaves it as typed.
    constructor(root) {
      this.root = root;
      this.socket = null;
      this.sending = false;
      this.form = own(root, "chat-form");
      this.turns = own(root, "turns");
      this.box = this.form && this.form.querySelector("textarea");
      this.limit = this.box ? Number(this.box.dataset.maxChars) || 0 : 0;
      this.busy = [...root.querySelectorAll("[data-live-run]")]
        .some((el) => !FINISHED.includes(el.dataset.status || ""));
      root.addEventListener("htmx:wsOpen", (e) => {
        if (e.target !== root) return;
        this.socket = e.detail.socketWrapper;
        this.update();
      });
      root.addEventListener("htmx:wsClose", (e) => {
        if (e.target !== root) return;
        this.socket = null;
        this.sending = false;
        this.update();
      });
      root.addEventListener("htmx:wsBeforeMessage", (e) => {
        if (e.target !== root) return;
        e.preventDefault();
        this.message(JSON.parse(e.detail.message));
      });
      root.addEventListener("agentlab:run-ended", () => {
        this.busy = false;
        this.error(""); // an error about the answer that was running is over with it
        this.update();
      });
      if (this.form) this.form.addEventListener("submit", (e) => this.submit(e));
      if (this.box) this.box.addEventListener("input", () => this.update());
      this.update();
    }

    update() {
      if (!this.form) return;
      const length = this.box.value.length;
      const over = this.limit && length > this.limit;
      this.form.querySelector("button").disabled = !this.socket || this.busy || this.sending || over;
      const wait = this.form.querySelector('[data-live="wait"]');
      if (wait) wait.hidden = !this.busy;
      const count = this.form.querySelector('[data-live="count"]');
      if (count && this.limit) {
        const n = (v) => v.toLocaleString("en-US");
        count.textContent = over
          ? `This message is ${n(length)} characters: a message may have at most ${n(this.limit)}. Shorten it to send it.`
          : `At most ${n(this.limit)} characters.`;
        count.className = over ? "error" : "muted small";
      }
    }

    submit(e) {
      e.preventDefault();
      const text = this.box.value.trim();
      this.error("");
      if (!text) {
        this.error("Type a message first: this one is empty or only spaces.");
        return;
      }
      if (!this.socket || this.busy || this.sending) { this.update(); return; }
      if (this.limit && text.length > this.limit) { this.update(); return; }
      this.sending = true;
      this.update();
      this.socket.send(JSON.stringify({ action: "start", message: text }));
    }

    message(frame) {
      if (frame.type === "error") {
        this.sending = false;
        this.error(frame.error);
        this.update();
      }
      if (frame.type !== "turn") return;
      this.sending = false;
      this.busy = true;
      this.box.value = ""; // taken: it is the new turn now
      this.update();
      if (frame.title) this.titled(frame.title);
      const empty = own(this.root, "empty");
      if (empty) empty.remove();
      const tpl = document.createElement("template");
      tpl.innerHTML = frame.html.trim();
      const turn = tpl.content.firstElementChild;
      this.turns.appendChild(turn);
      turn.querySelectorAll("[data-live-run]").forEach(mount);
      window.htmx.process(turn); // opens the turn's own /ws/runs/<id>/ socket
      turn.scrollIntoView({ block: "end" });
    }

    titled(title) {
      // The first message names the conversation: show it without a reload.
      const field = this.root.querySelector('input[name="title"]');
      if (field && !field.value && document.activeElement !== field) field.value = title;
      document.title = `${title} · Agent Lab`;
    }

    error(text) {
      const el = this.form && this.form.querySelector('[data-live="error"]');
      if (!el) return;
      el.textContent = text || "";
      el.hidden = !text;
    }
  }

  function mount(el) {
    if (el.liveRun) return;
    el.liveRun = el.dataset.liveRun ? new LiveRun(el) : new LiveChat(el);
  }

  // Mount before htmx opens the sockets (htmx also starts on DOMContentLoaded; this file is
  // deferred after it, so use the capture phase of the first htmx:wsConnecting as a fallback).
  function mountAll() { document.querySelectorAll("[data-live-run], [data-live-chat]").forEach(mount); }
  mountAll();
  document.addEventListener("htmx:wsConnecting", (e) => mount(e.target), true);
  window.AgentLabLive = { LiveRun, LiveChat, mount };
})();
