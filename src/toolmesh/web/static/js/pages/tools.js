// Tools: the workspace's `tool` config items, listed with what the agent makes of them (the
// per-flow `agent-tools` service: offered, or not and why; tools services announced are
// listed there too), and created, edited and deleted in a form for each tool type.
//
// The form edits the fields it knows and keeps every other field of the item as stored (a
// user's own keys survive a save). The agent reloads config live; the list asks it with the
// config version the page read, so it answers from that config or newer.

import { parseValue, fieldOfError } from "../api.js";
import { confirmDelete, field, h, scroller, select, status } from "../dom.js";
import { policyBadge, policyField, policyOf } from "../policy.js";
import { go, subRoute } from "../route.js";
import { argumentEditor } from "./arguments.js";
import { hintsPart, importPart } from "./tool-import.js";
import { MASK, paramsPart } from "./tool-params.js";

const TYPE = "tool";
const TOOL_TYPES = [
  ["text-completion", "text-completion: ask the LLM a question"],
  ["prompt", "prompt: fill a prompt template"],
  ["mcp-tool", "mcp-tool: call a tool on an MCP server"],
  ["tool-service", "tool-service: call a service on the message bus"],
];
/** The fields each type needs besides name and description (config/validation.py). */
const TYPE_FIELDS = { "text-completion": [], prompt: ["template"], "mcp-tool": ["mcp-tool"],
  "tool-service": ["service"] };
/** Prompt items that are not templates (prompt/layout.py). */
const NOT_TEMPLATES = new Set(["system", "template-index"]);

// a message for the next render: saving or deleting moves to another route, which renders
// the page anew
let flash = null;

export async function render(ctx) {
  const { api, session } = ctx;
  const { items, version } = await loadTools(api);
  const route = subRoute("tools");
  const selected = items.find((i) => i.key === route);
  const editing = (route === "new" && session.canWrite) || Boolean(selected);
  const [statuses, choices, servers] = await Promise.all([
    loadStatuses(api, session, version),
    editing ? loadChoices(api, session) : null,
    loadServers(api),
  ]);
  const note = flash ? status(flash.text, flash.kind) : status();
  flash = null;

  let editor = null;
  if (editing) editor = form(ctx, items, selected || null, choices, note);
  else if (route && route !== "new") {
    editor = h("section", { class: "panel" }, h("p", { class: "status error", role: "alert" },
      `There is no tool "${route}" in workspace ${api.workspace}.`));
  }
  const page = h("div", { class: "tools-page" },
    h("h1", {}, "Tools"),
    h("p", { class: "muted" }, "The tools the agent may offer the LLM: the tool items of this "
      + "workspace and the tool services announce. Status is the agent's own view."),
    session.canWrite ? null : h("p", { class: "read-only-note" },
      "This token can only read config: tools are shown read-only."),
    h("div", { class: "toolbar" },
      session.canWrite ? h("button", { type: "button", onclick: () => go("tools/new") }, "New tool") : null,
      h("button", { type: "button", onclick: () => go(location.hash.replace(/^#\/?/, "") || "tools") },
        "Refresh")),
    editing ? null : note,
    calling(statuses.calling),
    list(items, statuses, route, servers),
    editor);
  if (editor) requestAnimationFrame(() => editor.scrollIntoView?.({ block: "nearest" }));
  return page;
}

// -- loading -------------------------------------------------------------------------------

/** The tool items, values parsed, and the config version they are from. */
async function loadTools(api) {
  const data = await api.call("config", { operation: "getvalues", type: TYPE });
  const items = (data.values || []).map((v) => ({ key: v.key, value: parseValue(v.value) }))
    .sort((a, b) => a.key.localeCompare(b.key));
  return { items, version: typeof data.version === "number" ? data.version : null };
}

/** {byKey: Map, list, error}: what the agent says of each tool; error (text) when it could
 * not be asked — the list still shows the items, with their status unknown. */
async function loadStatuses(api, session, version) {
  if (!session.can("agent")) {
    return { byKey: new Map(), list: [], error: "this token lacks the agent capability, which "
      + "asking the agent needs" };
  }
  try {
    const body = version === null ? {} : { version };
    const answer = await api.call("agent-tools", body, { flow: api.flow });
    const list = Array.isArray(answer.tools) ? answer.tools : [];
    return { byKey: new Map(list.map((t) => [t.key, t])), list, error: null,
      calling: answer.tool_calling || null };
  } catch (e) {
    return { byKey: new Map(), list: [], error: `the agent did not answer (${e.message})` };
  }
}

/** The policy of each MCP server item, by key (for the tools that name one); empty when the
 * items cannot be read — the column then shows each tool's own policy only. */
async function loadServers(api) {
  try {
    return new Map((await api.values("mcp")).map(({ key, value }) => [key, policyOf(value)]));
  } catch {
    return new Map();
  }
}

/** What the form's choosers offer; each list that cannot be read is empty, with a reason. */
async function loadChoices(api, session) {
  const problems = {};
  const attempt = async (what, load) => {
    try {
      return await load();
    } catch (e) {
      problems[what] = e.message;
      return [];
    }
  };
  const [services, announced, servers, prompts] = await Promise.all([
    attempt("service", () => api.values("tool-service")),
    session.can("agent") ? attempt("announced", async () => {
      const answer = await api.call("agent-services", {}, { flow: api.flow });
      // an announced service's descriptor comes with it: its config-params are known too
      return (answer.services || []).filter((s) => !s.configured && s.announced)
        .map((s) => ({ key: s.id, value: s.descriptor, announced: true }));
    }) : [],
    attempt("mcp-tool", () => api.values("mcp")),
    attempt("template", () => api.values("prompt")),
  ]);
  const templates = new Set();
  for (const { key } of prompts) {
    if (key.startsWith("template.")) templates.add(key.slice("template.".length));
    else if (!NOT_TEMPLATES.has(key)) templates.add(key);  // the older alias <id>
  }
  return {
    services: [...services, ...announced.filter((a) => !services.some((s) => s.key === a.key))]
      .filter((s) => s.value && typeof s.value === "object"),
    announced: announced.filter((a) => !services.some((s) => s.key === a.key)).map((a) => a.key),
    servers: servers.map((s) => s.key),
    templates: [...templates].sort(),
    problems,
  };
}

// -- the list ------------------------------------------------------------------------------

/** How the agent asks the LLM for tool calls here (docs/tool-calling.md), in one line. */
function calling(c) {
  if (!c) return null;
  return h("p", { class: "muted", "data-tool-calling": c.tool_calling },
    "Tool calling: ", h("strong", {}, c.tool_calling), ` (${c.source}`,
    c.detail ? `: ${c.detail}` : "", ")", c.llm ? ` — ${c.llm}` : "");
}

function list(items, statuses, current, servers) {
  const configured = new Set(items.map((i) => i.key));
  const rows = items.map(({ key, value }) => {
    const v = value && typeof value === "object" ? value : {};
    return h("tr", { class: key === current ? "selected" : "" },
      h("td", {}, h("a", { href: `#/tools/${encodeURIComponent(key)}`,
        "aria-current": key === current ? "true" : null }, key)),
      h("td", {}, str(v.name)),
      h("td", {}, str(v.type)),
      h("td", {}, statusCell(statuses, statuses.byKey.get(key), v)),
      h("td", {}, approvalCell(v, servers)),
      h("td", {}, listText(v.group, "default")),
      h("td", {}, str(v.state) || h("span", { class: "muted" }, "unchanged")),
      h("td", {}, listText(v["applicable-states"], "any")));
  });
  const announced = statuses.list.filter((t) => t.source === "announced" && !configured.has(t.key))
    .map((t) => h("tr", {},
      h("td", {}, t.key, " ", h("span", { class: "badge" }, `announced by ${t.service || "a service"}`)),
      h("td", {}, str(t.name)),
      h("td", {}, str(t.type)),
      h("td", {}, statusCell(statuses, t, {})),
      h("td", { class: "muted" }, "as announced"),
      h("td", { class: "muted" }, "as announced"),
      h("td", { class: "muted" }, "—"),
      h("td", { class: "muted" }, "—")));
  const problem = statuses.error ? status(`Whether each tool is offered is unknown: ${statuses.error}.`,
    "error") : null;
  const table = rows.length || announced.length ? scroller(h("table", { "aria-label": "Tools" },
    h("thead", {}, h("tr", {}, ["Key", "Name", "Type", "Status", "Approval", "Groups",
      "State after use", "Applicable states"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows, announced)))
    : h("p", { class: "muted" }, "No tools are configured or announced yet.");
  return h("section", { class: "panel", "aria-label": "Tool list" }, problem, table);
}

function statusCell(statuses, found, value) {
  if (statuses.error) {
    return [h("span", { class: "badge warn" }, "unknown"), " ",
      h("span", { class: "muted" }, statuses.error)];
  }
  if (!found) {
    const why = value.enabled === false ? "switched off (enabled: false)"
      : "the agent does not list it yet; refresh in a moment";
    return [h("span", { class: "badge warn" }, value.enabled === false ? "off" : "unknown"), " ",
      h("span", { class: "muted" }, why)];
  }
  if (found.status === "available") return h("span", { class: "badge ok" }, "offered");
  return [h("span", { class: "badge off" }, "not offered"),
    found.reason ? [" ", h("span", { class: "reason" }, found.reason)] : null];
}

/** The tool's policy; else, for an mcp-tool, its server item's; else what decides then. */
function approvalCell(value, servers) {
  const own = policyOf(value);
  if (own) return policyBadge(own);
  const server = value.type === "mcp-tool" ? servers.get(value["mcp-tool"]) : "";
  if (server) return policyBadge(server, { from: `server ${value["mcp-tool"]}` });
  return policyBadge("", { otherwise: value.type === "mcp-tool"
    ? "default (or the tool's hints)" : "default" });
}

function str(value) {
  return typeof value === "string" ? value : "";
}

function listText(value, otherwise) {
  if (Array.isArray(value) && value.length) return value.map(String).join(", ");
  return h("span", { class: "muted" }, otherwise);
}

// -- the form ------------------------------------------------------------------------------

function form(ctx, items, item, choices, note) {
  const { api, session } = ctx;
  const isNew = item === null;
  const key = isNew ? "" : item.key;
  const original = !isNew && item.value && typeof item.value === "object" && !Array.isArray(item.value)
    ? item.value : {};
  const locked = !session.canWrite;
  const input = (props) => h("input", { type: "text", autocomplete: "off", readonly: locked, ...props });

  const types = TOOL_TYPES.slice();
  if (original.type && !TYPE_FIELDS[original.type]) types.push([original.type, String(original.type)]);
  const fields = {
    key: field("Key", input({ name: "key", value: key, readonly: locked || !isNew, required: true,
      spellcheck: "false" }), { name: "key", hint: isNew ? "The item's key: the tool's id in config." : "" }),
    name: field("Name", input({ name: "name", value: str(original.name), spellcheck: "false" }),
      { name: "name", hint: "The name the LLM calls the tool by." }),
    description: field("Description", h("textarea", { name: "description", rows: 3, readonly: locked }),
      { name: "description", hint: "What the tool does, for the LLM to choose it." }),
    type: field("Type", select(types, { value: original.type || "text-completion", name: "type",
      disabled: locked }), { name: "type" }),
    template: field("Template", chooser(choices.templates, original.template, "template", locked,
      "no templates"), { name: "template", hint: problemHint(choices, "template",
      "The prompt template the tool fills with its arguments (see Prompts).") }),
    mcp: field("MCP server", chooser(choices.servers, original["mcp-tool"], "mcp-tool", locked,
      "no MCP servers configured"), { name: "mcp-tool", hint: problemHint(choices, "mcp-tool",
      "The mcp item (see MCP servers) naming the server and its tool.") }),
    service: field("Service", serviceChooser(choices, original.service, locked), { name: "service",
      hint: problemHint(choices, "service", "The tool service descriptor (see Tool services).") }),
    group: field("Groups", input({ name: "group", value: joined(original.group) }),
      { name: "group", hint: "Comma-separated; empty: the default group." }),
    state: field("State after use", input({ name: "state", value: str(original.state) }),
      { name: "state", hint: "The state the agent moves to after using the tool; empty: unchanged." }),
    states: field("Applicable states", input({ name: "applicable-states",
      value: joined(original["applicable-states"]) }),
    { name: "applicable-states", hint: "Comma-separated states the tool is offered in; empty: any." }),
    approval: policyField(original, { locked }),
  };
  fields.description.control.value = str(original.description);
  const editor = argumentEditor(original.arguments, { locked });
  const params = paramsPart(choices, original, locked);
  fields.service.control.addEventListener("change", () => params.show(fields.service.control.value));
  params.show(fields.service.control.value);
  const importer = importPart(ctx, fields, editor, locked);
  const hints = hintsPart(ctx, fields);

  const parts = {
    "text-completion": h("p", { class: "hint" }, "A text-completion tool always takes one "
      + "argument, question (a string), and asks the LLM it."),
    prompt: h("div", {}, fields.template),
    "mcp-tool": h("div", {}, fields.mcp, importer.el),
    "tool-service": h("div", {}, fields.service, params.el),
  };
  const showType = () => {
    const type = fields.type.control.value;
    for (const [name, part] of Object.entries(parts)) part.hidden = name !== type;
    editor.el.hidden = type === "text-completion";
    if (hints) hints.hidden = type !== "mcp-tool";
  };
  fields.type.control.addEventListener("change", showType);
  showType();

  const all = () => [...Object.values(fields), ...params.fields()];
  const clearErrors = () => {
    all().forEach((f) => f.showError(""));
    editor.clearErrors();
  };

  const save = async () => {
    clearErrors();
    const newKey = fields.key.control.value.trim();
    if (!newKey) return fail(fields.key, "Give the tool a key.", note);
    if (isNew && items.some((i) => i.key === newKey)) {
      return fail(fields.key, `A tool "${newKey}" exists already; choose it in the list to edit it.`, note);
    }
    const built = build(original, fields, params, editor);
    if (built.problem) {
      const { target, text } = built.problem;
      if (target.row) editor.showError(text, target.row, target.control);
      else return fail(target, text, note);
      note.set(`Not saved: ${text}`, "error");
      return;
    }
    note.set("Saving…", "busy");
    try {
      await api.put([{ type: TYPE, key: newKey, value: built.value }]);
    } catch (e) {
      showFailure(e, all(), editor, built.rows, note);
      return;
    }
    flash = { text: `Saved tool "${newKey}". The list shows what the agent says of it now.`, kind: "ok" };
    go(`tools/${encodeURIComponent(newKey)}`);
  };

  const buttons = locked ? null : h("div", { class: "toolbar" },
    h("button", { type: "submit", class: "primary" }, isNew ? "Create" : "Save"),
    isNew ? h("button", { type: "button", onclick: () => go("tools") }, "Cancel")
      : deleteButton(api, key, note));
  const title = isNew ? "New tool" : `Tool ${key}`;
  return h("section", { class: "panel", "aria-labelledby": "tool-form-title" },
    h("h2", { id: "tool-form-title" }, title),
    h("form", { novalidate: true, "aria-labelledby": "tool-form-title",
      onsubmit: (event) => { event.preventDefault(); save(); } },
    fields.key, fields.type, fields.name, fields.description,
    Object.values(parts),
    editor.el,
    h("fieldset", {}, h("legend", {}, "When the agent offers it"), fields.group, fields.state, fields.states),
    h("fieldset", {}, h("legend", {}, "Whether a person approves each call"), fields.approval, hints),
    buttons, note));
}

function problemHint(choices, what, hint) {
  const problem = choices.problems[what];
  const announced = what === "service" ? choices.problems.announced : "";
  return [hint, problem ? `The list could not be read: ${problem}` : "",
    announced ? `Announced services are not listed: ${announced}` : ""].filter(Boolean).join(" ");
}

/** A <select> of names, with the stored one kept even when it is not among them. */
function chooser(names, current, name, locked, none) {
  const options = names.map((n) => [n, n]);
  if (current && !names.includes(current)) options.push([current, `${current} (not found)`]);
  if (!options.length || !current) options.unshift(["", options.length ? "Choose…" : `(${none})`]);
  return select(options, { value: current || "", name, disabled: locked });
}

function serviceChooser(choices, current, locked) {
  const options = choices.services.map((s) => [s.key, s.announced ? `${s.key} (announced)` : s.key]);
  for (const id of choices.announced) {
    // announced with no descriptor to show (it did not parse): still a service to choose
    if (!options.some(([v]) => v === id)) options.push([id, `${id} (announced)`]);
  }
  const known = options.some(([v]) => v === current);
  if (current && !known) options.push([current, `${current} (not found)`]);
  if (!current) options.unshift(["", options.length ? "Choose…" : "(no tool services)"]);
  return select(options, { value: current || "", name: "service", disabled: locked });
}

function joined(value) {
  return Array.isArray(value) ? value.map(String).join(", ") : "";
}

function splitList(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean);
}

/**
 * The item to store: {value, rows} (rows: the argument editor's row of each stored argument),
 * or {problem: {target, text}} for what the form itself can tell is wrong.
 */
function build(original, fields, params, editor) {
  const value = { ...original };  // fields this form does not know are kept
  const type = fields.type.control.value;
  value.type = type;
  value.name = fields.name.control.value.trim();
  value.description = fields.description.control.value.trim();
  for (const [other, names] of Object.entries(TYPE_FIELDS)) {
    if (other !== type) names.forEach((n) => delete value[n]);  // another type's reference
  }
  if (type === "prompt") value.template = fields.template.control.value;
  if (type === "mcp-tool") value["mcp-tool"] = fields.mcp.control.value;
  if (type === "tool-service") {
    value.service = fields.service.control.value;
    for (const p of params.params()) {
      const text = p.wrapper.control.value.trim();
      if (!text && p.storedSecret) value[p.name] = MASK;  // the config service keeps the stored one
      else if (text) value[p.name] = typeof p.stored === "string" || p.stored === undefined
        ? text : parseValue(text);
      else if (p.required) return { problem: { target: p.wrapper, text: `${p.name} is required by the service.` } };
      else delete value[p.name];
    }
  }
  let rows = [];
  if (type !== "text-completion") {
    const read = editor.value();
    if (read.problem) {
      return { problem: { target: { row: read.problem.row, control: read.problem.control },
        text: read.problem.text } };
    }
    if (read.args.length) value.arguments = read.args;
    else delete value.arguments;
    rows = read.rows;
  }
  fields.approval.write(value);
  setList(value, "group", fields.group.control.value);
  setList(value, "applicable-states", fields.states.control.value);
  const state = fields.state.control.value.trim();
  if (state) value.state = state;
  else delete value.state;
  return { value, rows };
}

function setList(value, name, text) {
  const list = splitList(text);
  if (list.length) value[name] = list;
  else delete value[name];
}

function fail(target, text, note) {
  target.showError(text);
  if (target.control) target.control.focus();
  note.set(`Not saved: ${text}`, "error");
}

/** A failed put: the problem beside the field the config service names, else in the note. */
function showFailure(e, fields, editor, rows, note) {
  const { field: name, problem } = fieldOfError(e.message);
  if (name.startsWith("arguments")) {
    const place = editor.locate(name.slice("arguments".length), rows);
    if (place) {
      editor.showError(`${place.prefix}${problem}`, place.row, place.control);
    } else {
      editor.showError(`${name}: ${problem}`);
    }
    note.set(`Not saved: see the arguments (${name}: ${problem}).`, "error");
    return;
  }
  const base = name.split(/[.[]/)[0];
  const target = name ? fields.find((f) => f.dataset?.field === name)
    || fields.find((f) => f.dataset?.field === base) : null;
  if (target && !target.closest("[hidden]")) {
    target.showError(problem);
    target.control.focus();
    const label = target.querySelector("label")?.textContent || name;
    note.set(`Not saved: see ${label}.`, "error");
  } else {
    note.set(`Not saved: ${e.message}`, "error");
  }
}

function deleteButton(api, key, note) {
  return confirmDelete({
    key, note, question: `Delete the tool "${key}"? `,
    remove: () => api.remove(TYPE, key),
    done: () => {
      flash = { text: `Deleted tool "${key}".`, kind: "ok" };
      go("tools");
    },
  });
}
