// Tool services: the `tool-service` descriptors of the workspace (config) beside the agent's
// live view of them (`agent-services`: configured or announced, live instances, their tools),
// a form to create, edit and delete descriptors, and a test-invoke form that calls a tool
// service or an MCP tool through the WebSocket and shows the answer as it streams in.
//
// A running service announces itself, so it may be listed with no descriptor stored: the
// page shows where each row comes from, and "Configure" turns an announced one into config.

import { fieldOfError } from "../api.js";
import { append, checkbox, confirmDelete, field, h, pretty, replace, scroller, select, status } from "../dom.js";
import { go, subRoute } from "../route.js";

const TYPE = "tool-service";

// a message for the next render: saving or deleting moves to another route, which renders
// the page anew
let flash = null;

export async function render(ctx) {
  const { api, session } = ctx;
  const descriptors = await api.values(TYPE);
  const live = await liveView(api, session);
  const route = subRoute("services");
  const note = flash ? status(flash.text, flash.kind) : status();
  flash = null;
  const services = merge(descriptors, live.services);
  const invoke = await invokePanel(ctx, services);
  return h("div", { class: "services-page" },
    h("h1", {}, "Tool services"),
    h("p", { class: "muted" }, "A tool service answers the agent's calls of its tools on the "
      + "bus. Its descriptor (config type tool-service) names its queues; a running service "
      + "also announces itself."),
    session.canWrite ? null : h("p", { class: "read-only-note" },
      "This token can only read config: descriptors are shown read-only."),
    h("div", { class: "toolbar" },
      session.canWrite ? h("button", { type: "button", onclick: () => go("services/new") },
        "New descriptor") : null,
      h("button", { type: "button", onclick: () => go(location.hash.slice(2) || "services") },
        "Refresh"),
      h("span", { class: "spacer" })),
    route ? null : note,
    serviceTable(services, live, route, invoke),
    route ? editorFor(ctx, route, services, descriptors, note) : null,
    invoke.el);
}

/** The id in #/services/ID ("" for the bare page). */
/** The agent's view ({services, error}); a token without `agent` still sees the config. */
async function liveView(api, session) {
  if (!session.can("agent")) {
    return { services: [], error: "The live view needs the agent capability, which this token lacks." };
  }
  try {
    const answer = await api.call("agent-services", {}, { flow: api.flow });
    return { services: Array.isArray(answer.services) ? answer.services : [], error: "" };
  } catch (e) {
    return { services: [], error: `Cannot read the live view: ${e.message}` };
  }
}

/** One row per id: the stored descriptor (if any) and the live record (if any). */
function merge(descriptors, liveServices) {
  const byId = new Map();
  for (const { key, value } of descriptors) {
    byId.set(key, { id: key, descriptor: value && typeof value === "object" ? value : {}, live: null });
  }
  for (const s of liveServices) {
    const row = byId.get(s.id) || { id: s.id, descriptor: null, live: null };
    row.live = s;
    byId.set(s.id, row);
  }
  return [...byId.values()].sort((a, b) => a.id.localeCompare(b.id));
}

// -- the table -----------------------------------------------------------------------------

function serviceTable(services, live, current, invoke) {
  const liveNote = live.error ? h("p", { class: "status error", role: "status" }, live.error) : null;
  if (!services.length) {
    return h("section", { class: "panel", "aria-labelledby": "services-title" },
      h("h2", { id: "services-title" }, "Services"), liveNote,
      h("p", { class: "muted" }, "No tool service is configured or announced in this workspace."));
  }
  const rows = services.map((s) => h("tr", { class: s.id === current ? "selected" : "" },
    h("td", {}, h("code", {}, s.id)),
    h("td", {}, sources(s)),
    h("td", {}, liveBadge(s.live)),
    h("td", {}, h("code", {}, s.descriptor?.["request-queue"] || s.live?.["request-queue"] || "")),
    h("td", {}, toolList(s.live)),
    h("td", {}, instanceList(s.live)),
    h("td", {},
      h("a", { href: `#/services/${encodeURIComponent(s.id)}` },
        s.descriptor ? `Descriptor of ${s.id}` : `Configure ${s.id}`),
      invoke.canInvoke ? [" ", h("button", { type: "button", onclick: () => invoke.choose(s.id) },
        `Try ${s.id}`)] : null)));
  return h("section", { class: "panel", "aria-labelledby": "services-title" },
    h("h2", { id: "services-title" }, "Services"), liveNote,
    scroller(h("table", { "aria-labelledby": "services-title" },
      h("thead", {}, h("tr", {}, ["Service", "Source", "Live", "Request queue", "Tools",
        "Instances", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows))));
}

function sources(s) {
  const out = [];
  if (s.descriptor) out.push(h("span", { class: "badge ok" }, "configured"));
  if (s.live?.announced) out.push(h("span", { class: "badge" }, "announced"));
  const disabled = s.descriptor?.enabled === false || s.live?.enabled === false;
  if (disabled) out.push(h("span", { class: "badge off" }, "disabled"));
  return out.flatMap((b, i) => (i ? [" ", b] : [b]));
}

function liveBadge(live) {
  if (!live || live.live === null || live.live === undefined) {
    return h("span", { class: "muted" }, "not announced");
  }
  const n = live.live;
  return h("span", { class: ["badge", n > 0 ? "ok" : "off"] },
    n > 0 ? `${n} live instance${n === 1 ? "" : "s"}` : "no live instance");
}

function toolList(live) {
  const tools = live?.tools || [];
  if (!tools.length) return h("span", { class: "muted" }, "none");
  return h("ul", {}, tools.map((t) => h("li", {},
    h("code", {}, t.name || t.key), " ",
    h("span", { class: ["badge", t.status === "offered" ? "ok" : "warn"] }, t.status),
    t.reason ? h("span", { class: "muted" }, ` ${t.reason}`) : null)));
}

function instanceList(live) {
  const instances = live?.instances || [];
  if (!instances.length) return h("span", { class: "muted" }, "none");
  return h("ul", {}, instances.map((i) => h("li", {},
    `${i.host} (pid ${i.pid}), last heartbeat `, when(i["last-heartbeat"]))));
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return h("time", { datetime: iso, title: iso },
    Number.isNaN(date.getTime()) ? iso : date.toLocaleTimeString());
}

// -- the descriptor form -------------------------------------------------------------------

function editorFor(ctx, route, services, descriptors, note) {
  const { api, session } = ctx;
  if (route === "new") {
    if (!session.canWrite) return null;
    return descriptorForm(ctx, descriptors, null, {}, note);
  }
  const found = services.find((s) => s.id === route);
  if (!found) {
    return h("section", { class: "panel" }, h("p", { class: "status error", role: "alert" },
      `There is no tool service "${route}" in workspace ${api.workspace}.`));
  }
  if (found.descriptor) return descriptorForm(ctx, descriptors, found.id, found.descriptor, note);
  // announced only: a descriptor to store, prefilled from what the service announced
  const request = found.live?.["request-queue"] || "";
  return descriptorForm(ctx, descriptors, null, {
    id: found.id, "request-queue": request, "response-queue": responseQueueFor(request),
  }, note, true);
}

/** The response queue that goes with a request queue of the usual spelling (a guess the
 * user checks: a service may name its queues as it likes). */
function responseQueueFor(request) {
  if (request.includes("/request/")) return request.replace("/request/", "/response/");
  if (request.startsWith("request:")) return request.replace(/^request:/, "response:");
  return "";
}

function descriptorForm(ctx, descriptors, key, original, note, fromAnnouncement = false) {
  const { api, session } = ctx;
  const isNew = key === null;
  const locked = !session.canWrite;
  const input = (props) => h("input", { type: "text", autocomplete: "off", spellcheck: "false",
    readonly: locked, ...props });
  const fields = {
    id: field("ID", input({ name: "id", value: original.id || key || "",
      readonly: locked || (!isNew || fromAnnouncement) }),
    { name: "id", hint: isNew ? "The service's id: the item's key, and what tool items name "
      + "in \"service\"." : "" }),
    request: field("Request queue", input({ name: "request-queue", value: original["request-queue"] || "",
      placeholder: "non-persistent://tg/request/NAME" }), { name: "request-queue" }),
    response: field("Response queue", input({ name: "response-queue", value: original["response-queue"] || "",
      placeholder: "non-persistent://tg/response/NAME" }),
    { name: "response-queue", hint: fromAnnouncement
      ? "Guessed from the announced request queue: check it." : "" }),
    enabled: checkbox("Enabled", original.enabled !== false, locked, "enabled"),
  };
  const params = paramsEditor(Array.isArray(original["config-params"]) ? original["config-params"] : [],
    locked);
  const all = [...Object.values(fields), params];

  const save = async () => {
    all.forEach((f) => f.showError(""));
    const id = fields.id.control.value.trim();
    if (!id) return fail(fields.id, "Give the service an id.", note);
    if (isNew && descriptors.some((d) => d.key === id)) {
      return fail(fields.id, `A descriptor "${id}" exists already; edit it instead.`, note);
    }
    const value = { ...original, id };  // fields this form does not know are kept
    value["request-queue"] = fields.request.control.value.trim();
    value["response-queue"] = fields.response.control.value.trim();
    value["config-params"] = params.value();
    if (fields.enabled.control.checked) delete value.enabled;
    else value.enabled = false;
    note.set("Saving…", "busy");
    try {
      await api.put([{ type: TYPE, key: isNew ? id : key, value }]);
    } catch (e) {
      showFailure(e, all, note);
      return;
    }
    flash = { text: `Saved the descriptor of "${id}".`, kind: "ok" };
    go(`services/${encodeURIComponent(isNew ? id : key)}`);
  };

  const title = isNew ? (fromAnnouncement ? `Configure ${original.id}` : "New descriptor")
    : `Descriptor of ${key}`;
  const buttons = locked ? null : h("div", { class: "toolbar" },
    h("button", { type: "submit", class: "primary" }, isNew ? "Create" : "Save"),
    isNew ? h("button", { type: "button", onclick: () => go("services") }, "Cancel")
      : deleteButton(api, key, note));
  return h("section", { class: "panel", "aria-labelledby": "descriptor-title" },
    h("h2", { id: "descriptor-title" }, title),
    fromAnnouncement ? h("p", { class: "hint" }, "This service announces itself but has no "
      + "stored descriptor. Storing one makes the agent call it from config (configured items "
      + "win over announced ones).") : null,
    h("form", { novalidate: true, onsubmit: (event) => { event.preventDefault(); save(); } },
      fields.id, fields.request, fields.response, params.el, fields.enabled, buttons, note));
}


/** Rows of config-params ({name, required}); errors of `config-params[i]...` go beside row i. */
function paramsEditor(initial, locked) {
  const rows = h("tbody");
  const error = h("p", { class: "field-error", role: "alert", hidden: true });
  const editor = {
    name: "config-params",
    el: null,
    showError(text, index = -1) {
      for (const row of rows.children) row.showError("");
      const row = rows.children[index];
      if (row) {
        row.showError(text);
        row.nameInput.focus();
      }
      error.textContent = row ? "" : text || "";
      error.hidden = Boolean(row) || !text;
    },
    value() {
      return [...rows.children].map((row) => ({ name: row.nameInput.value.trim(),
        required: row.requiredBox.checked }));
    },
  };
  const addRow = (param = {}) => {
    const n = rows.children.length + 1;
    const nameInput = h("input", { type: "text", value: typeof param.name === "string" ? param.name : "",
      readonly: locked, spellcheck: "false", "aria-label": `Config param ${n} name` });
    const requiredBox = h("input", { type: "checkbox", checked: param.required === true,
      disabled: locked, "aria-label": `Config param ${n} required` });
    const rowError = h("span", { class: "field-error", role: "alert", hidden: true });
    const row = h("tr", {},
      h("td", {}, nameInput, rowError),
      h("td", { class: "narrow" }, requiredBox),
      h("td", { class: "narrow" }, locked ? null : h("button", { type: "button",
        onclick: () => row.remove() }, `Remove config param ${n}`)));
    row.nameInput = nameInput;
    row.requiredBox = requiredBox;
    row.showError = (text) => {
      rowError.textContent = text || "";
      rowError.hidden = !text;
      if (text) nameInput.setAttribute("aria-invalid", "true");
      else nameInput.removeAttribute("aria-invalid");
    };
    append(rows, row);
    return row;
  };
  initial.forEach((p) => addRow(p && typeof p === "object" ? p : {}));
  editor.el = h("fieldset", { class: "arguments" },
    h("legend", {}, "Config params"),
    h("p", { class: "hint" }, "Values each tool item of this service carries and every call "
      + "sends in its config."),
    scroller(h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"),
      h("th", { scope: "col" }, "Required"), h("th", {}, ""))), rows)),
    locked ? null : h("button", { type: "button", onclick: () => addRow().nameInput.focus() },
      "Add config param"),
    error);
  return editor;
}

function fail(target, text, note) {
  target.showError(text);
  target.control?.focus();
  note.set(`Not saved: ${text}`, "error");
}

/** A failed put: the problem beside the field the config service names, else in the note. */
function showFailure(e, fields, note) {
  const { field: name, problem } = fieldOfError(e.message);
  if (name.startsWith("config-params")) {
    const index = /^config-params\[(\d+)\]/.exec(name);
    fields.find((f) => f.name === "config-params").showError(problem, index ? Number(index[1]) : -1);
    note.set("Not saved: see Config params.", "error");
    return;
  }
  const target = name ? fields.find((f) => f.dataset?.field === name) : null;
  if (target) {
    target.showError(problem);
    target.control.focus();
    note.set(`Not saved: see ${target.querySelector("label").textContent}.`, "error");
  } else {
    note.set(`Not saved: ${e.message}`, "error");
  }
}

function deleteButton(api, key, note) {
  return confirmDelete({
    key, note, question: `Delete the descriptor of "${key}"? `,
    remove: () => api.remove(TYPE, key),
    done: () => {
      flash = { text: `Deleted the descriptor of "${key}".`, kind: "ok" };
      go("services");
    },
  });
}

// -- test invoke ---------------------------------------------------------------------------

async function invokePanel(ctx, services) {
  const { api, session } = ctx;
  const heading = h("h2", { id: "invoke-title" }, "Test invoke");
  if (!session.can("tools:invoke")) {
    return { canInvoke: false, choose() {}, el: h("section", { class: "panel", "aria-labelledby": "invoke-title" },
      heading, h("p", { class: "muted" }, "Invoking tools needs the tools:invoke capability, "
        + "which this token lacks.")) };
  }
  let mcpKeys = [];
  let mcpError = "";
  try {
    mcpKeys = (await api.values("mcp")).map((i) => i.key);
  } catch (e) {
    mcpError = `Cannot list the MCP servers: ${e.message}`;
  }
  // each select is given its first value: dom.js's select() selects none for value ""
  const kind = field("Invoke", select([["tool-service", "a tool service"], ["mcp", "an MCP tool"]],
    { name: "kind", value: "tool-service" }), { name: "kind" });
  const serviceIds = services.map((s) => s.id);
  const service = field("Service", select(serviceIds.length ? serviceIds : [["", "(none)"]],
    { name: "service", value: serviceIds[0] || "" }), { name: "service" });
  const config = field("Config (JSON object)", textarea("{}", "config"), { name: "config",
    hint: "The values of the service's config-params, as a tool item would send them." });
  const mcpTool = field("MCP tool", select(mcpKeys.length ? mcpKeys : [["", "(none)"]],
    { name: "mcp-tool", value: mcpKeys[0] || "" }), { name: "mcp-tool", hint: mcpError });
  const args = field("Arguments (JSON object)", textarea("{}", "arguments"), { name: "arguments" });
  const fill = h("button", { type: "button" }, "Fill from the tool's schema");
  const servicePart = h("div", {}, service, config);
  const mcpPart = h("div", {}, mcpTool, fill);
  const result = h("pre", { role: "log", "aria-label": "Result", "aria-live": "polite" });
  const progress = h("ul", { role: "log", "aria-label": "Progress", hidden: true });
  const note = status();
  const submit = h("button", { type: "submit", class: "primary" }, "Invoke");

  const showKind = () => {
    const mcp = kind.control.value === "mcp";
    servicePart.hidden = mcp;
    mcpPart.hidden = !mcp;
  };
  kind.control.addEventListener("change", showKind);
  showKind();

  const paramsHint = () => {
    const chosen = services.find((s) => s.id === service.control.value);
    const names = (chosen?.descriptor?.["config-params"] || []).map((p) => p.name + (p.required ? " (required)" : ""));
    config.querySelector(".hint").textContent = names.length
      ? `Config params of this service: ${names.join(", ")}.`
      : "The values of the service's config-params, as a tool item would send them.";
  };
  service.control.addEventListener("change", paramsHint);
  paramsHint();

  fill.addEventListener("click", async () => {
    args.showError("");
    note.set("Reading the tool's input schema…", "busy");
    try {
      const answer = await api.call("mcp-tool", { name: mcpTool.control.value, operation: "describe" },
        { flow: api.flow });
      const described = JSON.parse(answer.object || "{}");
      args.control.value = pretty(template(described.inputSchema));
      note.set(described.description ? `${described.name}: ${described.description}` : "", "");
    } catch (e) {
      note.set(`Cannot read the tool's schema: ${e.message}`, "error");
    }
  });

  const run = async () => {
    [config, args, service, mcpTool].forEach((f) => f.showError(""));
    const mcp = kind.control.value === "mcp";
    const target = mcp ? mcpTool : service;
    if (!target.control.value) return target.showError("Choose one first.");
    const values = jsonObject(args);
    const configValue = mcp ? {} : jsonObject(config);
    if (values === undefined || configValue === undefined) {
      note.set("Not sent: fix the JSON first.", "error");
      return;
    }
    replace(result);
    replace(progress);
    progress.hidden = true;
    submit.disabled = true;
    note.set("Invoking…", "busy");
    try {
      if (mcp) {
        await api.stream("mcp-tool", { name: target.control.value, parameters: values, progress: true },
          { flow: api.flow, onResponse: (r) => mcpResponse(r, result, progress) });
      } else {
        await api.stream("tool-service", { id: target.control.value, config: configValue, arguments: values },
          { flow: api.flow, onResponse: (r) => { if (typeof r.response === "string") append(result, r.response); } });
      }
      note.set("Done.", "ok");
    } catch (e) {
      note.set(`Failed (${e.type}): ${e.message}`, "error");
    } finally {
      submit.disabled = false;
    }
  };

  const el = h("section", { class: "panel", "aria-labelledby": "invoke-title" },
    heading,
    h("form", { novalidate: true, onsubmit: (event) => { event.preventDefault(); run(); } },
      kind, servicePart, mcpPart, args, h("div", { class: "toolbar" }, submit), note),
    h("h3", {}, "Result"), progress, result);
  return {
    canInvoke: true,
    el,
    choose(id) {
      kind.control.value = "tool-service";
      showKind();
      service.control.value = id;
      paramsHint();
      el.scrollIntoView();
      args.control.focus();
    },
  };
}

function textarea(value, name) {
  const el = h("textarea", { name, class: "code", rows: 4, spellcheck: "false" });
  el.value = value;
  return el;
}

/** The JSON object in a text field, or undefined with the problem shown beside it. */
function jsonObject(wrapper) {
  const text = wrapper.control.value.trim();
  let value;
  try {
    value = JSON.parse(text || "{}");
  } catch (e) {
    wrapper.showError(`Not valid JSON: ${e.message}`);
    wrapper.control.focus();
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    wrapper.showError('Must be a JSON object, like {"topic": "cats"}.');
    wrapper.control.focus();
    return undefined;
  }
  return value;
}

function mcpResponse(r, result, progress) {
  if (r.progress) {
    const p = r.progress;
    const amount = p.total ? `${p.progress}/${p.total}` : `${p.progress}`;
    progress.hidden = false;
    append(progress, h("li", {}, `progress ${amount}`, p.message ? `: ${p.message}` : ""));
    return;
  }
  if (typeof r.text === "string") {
    result.textContent = r.text;
  } else if (typeof r.object === "string") {
    try {
      result.textContent = pretty(JSON.parse(r.object));
    } catch {
      result.textContent = r.object;
    }
  }
}

/** Arguments to start from: each property's default, else an empty value of its type. */
function template(schema) {
  const out = {};
  const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
  const empty = { string: "", integer: 0, number: 0, boolean: false, array: [], object: {} };
  for (const [name, p] of Object.entries(properties)) {
    out[name] = p && "default" in p ? p.default : (empty[p?.type] ?? null);
  }
  return out;
}
