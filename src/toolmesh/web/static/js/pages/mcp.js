// MCP servers: the `mcp` config items (TrustGraph's format: one item = one MCP server
// endpoint and the name of one tool there), listed, created, edited, deleted, and tested by
// asking the server for its tools (the mcp-tool service's `list-tools`).
//
// Secrets are write-only. The gateway reads a stored token (and stdio env values) as "***";
// the page never puts that, nor anything stored, into an input: a token input starts empty,
// and a save sends "***" back for "keep the stored one" (the config service swaps the stored
// value in), the typed text for a new one, or no token at all when the user removes it.

import { fieldOfError } from "../api.js";
import { append, checkbox, confirmDelete, field, h, pretty, replace, scroller, select, status } from "../dom.js";
import { hintsBadge, policyBadge, policyField, policyOf } from "../policy.js";
import { go, subRoute } from "../route.js";
import { oauthPer, signIns } from "./mcp-signin.js";

const TYPE = "mcp";
const MASK = "***";
const TRANSPORTS = [
  ["streamable-http", "Streamable HTTP"],
  ["sse", "SSE (older servers)"],
  ["stdio", "stdio (a local command)"],
];

// a message for the next render: saving or deleting moves to another route, which renders
// the page anew
let flash = null;

export async function render(ctx) {
  const { api, session } = ctx;
  const items = await api.values(TYPE);
  const route = subRoute("mcp");
  const note = flash ? status(flash.text, flash.kind) : status();
  flash = null;
  const selected = items.find((i) => i.key === route);
  let editor;
  if (route === "new" && session.canWrite) editor = form(ctx, items, null, note);
  else if (selected) editor = form(ctx, items, selected, note);
  else if (route && route !== "new") {
    editor = h("section", { class: "panel" }, h("p", { class: "status error", role: "alert" },
      `There is no MCP server "${route}" in workspace ${api.workspace}.`));
  } else {
    editor = h("section", { class: "panel" }, h("p", { class: "muted" },
      items.length ? "Choose a server to see its settings and test its connection."
        : "No MCP servers are configured yet."));
  }
  return h("div", { class: "mcp-page" },
    h("h1", {}, "MCP servers"),
    h("p", { class: "muted" }, "Each item names one tool on one MCP server. A tool item of "
      + "type mcp-tool offers it to the agent by naming the item's key."),
    session.canWrite ? null : h("p", { class: "read-only-note" },
      "This token can only read config: the settings are shown read-only."),
    session.canWrite ? h("div", { class: "toolbar" },
      h("button", { type: "button", onclick: () => go("mcp/new") }, "New MCP server")) : null,
    route ? null : note,
    list(items, route, signIns(ctx, items)), editor);
}

function isStdio(value) {
  return value.transport === "stdio";
}

function where(value) {
  if (isStdio(value)) return [value.command || "", ...(value.args || [])].join(" ");
  return value.url || "";
}

/** A stdio server's environment, its values masked (the gateway sends them as "***"). */
function envSummary(value) {
  const names = isStdio(value) && value.env && typeof value.env === "object" ? Object.keys(value.env) : [];
  if (!names.length) return null;
  return h("div", { class: "muted" }, "env: ", names.map((n) => `${n}=${MASK}`).join(" "));
}

/** The table of items; signIn (mcp-signin.js) adds a Sign-in column when an item uses OAuth. */
function list(items, current, signIn) {
  if (!items.length) return h("section", { class: "panel" }, h("p", { class: "muted" }, "None yet."));
  const rows = items.map(({ key, value }) => {
    const v = value && typeof value === "object" ? value : {};
    const per = oauthPer(v);
    const token = per ? h("span", { class: "badge" }, `OAuth, per ${per}`)
      : v["auth-token"] ? h("span", { class: "badge ok" }, "stored")
        : h("span", { class: "muted" }, "none");
    return h("tr", { class: key === current ? "selected" : "" },
      h("td", {}, h("a", { href: `#/mcp/${encodeURIComponent(key)}`,
        "aria-current": key === current ? "true" : null }, key)),
      h("td", {}, v.transport || "streamable-http"),
      h("td", {}, h("code", {}, where(v)), envSummary(v)),
      h("td", {}, v["remote-name"] || key),
      h("td", {}, token),
      h("td", {}, policyBadge(policyOf(v), { otherwise: "default (or the tool's hints)" })),
      signIn.any ? h("td", {}, signIn.cell(key, v)) : null);
  });
  const columns = ["Key", "Transport", "Server", "Remote tool", "Token", "Approval",
    signIn.any ? "Sign-in" : null].filter(Boolean);
  return h("section", { class: "panel", "aria-label": "Configured MCP servers" },
    scroller(h("table", {},
      h("thead", {}, h("tr", {}, columns.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows))));
}

// -- the form --------------------------------------------------------------------------------

function form(ctx, items, item, note) {
  const { api, session } = ctx;
  const isNew = item === null;
  const key = isNew ? "" : item.key;
  const original = !isNew && item.value && typeof item.value === "object" ? item.value : {};
  const locked = !session.canWrite;
  const storedToken = original["auth-token"] === MASK;
  const storedEnv = original.env && typeof original.env === "object" ? original.env : {};

  const input = (props) => h("input", { type: "text", autocomplete: "off", spellcheck: "false",
    readonly: locked, ...props });
  const fields = {
    key: field("Key", input({ name: "key", value: key, readonly: locked || !isNew, required: true }),
      { name: "key", hint: isNew ? "What tool items of type mcp-tool name (their \"mcp-tool\")." : "" }),
    transport: field("Transport", select(TRANSPORTS, { value: original.transport || "streamable-http",
      name: "transport", disabled: locked }), { name: "transport" }),
    url: field("URL", input({ name: "url", value: original.url || "", inputmode: "url",
      placeholder: "http://host:port/mcp" }), { name: "url" }),
    remote: field("Remote tool name", input({ name: "remote-name", value: original["remote-name"] || "" }),
      { name: "remote-name", hint: "The tool's name on the server (empty: the key)." }),
    token: field("Bearer token", h("input", { type: "password", name: "auth-token",
      autocomplete: "new-password", spellcheck: "false", readonly: locked }),
    { name: "auth-token", hint: storedToken
      ? "A token is stored; leave empty to keep it." : "Sent as Authorization: Bearer …; optional." }),
    sampling: checkbox("Let the server ask the LLM (sampling)", original.sampling === true, locked,
      "sampling"),
    command: field("Command", input({ name: "command", value: original.command || "" }),
      { name: "command", hint: "stdio items need the admin capability, and the gateway runs "
        + "only the commands its stdio allow-list names." }),
    args: field("Arguments", h("textarea", { name: "args", class: "code", rows: 3,
      readonly: locked, spellcheck: "false" }), { name: "args", hint: "One per line." }),
    approval: policyField(original, { locked, what: "server" }),
  };
  fields.args.control.value = (original.args || []).join("\n");
  const removeToken = storedToken && !locked
    ? checkbox("Remove the stored token", false, false, "remove-token") : null;
  const env = envEditor(storedEnv, locked);

  const httpPart = h("div", {}, fields.url, fields.token, removeToken);
  const stdioPart = h("div", {}, fields.command, fields.args, env.el);
  const showTransport = () => {
    const stdio = fields.transport.control.value === "stdio";
    httpPart.hidden = stdio;
    stdioPart.hidden = !stdio;
  };
  fields.transport.control.addEventListener("change", showTransport);
  showTransport();

  const all = [...Object.values(fields), env];
  const clearErrors = () => all.forEach((f) => f.showError(""));

  const save = async () => {
    clearErrors();
    const newKey = fields.key.control.value.trim();
    if (!newKey) return fail(fields.key, "Give the server a key.", note);
    if (isNew && items.some((i) => i.key === newKey)) {
      return fail(fields.key, `An MCP server "${newKey}" exists already; choose it in the list to edit it.`, note);
    }
    const value = build(original, fields, removeToken, env, storedToken);
    if (!value) return fail(env, env.problem, note);
    note.set("Saving…", "busy");
    try {
      await api.put([{ type: TYPE, key: newKey, value }]);
    } catch (e) {
      showFailure(e, all, note);
      return;
    }
    flash = { text: `Saved MCP server "${newKey}".`, kind: "ok" };
    go(`mcp/${encodeURIComponent(newKey)}`);
  };

  const buttons = locked ? null : h("div", { class: "toolbar" },
    h("button", { type: "submit", class: "primary" }, isNew ? "Create" : "Save"),
    isNew ? h("button", { type: "button", onclick: () => go("mcp") }, "Cancel")
      : deleteButton(api, key, note));
  const tester = isNew ? null : connectionTest(ctx, key, original);
  const title = isNew ? "New MCP server" : `MCP server ${key}`;
  return h("section", { class: "panel", "aria-labelledby": "mcp-form-title" },
    h("h2", { id: "mcp-form-title" }, title),
    h("form", { novalidate: true, onsubmit: (event) => { event.preventDefault(); save(); } },
      fields.key, fields.transport, httpPart, stdioPart, fields.remote, fields.sampling,
      fields.approval, buttons, note),
    tester);
}

/** The item to store, from the form; null when the env rows cannot make one. */
function build(original, fields, removeToken, env, storedToken) {
  const value = { ...original };  // fields this form does not know are kept
  value.transport = fields.transport.control.value;
  if (value.transport === "stdio") {
    // a stdio server has no URL or bearer token: it is a local process
    delete value.url;
    delete value["auth-token"];
    value.command = fields.command.control.value.trim();
    const args = fields.args.control.value.split("\n").map((a) => a.trim()).filter(Boolean);
    if (args.length) value.args = args;
    else delete value.args;
    const vars = env.value();
    if (vars === null) return null;
    if (Object.keys(vars).length) value.env = vars;
    else delete value.env;
  } else {
    delete value.command;
    delete value.args;
    delete value.env;
    value.url = fields.url.control.value.trim();
    const typed = fields.token.control.value.trim();
    if (removeToken && removeToken.control.checked) delete value["auth-token"];
    else if (typed) value["auth-token"] = typed;
    else if (storedToken) value["auth-token"] = MASK;  // the config service keeps the stored one
    else delete value["auth-token"];
  }
  const remote = fields.remote.control.value.trim();
  if (remote) value["remote-name"] = remote;
  else delete value["remote-name"];
  if (fields.sampling.control.checked) value.sampling = true;
  else if ("sampling" in value) value.sampling = false;
  fields.approval.write(value);
  return value;
}


/** Rows of environment variables of a stdio server; stored values are never shown. */
function envEditor(stored, locked) {
  const rows = h("tbody");
  const error = h("p", { class: "field-error", role: "alert", hidden: true });
  const editor = {
    name: "env",
    problem: "",
    el: null,
    showError(text) {
      error.textContent = text || "";
      error.hidden = !text;
    },
    /** {NAME: value}; "***" keeps a stored value; null (with .problem) on a bad row. */
    value() {
      const out = {};
      for (const row of rows.children) {
        const name = row.nameInput.value.trim();
        const typed = row.valueInput.value;
        if (!name) {
          if (typed) {
            editor.problem = "A variable has a value but no name.";
            return null;
          }
          continue;
        }
        if (name in out) {
          editor.problem = `The variable ${name} is given twice.`;
          return null;
        }
        out[name] = typed || (row.stored && row.storedName === name ? MASK : "");
      }
      return out;
    },
  };
  const addRow = (name = "", isStored = false) => {
    const n = rows.children.length + 1;
    const nameInput = h("input", { type: "text", value: name, readonly: locked, spellcheck: "false",
      "aria-label": `Name of variable ${n}` });
    const valueInput = h("input", { type: "password", autocomplete: "new-password", readonly: locked,
      "aria-label": `Value of variable ${n}`,
      placeholder: isStored ? "stored; leave empty to keep" : "" });
    const row = h("tr", {},
      h("td", {}, nameInput),
      h("td", {}, valueInput),
      h("td", {}, locked ? null : h("button", { type: "button", onclick: () => row.remove() },
        `Remove variable ${n}`)));
    Object.assign(row, { nameInput, valueInput, stored: isStored, storedName: name });
    append(rows, row);
    return row;
  };
  for (const name of Object.keys(stored)) addRow(name, true);
  editor.el = h("fieldset", { class: "arguments" },
    h("legend", {}, "Environment"),
    h("p", { class: "hint" }, "Values are secrets: stored ones are never shown; leave a value "
      + "empty to keep it."),
    scroller(h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Name"),
      h("th", { scope: "col" }, "Value"), h("th", {}, ""))), rows)),
    locked ? null : h("button", { type: "button", onclick: () => addRow().nameInput.focus() },
      "Add variable"),
    error);
  return editor;
}

function fail(target, text, note) {
  target.showError(text);
  if (target.control) target.control.focus();
  note.set(`Not saved: ${text}`, "error");
}

/** A failed put: the problem beside the field the config service names, else in the note. */
function showFailure(e, fields, note) {
  const { field: name, problem } = fieldOfError(e.message);
  let target = name ? fields.find((f) => f.dataset?.field === name || f.name === name
    || (f.dataset?.field || f.name) === name.split(/[.[]/)[0]) : null;
  if (!target && /'auth-token'/.test(e.message)) {
    // a kept token refused for a new server: the user has to type it again
    target = fields.find((f) => f.dataset?.field === "auth-token");
  } else if (!target && /'env\./.test(e.message)) {
    target = fields.find((f) => f.name === "env");
  }
  if (target) {
    target.showError(name ? problem : e.message);
    if (target.control) target.control.focus();
    const label = target.querySelector ? target.querySelector("label")?.textContent : "Environment";
    note.set(`Not saved: see ${label || "the field marked"}.`, "error");
  } else {
    note.set(`Not saved: ${e.message}`, "error");
  }
}

function deleteButton(api, key, note) {
  return confirmDelete({
    key, note, question: `Delete the MCP server "${key}"? `,
    remove: () => api.remove(TYPE, key),
    done: () => {
      flash = { text: `Deleted MCP server "${key}".`, kind: "ok" };
      go("mcp");
    },
  });
}

// -- testing the connection ----------------------------------------------------------------

function connectionTest(ctx, key, value) {
  const { api, session } = ctx;
  if (!session.can("tools:invoke")) {
    return h("p", { class: "muted" }, "Testing the connection needs the tools:invoke capability, "
      + "which this token lacks.");
  }
  const out = h("div", {});
  const note = status();
  const run = async () => {
    button.disabled = true;
    replace(out);
    note.set(`Asking the server of "${key}" for its tools…`, "busy");
    try {
      const answer = await api.call("mcp-tool", { name: key, operation: "list-tools" }, { flow: api.flow });
      const tools = JSON.parse(answer.object || "[]");
      const remote = value["remote-name"] || key;
      const has = tools.some((t) => t.name === remote);
      note.set(`Connected: the server lists ${tools.length} tool${tools.length === 1 ? "" : "s"}`
        + (has ? "." : `, but none named "${remote}".`), has ? "ok" : "error");
      replace(out, toolsTable(tools, remote));
    } catch (e) {
      note.set(`Connection failed: ${e.message}`, "error");
    } finally {
      button.disabled = false;
    }
  };
  const button = h("button", { type: "button", onclick: run }, "Test connection");
  return h("section", { "aria-labelledby": "mcp-test-title" },
    h("h3", { id: "mcp-test-title" }, "Connection"),
    h("p", { class: "hint" }, "Tests the saved settings: lists the tools the server offers."),
    button, note, out);
}

function toolsTable(tools, remote) {
  const rows = tools.map((t) => h("tr", { class: t.name === remote ? "selected" : "" },
    h("td", {}, h("code", {}, String(t.name)),
      t.name === remote ? [" ", h("span", { class: "badge ok" }, "this item's tool")] : null),
    h("td", {}, t.description ? String(t.description) : h("span", { class: "muted" }, "no description")),
    h("td", {}, argumentList(t.inputSchema)),
    h("td", {}, hintsBadge(t.annotations))));
  return scroller(h("table", { "aria-label": "Tools on the server" },
    h("thead", {}, h("tr", {}, ["Tool", "Description", "Arguments", "Approval hint"]
      .map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows)));
}

function argumentList(schema) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const names = Object.keys(properties);
  if (!names.length) return h("span", { class: "muted" }, "none");
  return h("ul", {}, names.map((name) => {
    const p = properties[name] || {};
    const type = typeof p.type === "string" ? p.type : (p.type ? pretty(p.type) : "any");
    return h("li", {}, h("code", {}, name), `: ${type}`,
      required.has(name) ? " (required)" : "",
      "default" in p ? ` (default ${JSON.stringify(p.default)})` : "",
      p.description ? ` — ${p.description}` : "");
  }));
}
