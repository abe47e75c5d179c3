// Dialogs: the dialogs the agent recorded in this workspace (the `dialogs` service), newest
// first, and one dialog step by step — the question, each reply of the model with its calls,
// each call's result, the answer or the error (docs/dialogs.md). Above them, what waits for a
// person in the workspace (the `approvals` service): calls to approve or deny and MCP servers'
// questions, answerable here by anyone with `approve` — whether or not they were in the chat,
// and after the chat's connection is gone.

import { overRest, requestCard } from "../approvals.js";
import { h, pretty, replace, status } from "../dom.js";
import { subRoute } from "../route.js";

const STATUS = { answer: "ok", running: "", abandoned: "warn" };

export async function render(ctx) {
  const { api, session } = ctx;
  const head = [
    h("h1", {}, "Dialogs"),
    h("p", { class: "muted" }, "The agent records each dialog as it goes, so one cut short by "
      + "a crash is taken up where it stopped. Here are the dialogs of this workspace."),
  ];
  const id = subRoute("dialogs");
  const waiting = session.can("approve") ? await waitingSection(api, id) : null;
  let body;
  if (!session.can("agent")) {
    body = status("Reading dialogs needs the agent capability, which this token lacks.", "error");
  } else {
    try {
      body = id ? await shown(api, id) : await listed(api);
    } catch (e) {
      body = status(`Cannot read the dialogs: ${e.message}`, "error");
    }
  }
  return h("div", { class: "dialogs-page" }, head, waiting,
    h("div", { class: "toolbar" },
      id ? h("a", { href: "#/dialogs" }, "All dialogs") : null,
      h("button", { type: "button", onclick: () => window.dispatchEvent(
        new HashChangeEvent("hashchange")) }, "Refresh"),
      h("span", { class: "spacer" })),
    body);
}

/** The requests waiting in the workspace (of dialog `id` only, when one is shown), each a
 * card with its buttons; the list is read again after each answer. */
async function waitingSection(api, id) {
  const list = h("div", { class: "requests" });
  const note = status();
  // answers this page gave: the service confirmed them, so they are not shown again even if
  // a list read at once still names them
  const answered = new Set();
  const key = (r) => `${r.dialog}\n${r.call}`;
  const load = async () => {
    let answer;
    try {
      answer = await api.call("approvals", { operation: "list" }, { flow: api.flow });
    } catch (e) {
      replace(list, status(`Cannot list the calls that wait: ${e.message}`, "error"));
      return;
    }
    const requests = (Array.isArray(answer.approvals) ? answer.approvals : []).filter((r) =>
      r && typeof r === "object" && (!id || r.dialog === id) && !answered.has(key(r)));
    if (!requests.length) {
      replace(list, h("p", { class: "muted" }, id ? "No call of this dialog waits for an answer."
        : "No call waits for an answer in this workspace."));
      return;
    }
    replace(list, requests.map((r) => requestCard(r, {
      send: overRest(api),
      detail: h("p", { class: "muted" }, "Dialog ",
        h("a", { href: `#/dialogs/${encodeURIComponent(String(r.dialog))}` }, String(r.dialog)),
        `, step ${r.step ?? "?"}, asked by ${r.user ?? "?"}`),
      onSettled: (text, kind, gone) => {
        if (gone) answered.add(key(r));
        note.set(text, kind);
        load();
      },
    })));
  };
  await load();
  return h("section", { class: "panel waiting", "aria-labelledby": "waiting-title" },
    h("h2", { id: "waiting-title" }, "Waiting for an answer"),
    list, note);
}

async function listed(api) {
  const answer = await api.call("dialogs", { operation: "list", limit: 100 }, { flow: api.flow });
  const dialogs = Array.isArray(answer.dialogs) ? answer.dialogs : [];
  if (!dialogs.length) {
    return h("section", { class: "panel" },
      h("p", { class: "muted" }, "No dialog is recorded in this workspace yet."));
  }
  return h("section", { class: "panel", "aria-labelledby": "dialogs-title" },
    h("h2", { id: "dialogs-title" }, "Recorded dialogs"),
    h("table", { "aria-labelledby": "dialogs-title" },
      h("thead", {}, h("tr", {}, ["Question", "Started (UTC)", "Status", "Steps", "Tool calls",
        "Tokens", "Seconds"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, dialogs.map((d) => h("tr", {},
        h("td", {}, h("a", { href: `#/dialogs/${encodeURIComponent(d.id)}` }, d.question || d.id)),
        h("td", {}, String(d.started || "").slice(0, 19).replace("T", " ")),
        h("td", {}, badge(d.status)),
        h("td", {}, String(d.steps ?? "")),
        h("td", {}, String(d.tool_calls ?? "")),
        h("td", {}, tokens(d)),
        h("td", {}, Number(d.seconds || 0).toFixed(1)))))));
}

async function shown(api, id) {
  const answer = await api.call("dialogs", { operation: "show", id }, { flow: api.flow });
  const d = answer.dialog || {};
  const steps = [];
  for (const entry of d.entries || []) {
    const b = entry.body || {};
    if (entry.kind === "offer") {
      steps.push(h("li", { class: "message offer" },
        h("strong", {}, `Step ${b.step}: ${b.shown} of ${b.available} tools shown`),
        ` (${b.method}${b.find_tools ? ", find-tools for the rest" : ""}) `,
        (b.tools || []).map((t) => h("span", { class: "offered" },
          h("code", { class: "tool" }, String(t.name ?? "")),
          t.reason ? ` — ${t.reason}; ` : "; "))));
    } else if (entry.kind === "reply") {
      steps.push(h("li", { class: "message thought" },
        h("strong", {}, `Step ${b.step}`), " ", b.thought || "",
        b.problem ? h("p", { class: "status error" }, `Unusable reply: ${b.problem}`) : null,
        (b.calls || []).map((c) => h("div", { class: "message action" },
          "Call ", h("code", { class: "tool" }, c.name), " ",
          h("pre", { "aria-label": `Arguments of ${c.name}` }, pretty(c.arguments))))));
    } else if (entry.kind === "result") {
      steps.push(h("li", { class: "message observation" },
        h("strong", {}, `Result of ${b.name}`), b.ok ? null : h("span", { class: "badge off" },
          "failed"), " ", String(b.observation ?? "")));
    } else if (entry.kind === "approval") {
      steps.push(h("li", { class: "message approval" },
        h("strong", {}, b.kind === "elicitation" ? `Question from ${b.tool}` : `Approval asked for ${b.tool}`),
        " ", b.kind === "elicitation" ? String(b.message ?? "")
          : h("pre", { "aria-label": `Arguments asked about for ${b.tool}` }, pretty(b.arguments))));
    } else if (entry.kind === "answer") {
      steps.push(h("li", { class: "message approval" },
        h("strong", {}, "Decision"), " ", String(b.decision ?? ""),
        b.reason ? `: ${b.reason}` : ""));
    } else if (entry.kind === "end") {
      const m = b.message || {};
      steps.push(m.message_type === "answer"
        ? h("li", { class: "message answer" }, h("strong", {}, "Answer"),
          m.cut ? h("span", { class: "badge warn" }, "cut short") : null, " ",
          b.answer || m.content || "")
        : h("li", { class: "message error" }, h("strong", {}, "Error"), " ",
          `${m.error?.type || "error"}: ${m.error?.message || m.content || ""}`));
    }
  }
  return h("section", { class: "panel", "aria-labelledby": "dialog-title" },
    h("h2", { id: "dialog-title" }, d.question || id),
    h("p", {}, badge(d.status), " ",
      h("span", { class: "muted" }, `${d.steps} steps, ${d.tool_calls} tool calls, `
        + `tokens ${tokens(d)}, ${Number(d.seconds || 0).toFixed(1)} s; user ${d.user}; `
        + `started ${d.started}`)),
    h("ol", { class: "dialog-steps", "aria-label": "Steps" }, steps));
}

function badge(value) {
  return h("span", { class: ["badge", STATUS[value] ?? "off"] }, value || "?");
}

function tokens(d) {
  if (d.in_token == null && d.out_token == null) return "–";
  return `${d.in_token || 0} in, ${d.out_token || 0} out`;
}
