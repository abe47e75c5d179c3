// What waits for a person (docs/approvals.md): a call whose tool's policy asks, or an MCP
// server's question during a call. Each is a card — the tool, the exact arguments or the
// question, when it expires — with the buttons that answer it through the `approvals`
// service. The chat answers on its own WebSocket (overSocket); the Approvals page, which lists
// what waits in the workspace, over REST (overRest). Every answer says it comes from the
// Workbench ("via"), and a spent card says what happened and who decided. Text from the
// server is text only; optional parts go through dom.js's append, never written as "null".

import { append, h, field, joined, pretty, select, status, uid } from "./dom.js";
import { openThroughGo, webAddress } from "./links.js";

/** Errors after which the card cannot be answered any more (the others may be retried). */
const FINAL = new Set(["not-found", "stale", "answered", "expired"]);
/** The face every answer from here names: the gateway records it beside who answered. */
const VIA = "workbench";

/** Sends an `approvals` request on the api's WebSocket; resolves to its (last) response. */
export function overSocket(api) {
  return async (request) => {
    let last = {};
    await api.stream("approvals", request, { flow: api.flow, onResponse: (r) => { last = r; } });
    return last;
  };
}

/** Sends an `approvals` request over REST; resolves to its response. */
export function overRest(api) {
  return (request) => api.call("approvals", request, { flow: api.flow });
}

/** "Expires at 2026-12-06 03:00:00 UTC (in 4 min)" from an ISO time (a sentence that says
 * it is not known, for anything else). */
export function expiry(iso) {
  const when = new Date(typeof iso === "string" ? iso : NaN);
  if (Number.isNaN(when.getTime())) return "When it expires is not said.";
  const text = utc(iso);
  const seconds = Math.round((when.getTime() - Date.now()) / 1000);
  if (seconds <= 0) return `Expired at ${text}`;
  const left = seconds < 90 ? `${seconds} s` : `${Math.round(seconds / 60)} min`;
  return `Expires at ${text} (in ${left})`;
}

/** "2026-12-06 03:00:00 UTC" from an ISO time; "" for anything else. */
export function utc(iso) {
  const when = new Date(typeof iso === "string" ? iso : NaN);
  return Number.isNaN(when.getTime()) ? "" : `${when.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** Who gave an answer, as the gateway recorded it (`by`: {id, name, face}): "Ada (workbench)",
 * "tok-1 (cli)"; "" when the answer does not say. */
export function answeredBy(by) {
  if (!by || typeof by !== "object") return "";
  const name = [by.name, by.id].find((v) => typeof v === "string" && v.trim());
  const face = typeof by.face === "string" && by.face.trim() ? by.face.trim() : "";
  if (!name) return face ? `someone (${face})` : "";
  return face ? `${name.trim()} (${face})` : name.trim();
}

/** "Decided by Ada (workbench) at 2026-12-06 03:00:00 UTC", with the parts the answer has. */
export function decidedText(answer) {
  const who = answeredBy(answer?.by);
  const at = utc(answer?.at);
  return joined(" ", "Decided", who && `by ${who}`, at && `at ${at}`).join("") + ".";
}

/** What a recorded answer says, for a person: "approved", "denied: reason", "accepted"... */
export function outcomeText(answer) {
  const decision = answer?.decision;
  const reason = typeof answer?.reason === "string" ? answer.reason.trim() : "";
  switch (decision) {
    case "approve": return "Approved: the call runs.";
    case "deny": return reason ? `Denied: ${reason}` : "Denied.";
    case "accept": return "Accepted.";
    case "decline": return "Declined.";
    case "cancel": return "Cancelled.";
    case "expired": return "Expired: the call was not run.";
    default: return `Answered (${decision ?? "?"}).`;
  }
}

/** The status kind an answer is shown with: "ok" when the call goes on as asked. */
function outcomeKind(answer) {
  return ["approve", "accept"].includes(answer?.decision) ? "ok" : "";
}

/**
 * The card of one request (an approval or an elicitation, as `approval-request` /
 * `elicitation-request` carry it or `approvals list` lists it).
 * send(body) → promise of the service's response (overSocket / overRest);
 * canAnswer: the token has `approve` (else the card says why it has no buttons);
 * onSettled(text, kind, gone): after an answer or a final error (the list is read again);
 * gone: the request no longer waits (answered, here or before, or expired).
 * card.settle(text): the request no longer waits (its dialog ended): buttons go;
 * card.told(answer): it was answered, as `answer` says (what, by whom, when).
 */
export function requestCard(request, { send, canAnswer = true, onSettled = () => {},
  detail = null } = {}) {
  const elicitation = request?.kind === "elicitation";
  const tool = typeof request?.tool === "string" ? request.tool : "?";
  const titleId = uid("request");
  const note = status();
  const card = h("section", { class: ["message", "request", elicitation ? "elicitation" : "approval"],
    "aria-labelledby": titleId, dataset: { call: String(request?.call ?? "") } },
  h("span", { class: "kind", id: titleId },
    elicitation ? `Question from ${tool}` : `Approval needed: ${tool}`));
  card.answered = false;
  const controls = [];

  // replaced once the request no longer waits: a spent card says what happened, not when
  // it would have expired
  const expires = h("p", { class: "expires muted" }, expiry(request?.expires));
  const settle = (text, kind = "", after = "") => {
    card.answered = true;
    for (const c of controls) c.disabled = true;
    note.set(text, kind);
    card.classList.add("settled");
    if (after) {
      expires.textContent = after;
      expires.className = "decided muted";
    } else {
      expires.remove();
    }
  };
  card.settle = (text) => { if (!card.answered) settle(text); };
  /** The request was answered (here or elsewhere: its dialog says so), as `answer` has it. */
  card.told = (answer) => {
    if (!card.answered) settle(outcomeText(answer), outcomeKind(answer), decidedText(answer));
  };

  /** Sends body; shows the outcome or the error. */
  const answer = async (body) => {
    for (const c of controls) c.disabled = true;
    note.set("Sending the answer…", "busy");
    let response;
    card.sending = true;  // the list may hear of the answer before this card does
    try {
      response = await send({ ...body, dialog: request.dialog, call: request.call, via: VIA });
    } catch (e) {
      card.sending = false;
      const final = FINAL.has(e.type);
      const text = `Not answered (${e.type}): ${e.message}`;
      if (final) settle(text, "error");
      else {
        for (const c of controls) c.disabled = false;
        note.set(text, "error");
      }
      // stale: another call waits under this key (a list read again shows it)
      if (final) onSettled(`${tool}: ${text}`, "error", e.type !== "stale");
      return;
    }
    card.sending = false;
    const text = outcomeText(response.answer);
    const kind = outcomeKind(response.answer);
    settle(text, kind, decidedText(response.answer));
    onSettled(`${tool}: ${text}`, kind, true);
  };

  append(card, detail,
    elicitation ? elicitationBody(request, answer, controls, canAnswer)
      : approvalBody(request, tool, answer, controls, canAnswer),
    expires);
  if (!canAnswer) {
    for (const c of controls) c.disabled = true;
    note.set("This token cannot answer: it lacks the 'approve' capability.", "error");
  }
  append(card, note);
  return card;
}

function approvalBody(request, tool, answer, controls, canAnswer) {
  const approve = h("button", { type: "button", class: "primary",
    onclick: () => answer({ operation: "approve", digest: request.digest }) }, "Approve");
  const reason = h("input", { type: "text", name: "reason", autocomplete: "off",
    maxlength: "2000" });
  const reasonField = field("Reason (optional)", reason,
    { hint: "The model is told it, and may try something else." });
  const confirm = h("button", { type: "button", class: "danger", onclick: () => {
    const body = { operation: "deny", digest: request.digest };
    if (reason.value.trim()) body.reason = reason.value.trim();
    answer(body);
  } }, "Deny call");
  const back = h("button", { type: "button", onclick: () => {
    asking.hidden = true;
    buttons.hidden = false;
    deny.focus();
  } }, "Back");
  const asking = h("div", { class: "deny-reason", hidden: true }, reasonField,
    h("div", { class: "toolbar" }, confirm, back));
  const deny = h("button", { type: "button", class: "danger", onclick: () => {
    buttons.hidden = true;
    asking.hidden = false;
    reason.focus();
  } }, "Deny");
  const buttons = h("div", { class: "toolbar" }, approve, deny);
  controls.push(approve, deny, reason, confirm, back);
  return [
    h("p", {}, "The agent wants to call ", h("strong", { class: "tool" }, tool), " with:"),
    h("pre", { class: "arguments", "aria-label": `Arguments to approve for ${tool}` },
      pretty(request.arguments ?? {})),
    canAnswer ? buttons : null, canAnswer ? asking : null,
  ];
}

function elicitationBody(request, answer, controls, canAnswer) {
  const message = typeof request.message === "string" ? request.message : "";
  const decline = h("button", { type: "button",
    onclick: () => answer({ operation: "answer", action: "decline" }) }, "Decline");
  const cancel = h("button", { type: "button",
    onclick: () => answer({ operation: "answer", action: "cancel" }) }, "Cancel");
  if (request.mode === "url") {
    // never a form here: the person gives what is asked on the page the link opens
    const url = typeof request.url === "string" ? request.url : "";
    const done = h("button", { type: "button", class: "primary",
      onclick: () => answer({ operation: "answer", action: "accept" }) }, "Done");
    controls.push(done, decline, cancel);
    return [
      h("p", { class: "question" }, message),
      ...pageToOpen(url, controls),
      canAnswer ? h("div", { class: "toolbar" }, done, decline, cancel) : null,
    ];
  }
  const inputs = formInputs(request.schema);
  const form = h("form", { class: "elicitation-form", "aria-label": `Answer to ${request.tool}`,
    onsubmit: (event) => {
      event.preventDefault();
      if (!form.reportValidity()) return;
      answer({ operation: "answer", action: "accept", content: formValues(inputs) });
    } }, inputs.map((i) => i.wrapper));
  const accept = h("button", { type: "submit", class: "primary" }, "Accept");
  append(form, canAnswer ? h("div", { class: "toolbar" }, accept, decline, cancel) : null);
  controls.push(accept, decline, cancel, ...inputs.flatMap((i) => i.controls));
  return [h("p", { class: "question" }, message), form];
}

/** The page a URL question asks the person to open: its host, its whole address (text), and
 * an Open button that asks first, then opens it in a new tab through go.html (js/links.js:
 * so a sign-in there can finish as this person). An address that is not http(s) stays text,
 * with nothing to open it. */
function pageToOpen(text, controls) {
  const url = webAddress(text);
  const address = h("code", { class: "url" }, text || "(no address given)");
  if (url === null) {
    return [h("p", {}, "The server named a page this Workbench does not open (only http: and "
      + "https: addresses are opened): ", address)];
  }
  const said = status();
  const open = h("button", { type: "button", onclick: () => {
    asking.hidden = false;
    open.hidden = true;
    yes.focus();
  } }, `Open ${url.host}…`);
  const yes = h("button", { type: "button", class: "primary", onclick: () => {
    asking.hidden = true;
    open.hidden = false;
    if (openThroughGo(url)) said.set(`Opened ${url.host} in a new tab.`, "");
    else said.set("The browser blocked the new tab: allow pop-ups for this page.", "error");
  } }, `Yes, open ${url.host}`);
  const no = h("button", { type: "button", onclick: () => {
    asking.hidden = true;
    open.hidden = false;
    open.focus();
  } }, "Not now");
  const asking = h("div", { class: "open-ask", hidden: true },
    h("p", {}, "Open a page at ", h("strong", {}, url.host), " in a new tab?"),
    h("div", { class: "toolbar" }, yes, no));
  controls.push(open, yes, no);
  return [
    h("p", {}, "The server asks you to open a page at ", h("strong", { class: "host" }, url.host),
      ", do what it asks there, then press Done."),
    h("p", { class: "address" }, address),
    h("div", { class: "toolbar" }, open), asking, said,
  ];
}

/** One input per property of a flat JSON Schema object (string, number, integer, boolean,
 * enum, and an array of enum values): [{wrapper, controls, read}], read() → the value, or
 * undefined to leave it out. */
function formInputs(schema) {
  const properties = schema && typeof schema.properties === "object" && schema.properties
    ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  return Object.entries(properties).map(([name, spec]) => {
    const s = spec && typeof spec === "object" ? spec : {};
    const needed = required.has(name);
    const label = `${typeof s.title === "string" && s.title ? s.title : name}${needed ? " (required)" : ""}`;
    const hint = typeof s.description === "string" ? s.description : "";
    const choices = enumChoices(s);
    const many = s.type === "array" ? enumChoices(s.items || {}) : null;
    if (many) return multiInput(name, label, hint, many, s.default);
    if (choices) {
      const control = select([["", needed ? "Choose…" : "(none)"],
        ...choices.map((c, i) => [String(i), c.label])], { name, required: needed });
      const at = choices.findIndex((c) => c.value === s.default);
      if (at >= 0) control.value = String(at);
      return { wrapper: field(label, control, { name, hint }), controls: [control],
        read: () => (control.value === "" ? undefined : choices[Number(control.value)].value) };
    }
    if (s.type === "boolean") {
      const control = h("input", { type: "checkbox", name, checked: s.default === true });
      const wrapper = field(label, control, { name, hint });
      wrapper.classList.add("inline");
      wrapper.insertBefore(control, wrapper.firstChild);
      return { wrapper, controls: [control], read: () => control.checked };
    }
    if (s.type === "number" || s.type === "integer") {
      const control = h("input", { type: "number", name, required: needed,
        step: s.type === "integer" ? "1" : "any", min: s.minimum, max: s.maximum,
        value: typeof s.default === "number" ? String(s.default) : null });
      return { wrapper: field(label, control, { name, hint }), controls: [control],
        read: () => (control.value === "" ? undefined : Number(control.value)) };
    }
    const types = { email: "email", uri: "url", date: "date" };
    const control = h("input", { type: types[s.format] || "text", name, required: needed,
      minlength: s.minLength, maxlength: s.maxLength, autocomplete: "off",
      value: typeof s.default === "string" ? s.default : null });
    return { wrapper: field(label, control, { name, hint }), controls: [control],
      read: () => (control.value === "" ? undefined : control.value) };
  });
}

/** An array of enum values: a group of checkboxes. */
function multiInput(name, label, hint, choices, chosen) {
  const defaults = Array.isArray(chosen) ? chosen : [];
  const boxes = choices.map((c) => h("input", { type: "checkbox", name,
    checked: defaults.includes(c.value) }));
  const wrapper = h("fieldset", { class: "field choices", dataset: { field: name } },
    h("legend", {}, label), hint ? h("p", { class: "hint" }, hint) : null,
    choices.map((c, i) => h("label", { class: "inline" }, boxes[i], ` ${c.label}`)));
  const read = () => {
    const values = choices.filter((_, i) => boxes[i].checked).map((c) => c.value);
    return values.length ? values : undefined;
  };
  return { wrapper, controls: boxes, read };
}

/** [{value, label}] of an enum (enum + enumNames, or oneOf / anyOf of consts); else null. */
function enumChoices(s) {
  if (Array.isArray(s.enum)) {
    const names = Array.isArray(s.enumNames) ? s.enumNames : [];
    return s.enum.map((v, i) => ({ value: v, label: String(names[i] ?? v) }));
  }
  for (const list of [s.oneOf, s.anyOf]) {
    if (Array.isArray(list) && list.length && list.every((o) => o && typeof o === "object" && "const" in o)) {
      return list.map((o) => ({ value: o.const, label: String(o.title ?? o.const) }));
    }
  }
  return null;
}

/** The form's values as the schema types them; empty optional fields are left out. */
function formValues(inputs) {
  const content = {};
  for (const { wrapper, read } of inputs) {
    const value = read();
    if (value !== undefined) content[wrapper.dataset.field] = value;
  }
  return content;
}
