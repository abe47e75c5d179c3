// Prompts: the workspace's prompt templates (config type `prompt`, TrustGraph's layout:
// `template.<id>` items and the `system` item), edited as text with a rendered preview.
// The preview asks the prompt service to render the text being edited (`operation: render`)
// without calling the LLM, so what is shown is exactly what the LLM would be sent. Reads of
// type `prompt` include the shipped templates, so a fresh workspace lists them too.

import { ApiError, fieldOfError } from "../api.js";
import { append, h, field, pretty, replace, scroller, select, status } from "../dom.js";

const TYPE = "prompt";
const SYSTEM_KEY = "system";
const INDEX_KEY = "template-index";
const PREFIX = "template.";
const NEW = "new";

/** The templates among the `prompt` items: [{id, key, value}] by id. A `template.<id>` key
 * wins over toolmesh's older alias key `<id>`, as the prompt service reads them. */
function templatesOf(items) {
  const byId = new Map();
  for (const { key, value } of items) {
    if (key === SYSTEM_KEY || key === INDEX_KEY) continue;
    const id = key.startsWith(PREFIX) ? key.slice(PREFIX.length) : key;
    if (!id) continue;
    const alias = !key.startsWith(PREFIX);
    if (alias && byId.has(id)) continue;
    byId.set(id, { id, key, alias, value: value && typeof value === "object" ? value : {} });
  }
  return [...byId.values()].sort((a, b) => a.id.localeCompare(b.id));
}

/** The variable names a template seems to use: a hint for the variables box, no parser.
 * Names bound by `for` or `set` inside the template are left out. */
export function variableNames(...texts) {
  const used = new Set();
  const bound = new Set(["loop", "true", "false", "none", "True", "False", "None"]);
  for (const text of texts) {
    for (const m of text.matchAll(/\{\{-?\s*([A-Za-z_]\w*)/g)) used.add(m[1]);
    for (const m of text.matchAll(/\{%-?\s*(?:if|elif)\s+(?:not\s+)?([A-Za-z_]\w*)/g)) used.add(m[1]);
    for (const m of text.matchAll(/\{%-?\s*for\s+([\w\s,]+?)\s+in\s+([A-Za-z_]\w*)/g)) {
      for (const name of m[1].split(",")) bound.add(name.trim());
      used.add(m[2]);
    }
    for (const m of text.matchAll(/\{%-?\s*set\s+([A-Za-z_]\w*)/g)) bound.add(m[1]);
  }
  return [...used].filter((n) => !bound.has(n));
}

/** Which editor field a template error is about: the prompt service says "syntax error in
 * prompt at line 3" or "system cannot be compiled". */
function fieldOfTemplateError(message) {
  const found = /(?:syntax error in |: )(prompt|system)\b(?: at line| cannot be compiled)/.exec(message);
  if (found) return found[1];
  if (/response-type/.test(message)) return "response-type";
  return "";
}

export async function render({ api, session }) {
  const route = location.hash.replace(/^#\/?/, "").split("/").slice(1).join("/");
  const selected = route ? decodeURIComponent(route) : "";
  const items = await api.values(TYPE);
  const templates = templatesOf(items);
  const system = items.find((i) => i.key === SYSTEM_KEY);
  const systemText = typeof system?.value === "string" ? system.value : "";

  const page = h("div", { class: "prompts" }, h("h1", {}, "Prompts"));
  if (!session.canWrite) {
    append(page, h("p", { class: "read-only-note" },
      "This token can only read the configuration: templates are shown read-only.",
      session.can("agent") ? " Preview renders the stored template." : ""));
  }
  const current = selected === NEW && session.canWrite ? null
    : templates.find((t) => t.id === selected) || null;
  const editing = selected === NEW && session.canWrite ? { id: "", key: "", value: {}, fresh: true }
    : current;
  append(page, h("div", { class: "columns" },
    h("div", {},
      listPanel(templates, editing, session),
      systemPanel(api, session, systemText)),
    editing ? editorPanel(api, session, editing, systemText, templates)
      : h("section", { class: "panel", "aria-label": "Template" },
        h("p", { class: "muted" }, selected && selected !== NEW
          ? `There is no template ${JSON.stringify(selected)} in this workspace.`
          : "Choose a template to view or edit it."))));
  return page;
}

function listPanel(templates, editing, session) {
  const rows = templates.map((t) => h("tr", { class: editing && editing.key === t.key ? "selected" : "" },
    h("td", {}, h("a", { href: `#/prompts/${encodeURIComponent(t.id)}`,
      "aria-current": editing && editing.key === t.key ? "page" : false }, t.id),
    t.alias ? h("span", { class: "badge warn", title: `stored under the older key ${t.key}` }, " alias") : ""),
    h("td", {}, h("span", { class: "badge" }, t.value["response-type"] || "text"))));
  return h("section", { class: "panel", "aria-labelledby": "templates-title" },
    h("div", { class: "toolbar" },
      h("h2", { id: "templates-title" }, "Templates"),
      h("span", { class: "spacer" }),
      session.canWrite ? h("button", { type: "button",
        onclick: () => { location.hash = `#/prompts/${NEW}`; } }, "New template") : null),
    templates.length
      ? scroller(h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Id"), h("th", {}, "Response"))),
        h("tbody", {}, rows)))
      : h("p", { class: "muted" }, "No templates."));
}

/** The workspace's system prompt: sent with every template that has none of its own. */
function systemPanel(api, session, text) {
  const area = h("textarea", { class: "code", rows: 4, value: text, readonly: !session.canWrite,
    spellcheck: "false" });
  const systemField = field("Workspace system prompt", area, { name: "system",
    hint: "Sent with every template that has no system prompt of its own. Empty: none." });
  const note = status();
  const save = async () => {
    systemField.showError("");
    note.set("Checking…", "busy");
    // stored as given, a system prompt that does not compile would only be logged by the
    // prompt service: compile it here first (rendering it under a throwaway prompt)
    try {
      await api.call("prompt", { operation: "render", variables: {},
        template: { prompt: ".", system: area.value || " " } }, { flow: api.flow });
    } catch (e) {
      if (fieldOfTemplateError(e.message) === "system") {
        systemField.showError(e.message);
        note.set(`Not saved: ${e.message}`, "error");
        return;
      }
    }
    note.set("Saving…", "busy");
    try {
      // the item is JSON text of a string, as tg-set-prompt --system writes it
      await api.put([{ type: TYPE, key: SYSTEM_KEY, value: JSON.stringify(area.value) }]);
      note.set("System prompt saved.", "ok");
    } catch (e) {
      note.set(`Not saved: ${e.message}`, "error");
    }
  };
  return h("section", { class: "panel", "aria-labelledby": "system-title" },
    h("h2", { id: "system-title" }, "System prompt"),
    systemField,
    session.canWrite ? h("button", { type: "button", onclick: save }, "Save system prompt") : null,
    note);
}

function editorPanel(api, session, template, systemText, templates) {
  const value = template.value;
  const fresh = Boolean(template.fresh);
  const readOnly = !session.canWrite;
  const idInput = h("input", { type: "text", value: template.id, readonly: !fresh || readOnly,
    required: true, spellcheck: "false", autocomplete: "off" });
  const prompt = h("textarea", { class: "code", rows: 12, value: value.prompt || "",
    readonly: readOnly, spellcheck: "false" });
  const own = h("textarea", { class: "code", rows: 4, value: value.system || "", readonly: readOnly,
    spellcheck: "false" });
  const type = select([["text", "text"], ["json", "json"]],
    { value: value["response-type"] || "text", disabled: readOnly });
  const names = variableNames(value.prompt || "", value.system || systemText);
  const variables = h("textarea", { class: "code", rows: 5, spellcheck: "false",
    value: pretty(Object.fromEntries(names.map((n) => [n, ""]))) });
  const fields = {
    id: field("Template id", idInput, { name: "id",
      hint: fresh ? "Stored as prompt/template.<id>; the id prompt tools and the agent name." : "" }),
    prompt: field("Prompt", prompt, { name: "prompt",
      hint: "Jinja2 text: {{ name }} puts in a variable; a missing variable is an error." }),
    system: field("System prompt of this template", own, { name: "system",
      hint: "Empty: the workspace's system prompt applies." }),
    "response-type": field("Response type", type, { name: "response-type",
      hint: "json: the LLM's answer must hold a JSON value." }),
    variables: field("Variables (JSON object)", variables, { name: "variables",
      hint: "Values to render the preview with. Prefilled with the names the template seems to use." }),
  };
  const note = status();
  const output = h("div", { class: "preview", "aria-live": "polite" });

  const showError = (message) => {
    const name = fieldOfTemplateError(message);
    if (name && fields[name]) fields[name].showError(message);
  };
  const clearErrors = () => Object.values(fields).forEach((f) => f.showError(""));
  /** The draft as the item's value: the fields we do not edit (schema, id) kept. */
  const draft = () => {
    const out = { ...value, prompt: prompt.value, "response-type": type.value };
    if (own.value) out.system = own.value;
    else delete out.system;
    return out;
  };
  const parseVariables = () => {
    let parsed;
    try {
      parsed = JSON.parse(variables.value || "{}");
    } catch (e) {
      throw new ApiError("bad-variables", `not JSON: ${e.message}`);
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new ApiError("bad-variables", "must be a JSON object of {name: value}");
    }
    return parsed;
  };

  const preview = async () => {
    clearErrors();
    let vars;
    try {
      vars = parseVariables();
    } catch (e) {
      fields.variables.showError(`Variables ${e.message}`);
      note.set("Preview not rendered: the variables are not a JSON object.", "error");
      return;
    }
    // A token that may write templates renders the text being edited; one that may only
    // run the agent renders the stored template (the gateway refuses it a draft).
    const body = session.canWrite
      ? { operation: "render", template: draft(), variables: vars }
      : { operation: "render", id: template.id, variables: vars };
    if (session.canWrite && !fresh) body.id = template.id;
    note.set("Rendering…", "busy");
    try {
      const rendered = await api.call("prompt", body, { flow: api.flow });
      replace(output,
        h("h3", {}, "System"),
        rendered.system ? h("pre", { "aria-label": "Rendered system prompt" }, rendered.system)
          : h("p", { class: "muted" }, "No system prompt."),
        h("h3", {}, "Prompt"), h("pre", { "aria-label": "Rendered prompt" }, rendered.prompt || ""));
      note.set("Rendered (the LLM was not called).", "ok");
    } catch (e) {
      replace(output);
      showError(e.message);
      note.set(`Preview failed: ${e.message}`, "error");
    }
  };

  const save = async () => {
    clearErrors();
    const id = idInput.value.trim();
    if (fresh && !id) {
      fields.id.showError("An id is required.");
      note.set("Not saved: the template needs an id.", "error");
      return;
    }
    if (fresh && templates.some((t) => t.id === id)) {
      fields.id.showError(`There is a template ${JSON.stringify(id)} already; open it to edit it.`);
      note.set("Not saved: that id is taken.", "error");
      return;
    }
    if (!prompt.value.trim()) {
      fields.prompt.showError("The prompt is required.");
      note.set("Not saved: the prompt is empty.", "error");
      return;
    }
    note.set("Checking…", "busy");
    // The config service stores prompt items as given and the prompt service would only log
    // a broken one: render it first so a syntax error is refused here, beside its field.
    try {
      await api.call("prompt", { operation: "render", template: draft(), variables: {} },
        { flow: api.flow });
    } catch (e) {
      if (fieldOfTemplateError(e.message) && !/undefined/.test(e.message)) {
        showError(e.message);
        note.set(`Not saved: ${e.message}`, "error");
        return;
      }
      // a missing variable is expected here; anything else the save will say
    }
    note.set("Saving…", "busy");
    const key = fresh ? `${PREFIX}${id}` : template.key;
    try {
      await api.put([{ type: TYPE, key, value: draft() }]);
    } catch (e) {
      const { field: name, problem } = fieldOfError(e.message);
      if (name && fields[name]) fields[name].showError(problem);
      note.set(`Not saved: ${e.message}`, "error");
      return;
    }
    if (fresh) {
      location.hash = `#/prompts/${encodeURIComponent(id)}`;
      return;
    }
    note.set(`Saved ${TYPE}/${key}.`, "ok");
  };

  const remove = async () => {
    if (!window.confirm(`Delete the template ${template.id}?`)) return;
    note.set("Deleting…", "busy");
    try {
      await api.remove(TYPE, template.key);
    } catch (e) {
      note.set(`Not deleted: ${e.message}`, "error");
      return;
    }
    location.hash = "#/prompts";
  };

  const canPreview = session.canWrite || (session.can("agent") && !fresh);
  const previewButton = h("button", { type: "button", onclick: preview, disabled: !canPreview },
    "Preview");
  const reason = canPreview ? null
    : h("p", { class: "hint" }, "Preview needs the 'agent' capability (or 'config:write' for a draft).");
  return h("section", { class: "panel", "aria-labelledby": "editor-title" },
    h("h2", { id: "editor-title" }, fresh ? "New template" : `Template ${template.id}`),
    h("form", { onsubmit: (event) => { event.preventDefault(); if (!readOnly) save(); } },
      fields.id, fields.prompt, fields.system, fields["response-type"], fields.variables,
      h("div", { class: "toolbar" },
        previewButton,
        h("span", { class: "spacer" }),
        readOnly ? null : h("button", { type: "submit", class: "primary" }, fresh ? "Create" : "Save"),
        readOnly || fresh ? null : h("button", { type: "button", class: "danger", onclick: remove }, "Delete")),
      reason,
      note),
    output);
}
