// Agent: a chat with the ReAct agent over the WebSocket, streamed as it happens — thoughts,
// the tool each step calls (with its arguments), observations, the answer — and, at the end
// of each dialog, its usage (tokens, model, tool calls). Every question is a dialog of its
// own; the transcript keeps them all until cleared. A call that waits for a person (an
// approval-request) or an MCP server's question (an elicitation-request) shows as a card
// answered on the chat's own WebSocket (../approvals.js).

import { overSocket, requestCard } from "../approvals.js";
import { append, h, field, pretty, replace, status } from "../dom.js";

const LABELS = {
  question: "Question", thought: "Thought", action: "Action", observation: "Observation",
  answer: "Answer", error: "Error", progress: "Progress", offer: "Tools shown",
};
/** The messages that wait for a person, and the field that carries their request. */
const REQUESTS = { "approval-request": "approval", "elicitation-request": "elicitation" };
/** The message that tells the dialog's client a request was answered (here or elsewhere). */
const ANSWERED = "approval-answer";

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The groups tool items name: suggestions only (needs config:read; none without it). */
async function knownGroups(api, session) {
  if (!session.can("config:read")) return [];
  try {
    const tools = await api.values("tool");
    const groups = new Set();
    for (const { value } of tools) {
      for (const g of Array.isArray(value?.group) ? value.group : []) {
        if (typeof g === "string") groups.add(g);
      }
    }
    return [...groups].sort();
  } catch {
    return [];  // a hint only: the chat works without it
  }
}

function messageEl(kind, ...body) {
  const el = h("div", { class: ["message", kind === "progress" ? "observation" : kind] },
    h("span", { class: "kind" }, LABELS[kind] || kind));
  const text = h("span", { class: "text" }, ...body);
  append(el, text);
  el.text = text;
  return el;
}

/** The action a `tool-call` message (toolmesh's) or an `action` message (TrustGraph's) names. */
function actionEl(response) {
  const tool = typeof response.tool === "string" ? response.tool : "";
  if (!tool) return messageEl("action", response.content || "");
  return messageEl("action", h("strong", { class: "tool" }, tool),
    h("pre", { class: "arguments", "aria-label": `Arguments of ${tool}` },
      pretty(response.arguments ?? {})));
}

/** The tools a step showed the model (an `offer` message: selection left some out), each
 * with why. */
export function offerEl(response) {
  const offer = isObject(response.offer) ? response.offer : {};
  const tools = Array.isArray(offer.tools) ? offer.tools : [];
  const head = `${offer.shown ?? tools.length} of ${offer.available ?? "?"} tools `
    + `(${offer.method || "selection"})${offer.find_tools ? ", and find-tools for the rest" : ""}`;
  return messageEl("offer", head, h("ul", { class: "offer", "aria-label": "Tools shown" },
    tools.map((t) => h("li", {}, h("code", { class: "tool" }, String(t.name ?? "")),
      t.reason ? ` — ${t.reason}` : ""))));
}

/** Seconds as a person reads them: "0.4 ms", "12 ms", "2.35 s". */
function duration(seconds) {
  if (seconds < 0.01) return `${(seconds * 1000).toFixed(1)} ms`;
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  return `${seconds.toFixed(2)} s`;
}

/** "Tokens in 12 · out 34 · model m · 1 tool call (0.01 s)" from the dialog's last message. */
export function describeUsage(last) {
  const parts = [];
  const n = (v) => (typeof v === "number" ? String(v) : "not reported");
  parts.push(`tokens in ${n(last.in_token)}`, `out ${n(last.out_token)}`
    + (last.token_source ? ` (${last.token_source} by toolmesh: the server reported none)` : ""));
  if (last.model) parts.push(`model ${last.model}`);
  if (typeof last.tool_calls === "number") {
    const calls = `${last.tool_calls} tool call${last.tool_calls === 1 ? "" : "s"}`;
    parts.push(typeof last.tool_time === "number" ? `${calls} (${duration(last.tool_time)})` : calls);
  }
  return `Usage: ${parts.join(" · ")}`;
}

/** Follows one dialog's streamed messages into the transcript: chunks of one message (same
 * message_id, until end_of_message) are appended to it as they arrive. */
class Dialog {
  /** cards: the options of the cards of requests (see requestCard); onRequest(): a request
   * came (the dialog waits for a person); onAnswered(request): one was answered here. */
  constructor(transcript, { cards = {}, onRequest = () => {}, onAnswered = () => {} } = {}) {
    this.transcript = transcript;
    this.open = new Map();  // message_id -> element still receiving chunks
    this.last = null;
    this.cards = cards;
    this.onRequest = onRequest;
    this.onAnswered = onAnswered;
    this.requests = [];  // the cards shown, answered or not
  }

  /** The card of a request, its answers told to onAnswered. */
  card(request) {
    return requestCard(request, { ...this.cards, onSettled: (text, kind, gone) => {
      this.cards.onSettled?.(text, kind, gone);
      if (gone) this.onAnswered(request);
    } });
  }

  /** The dialog is over: a request not answered here no longer waits. */
  close() {
    for (const card of this.requests) {
      card.settle("No longer waits: the dialog ended (answered elsewhere, expired, or failed).");
    }
  }

  add(el) {
    append(this.transcript, el);
    el.scrollIntoView({ block: "nearest" });
    return el;
  }

  take(response) {
    const kind = response.message_type;
    const id = response.message_id;
    if (kind === "tool-call" || kind === "action") {
      this.add(actionEl(response));
    } else if (kind === "offer") {
      this.add(offerEl(response));
    } else if (Object.hasOwn(REQUESTS, kind) && isObject(response[REQUESTS[kind]])) {
      this.requests.push(this.add(this.card(response[REQUESTS[kind]])));
      this.onRequest();
    } else if (kind === ANSWERED && isObject(response.answer)) {
      // answered: by this tab, or by someone else, whose answer the card now shows
      const call = String(response.answer.call ?? "");
      for (const card of this.requests) if (card.dataset.call === call) card.told(response.answer);
    } else if (kind in LABELS) {
      const content = typeof response.content === "string" ? response.content : "";
      let el = id ? this.open.get(id) : null;
      if (!el && (content || response.end_of_message === false)) {
        el = this.add(messageEl(kind));
        if (id) this.open.set(id, el);
      }
      if (el) append(el.text, content);
      if (response.end_of_message !== false && id) this.open.delete(id);
    }
    // other types (toolmesh may add some) are skipped, as TrustGraph's clients skip them
    if (response.end_of_dialog && response.cut) {
      this.add(h("p", { class: "status error", role: "status" }, "The answer was cut short: "
        + "the model reached its limit (the note at its end says which)."));
    }
    if (response.end_of_dialog) this.last = response;
  }
}

export async function render({ api, session, waiting }) {
  const allowed = session.can("agent");
  const groups = await knownGroups(api, session);
  const question = h("textarea", { name: "question", rows: 3, required: true, disabled: !allowed,
    placeholder: "Ask the agent…" });
  const groupInput = h("input", { type: "text", name: "group", spellcheck: "false",
    autocomplete: "off", disabled: !allowed });
  const stateInput = h("input", { type: "text", name: "state", spellcheck: "false",
    autocomplete: "off", disabled: !allowed });
  const send = h("button", { type: "submit", class: "primary", disabled: !allowed }, "Send");
  const clear = h("button", { type: "button", disabled: !allowed }, "Clear transcript");
  const transcript = h("div", { class: "transcript", role: "log", "aria-live": "polite",
    "aria-label": "Transcript" });
  const note = status();

  const ask = async () => {
    const text = question.value.trim();
    if (!text || send.disabled) return;
    const request = { question: text, streaming: true };
    const wanted = groupInput.value.split(",").map((g) => g.trim()).filter(Boolean);
    if (wanted.length) request.group = wanted;
    if (stateInput.value.trim()) request.state = stateInput.value.trim();
    let running = true;
    const dialog = new Dialog(transcript, {
      cards: { send: overSocket(api), canAnswer: session.can("approve"),
        onSettled: () => { if (running) note.set("The agent is working…", "busy"); } },
      onRequest: () => {
        note.set("The agent waits for an answer…", "busy");
        waiting.refresh();  // read again unless the gateway pushes it (js/waiting.js)
      },
      onAnswered: (r) => waiting.answered(r),
    });
    dialog.add(messageEl("question", text));
    question.value = "";
    send.disabled = true;
    note.set("The agent is working…", "busy");
    try {
      await api.stream("agent", request, { flow: api.flow, onResponse: (r) => dialog.take(r) });
      if (dialog.last) dialog.add(h("p", { class: "usage muted" }, describeUsage(dialog.last)));
      note.set(dialog.last?.message_type === "answer" ? "Answered." : "The dialog ended.", "ok");
    } catch (e) {
      // an error message of the dialog, or the gateway's: either way the dialog is over
      dialog.add(messageEl("error", `${e.type}: ${e.message}`));
      note.set(`The dialog failed: ${e.message}`, "error");
    } finally {
      running = false;
      dialog.close();
      waiting.refresh();
      send.disabled = false;
      question.focus();
    }
  };

  // Enter inserts a line break (questions may have several); Ctrl/Cmd+Enter sends.
  question.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      ask();
    }
  });
  clear.addEventListener("click", () => replace(transcript));

  const groupHint = `Comma-separated; empty: the "default" group. ${groups.length
    ? `Groups the tools name: ${groups.join(", ")}.` : ""}`;
  return h("div", { class: "chat" },
    h("h1", {}, "Agent"),
    allowed ? null : h("p", { class: "read-only-note" },
      "This token cannot chat with the agent: it lacks the 'agent' capability."),
    h("section", { class: "panel", "aria-label": "Dialog" },
      transcript,
      h("form", { onsubmit: (event) => { event.preventDefault(); ask(); } },
        field("Question", question, { hint: "Ctrl+Enter sends; Enter starts a new line." }),
        h("div", { class: "columns" },
          field("Groups", groupInput, { name: "group", hint: groupHint }),
          field("State", stateInput, { name: "state",
            hint: "The dialog's starting state: offers the tools applicable in it." })),
        h("div", { class: "toolbar" }, send, clear, h("span", { class: "spacer" })),
        note)));
}
