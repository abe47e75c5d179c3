// Dialogs: the dialogs the agent recorded in this workspace (the `dialogs` service), newest
// first, and one dialog step by step — the question, each reply of the model with its calls,
// what was asked of a person and who decided, each call's result, the answer or the error
// (docs/dialogs.md). A dialog whose call waits for a person says so, and its page shows the
// request's card (js/waiting-list.js); the workspace's whole list is the Approvals page.
// Both views are read again when what waits changes (an answer given, here or elsewhere).

import { answeredBy, utc } from "../approvals.js";
import { h, joined, pretty, replace, scroller, status } from "../dom.js";
import { subRoute } from "../route.js";
import { waitingList } from "../waiting-list.js";

const STATUS = { answer: "ok", running: "", abandoned: "warn", waiting: "warn" };
/** The status a running dialog shows while a call of it waits for a person. */
const WAITING = "waiting for a person";

export async function render(ctx) {
  const { session } = ctx;
  const id = subRoute("dialogs");
  let body;
  if (!session.can("agent")) {
    body = status("Reading dialogs needs the agent capability, which this token lacks.", "error");
  } else {
    try {
      body = id ? await shown(ctx, id) : await listed(ctx);
    } catch (e) {
      body = status(`Cannot read the dialogs: ${e.message}`, "error");
    }
  }
  return h("div", { class: "dialogs-page" },
    h("h1", {}, "Dialogs"),
    h("p", { class: "muted" }, "The agent records each dialog as it goes, so one cut short by "
      + "a crash is taken up where it stopped. Here are the dialogs of this workspace."),
    h("div", { class: "toolbar" },
      id ? h("a", { href: "#/dialogs" }, "All dialogs") : null,
      h("button", { type: "button", onclick: () => window.dispatchEvent(
        new HashChangeEvent("hashchange")) }, "Refresh"),
      h("span", { class: "spacer" })),
    id || !session.can("approve") ? null : pointer(ctx),
    body);
}

/** "2 calls wait for an answer: Approvals", while any do. */
function pointer({ waiting, signal }) {
  const text = h("span", {});
  const line = h("p", { class: "waiting-pointer" }, text, " ",
    h("a", { href: "#/approvals" }, "Answer on the Approvals page"));
  const show = () => {
    const n = waiting.count;
    text.textContent = `${n} call${n === 1 ? "" : "s"} ${n === 1 ? "waits" : "wait"} for an answer.`;
    line.hidden = n === 0;
  };
  waiting.addEventListener("change", show, { signal });
  show();
  return line;
}

/** Calls again when the set of dialogs that wait changes (an answer, a new request), and
 * when the tab comes back into view: nothing pushes a dialog's other steps, nor its end. */
function whenToReadAgain({ waiting, signal }, again) {
  let seen = [...waiting.dialogs()].sort().join("\n");
  waiting.addEventListener("change", () => {
    const now = [...waiting.dialogs()].sort().join("\n");
    if (now !== seen) {
      seen = now;
      again();
    }
  }, { signal });
  window.addEventListener("focus", again, { signal });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") again();
  }, { signal });
}

/** A loader that runs `load` once more after the one in progress, never several at once. */
function coalesced(load) {
  let running = null;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await load();
      } while (again);
      running = null;
    })();
    return running;
  };
  return run;
}

async function listed(ctx) {
  const { api, waiting } = ctx;
  const read = async () => {
    const answer = await api.call("dialogs", { operation: "list", limit: 100 }, { flow: api.flow });
    return Array.isArray(answer.dialogs) ? answer.dialogs : [];
  };
  const first = await read();
  const section = h("section", { class: "panel", "aria-labelledby": "dialogs-title" });
  const note = status();
  const draw = (dialogs) => {
    const waits = waiting.dialogs();
    replace(section, h("h2", { id: "dialogs-title" }, "Recorded dialogs"),
      dialogs.length ? scroller(h("table", { "aria-labelledby": "dialogs-title" },
        h("thead", {}, h("tr", {}, ["Question", "Started (UTC)", "Status", "Steps", "Tool calls",
          "Tokens", "Time"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, dialogs.map((d) => row(d, waits.has(String(d.id)))))))
        : h("p", { class: "muted" }, "No dialog is recorded in this workspace yet."),
      note);
  };
  draw(first);
  whenToReadAgain(ctx, coalesced(async () => {
    try {
      draw(await read());
    } catch (e) {
      note.set(`Cannot read the dialogs again: ${e.message}`, "error");
    }
  }));
  return section;
}

function row(d, waits) {
  const state = d.status === "running" && waits ? WAITING : d.status;
  return h("tr", {},
    h("td", {}, h("a", { href: `#/dialogs/${encodeURIComponent(String(d.id))}` },
      String(d.question || d.id))),
    h("td", {}, String(d.started || "").slice(0, 19).replace("T", " ")),
    h("td", {}, badge(state)),
    h("td", {}, String(d.steps ?? "")),
    h("td", {}, String(d.tool_calls ?? "")),
    h("td", {}, tokens(d)),
    h("td", {}, duration(d)));
}

async function shown(ctx, id) {
  const { api, session } = ctx;
  const read = async () => (await api.call("dialogs", { operation: "show", id },
    { flow: api.flow })).dialog || {};
  const section = h("section", { class: "panel", "aria-labelledby": "dialog-title" });
  const draw = (d) => replace(section,
    h("h2", { id: "dialog-title" }, String(d.question || id)),
    h("p", {}, badge(dialogStatus(d)), " ", h("span", { class: "muted" }, summary(d))),
    h("ol", { class: "dialog-steps", "aria-label": "Steps" }, steps(d.entries || [])));
  const first = await read();
  draw(first);
  whenToReadAgain(ctx, coalesced(async () => {
    try {
      draw(await read());
    } catch {
      // the page keeps what it showed; Refresh says why
    }
  }));
  // a dialog that has ended waits for no one
  return [session.can("approve") && first.status === "running"
    ? waitingList(ctx, { dialog: id, title: "Waiting for an answer in this dialog" }) : null,
  section];
}

/** "3 steps, 1 tool call, tokens 12 in, 4 out, 2.1 s; user ada; started …" of what is known. */
function summary(d) {
  const plural = (n, word) => (typeof n === "number" ? `${n} ${word}${n === 1 ? "" : "s"}` : "");
  const user = typeof d.user === "string" && d.user ? `user ${d.user}` : "";
  const started = utc(d.started) ? `started ${utc(d.started)}` : "";
  return joined(", ", plural(d.steps, "step"), plural(d.tool_calls, "tool call"),
    `tokens ${tokens(d)}`, duration(d), user, started).join("");
}

/** A dialog's status: "waiting for a person" when running with a request not answered. */
function dialogStatus(d) {
  if (d.status !== "running") return d.status;
  const asked = new Map();
  for (const entry of d.entries || []) {
    const call = entry.body?.call;
    if (entry.kind === "approval") asked.set(call, entry.body);
    else if (entry.kind === "answer") asked.delete(call);
  }
  const now = Date.now();
  const open = [...asked.values()].some((b) => !(Date.parse(b.expires) <= now));
  return open ? WAITING : d.status;
}

function steps(entries) {
  const out = [];
  for (const entry of entries) {
    const b = entry.body || {};
    if (entry.kind === "offer") {
      out.push(h("li", { class: "message offer" },
        h("strong", {}, `Step ${b.step}: ${b.shown} of ${b.available} tools shown`),
        ` (${b.method}${b.find_tools ? ", find-tools for the rest" : ""}) `,
        (b.tools || []).map((t) => h("span", { class: "offered" },
          h("code", { class: "tool" }, String(t.name ?? "")),
          t.reason ? ` — ${t.reason}; ` : "; "))));
    } else if (entry.kind === "reply") {
      out.push(h("li", { class: "message thought" },
        h("strong", {}, `Step ${b.step}`), " ", b.thought || "",
        b.problem ? h("p", { class: "status error" }, `Unusable reply: ${b.problem}`) : null,
        (b.calls || []).map((c) => h("div", { class: "message action" },
          "Call ", h("code", { class: "tool" }, String(c.name ?? "")), " ",
          h("pre", { "aria-label": `Arguments of ${c.name}` }, pretty(c.arguments))))));
    } else if (entry.kind === "result") {
      out.push(h("li", { class: "message observation" },
        h("strong", {}, `Result of ${b.name}`), b.ok ? null : h("span", { class: "badge off" },
          "failed"), " ", String(b.observation ?? "")));
    } else if (entry.kind === "approval") {
      const question = b.kind === "elicitation";
      out.push(h("li", { class: "message approval" },
        h("strong", {}, question ? `Question from ${b.tool}` : `Approval asked for ${b.tool}`),
        " ", question ? String(b.message ?? "")
          : h("pre", { "aria-label": `Arguments asked about for ${b.tool}` }, pretty(b.arguments))));
    } else if (entry.kind === "answer") {
      out.push(decision(b));
    } else if (entry.kind === "end") {
      const m = b.message || {};
      out.push(m.message_type === "answer"
        ? h("li", { class: "message answer" }, h("strong", {}, "Answer"),
          m.cut ? h("span", { class: "badge warn" }, "cut short") : null, " ",
          b.answer || m.content || "")
        : h("li", { class: "message error" }, h("strong", {}, "Error"), " ",
          `${m.error?.type || "error"}: ${m.error?.message || m.content || ""}`));
    }
  }
  return out;
}

/** "Decision approve: reason — by Ada (workbench), 2026-… UTC" with the parts it has. */
function decision(b) {
  const who = answeredBy(b.by);
  const about = joined(", ", who && `by ${who}`, utc(b.at)).join("");
  return h("li", { class: "message approval decision" },
    h("strong", {}, "Decision"), " ", String(b.decision ?? "?"),
    typeof b.reason === "string" && b.reason ? `: ${b.reason}` : "",
    about ? h("span", { class: "muted decided" }, ` — ${about}`) : null);
}

function badge(value) {
  return h("span", { class: ["badge", value === WAITING ? "warn" : STATUS[value] ?? "off"] },
    value || "?");
}

function tokens(d) {
  if (d.in_token == null && d.out_token == null) return "–";
  return `${d.in_token || 0} in, ${d.out_token || 0} out`;
}

/** How long the dialog took; a running one: how long so far (by this browser's clock). */
function duration(d) {
  if (d.status === "running") {
    const since = (Date.now() - Date.parse(d.started)) / 1000;
    return Number.isFinite(since) && since >= 0 ? `${seconds(since)} so far` : "–";
  }
  return typeof d.seconds === "number" ? seconds(d.seconds) : "–";
}

function seconds(s) {
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

