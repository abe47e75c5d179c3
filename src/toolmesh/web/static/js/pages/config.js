// Config: the workspace's raw config as the gateway shows it (secrets masked as ***), with
// export to a JSON file of {type: {key: value}} and import of such a file in one put — the
// config service validates the whole put and stores all of it or nothing.

import { fieldOfError } from "../api.js";
import { append, h, field, pretty, status } from "../dom.js";

/** The items of an import: [{type, key, value}], or an Error saying what is wrong. */
export function itemsOf(text) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return new Error(`not JSON: ${e.message}`);
  }
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  if (!isObject(parsed)) return new Error("must be a JSON object of {type: {key: value}}");
  const items = [];
  for (const [type, entries] of Object.entries(parsed)) {
    if (!isObject(entries)) return new Error(`${JSON.stringify(type)} must be an object of {key: value}`);
    for (const [key, value] of Object.entries(entries)) {
      // every value as JSON text, strings too (the export parsed them from JSON text: a
      // prompt's system item is JSON text of a string)
      items.push({ type, key, value: JSON.stringify(value) });
    }
  }
  if (!items.length) return new Error("holds no items");
  return items;
}

/** Save `text` as a file named `name`: a Blob behind an object URL and a temporary link
 * (the CSP allows this; navigating to a data: URL it would not). */
function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  const link = h("a", { href: url, download: name, hidden: true });
  append(document.body, link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export async function render({ api, session }) {
  const page = h("div", { class: "config" }, h("h1", {}, "Config"));
  if (!session.can("config:read")) {
    append(page, h("p", { class: "read-only-note" },
      "This token cannot read the configuration: it lacks the 'config:read' capability."));
    return page;
  }
  if (!session.canWrite) {
    append(page, h("p", { class: "read-only-note" },
      "This token can only read the configuration: export only, no import."));
  }
  const view = h("pre", { "aria-label": "Workspace config", tabindex: "0" });
  const summary = h("p", { class: "muted" });
  const note = status();
  let current = { version: 0, config: {} };

  const load = async () => {
    current = await api.configAll();
    const count = Object.values(current.config).reduce((n, items) => n + Object.keys(items).length, 0);
    summary.textContent = `Workspace ${api.workspace}: ${count} items, version ${current.version}.`;
    view.textContent = pretty(current.config);
  };
  await load();

  const exportFile = () => {
    download(`toolmesh-config-${api.workspace}-v${current.version}.json`, `${pretty(current.config)}\n`);
    note.set("Exported. Secrets are in the file as ***.", "ok");
  };
  const reload = async () => {
    note.set("Reloading…", "busy");
    try {
      await load();
      note.set("Reloaded.", "ok");
    } catch (e) {
      note.set(`Cannot reload: ${e.message}`, "error");
    }
  };

  append(page, h("section", { class: "panel", "aria-labelledby": "raw-title" },
    h("div", { class: "toolbar" },
      h("h2", { id: "raw-title" }, "Raw config"),
      h("span", { class: "spacer" }),
      h("button", { type: "button", onclick: reload }, "Reload"),
      h("button", { type: "button", class: "primary", onclick: exportFile }, "Export")),
    summary,
    h("p", { class: "hint" }, "Secrets are shown and exported as ***. Only stored items are "
      + "here: the shipped prompt templates a workspace has not changed are not (the Prompts "
      + "page shows them)."),
    note,
    view));
  if (session.canWrite) append(page, importPanel(api, reload));
  return page;
}

function importPanel(api, reload) {
  const file = h("input", { type: "file", accept: "application/json,.json" });
  const text = h("textarea", { class: "code", rows: 10, spellcheck: "false",
    placeholder: '{"tool": {"my-tool": {"type": "…"}}}' });
  const fileField = field("Config file", file, {
    hint: "A file Export wrote, or any JSON object {type: {key: value}}. Its text is put below." });
  const textField = field("Config to import (JSON)", text, { name: "import",
    hint: "Every item is put at once; if one is refused, none is stored. An item whose secret "
      + "is *** keeps the secret stored under its key (a key with none stored gets none)." });
  const note = status();

  file.addEventListener("change", async () => {
    const chosen = file.files[0];
    if (!chosen) return;
    try {
      text.value = await chosen.text();
      note.set(`Read ${chosen.name}; check it, then Import.`, "");
    } catch (e) {
      note.set(`Cannot read ${chosen.name}: ${e.message}`, "error");
    }
  });

  const submit = async (event) => {
    event.preventDefault();
    textField.showError("");
    const items = itemsOf(text.value);
    if (items instanceof Error) {
      textField.showError(`The import ${items.message}.`);
      note.set("Nothing imported.", "error");
      return;
    }
    note.set(`Importing ${items.length} items…`, "busy");
    try {
      const answer = await api.put(items);
      note.set(`Imported ${items.length} items (version ${answer.version ?? "?"}).`, "ok");
    } catch (e) {
      const { field: name } = fieldOfError(e.message);
      textField.showError(name ? `Refused: ${e.message}` : "");
      note.set(`Nothing imported: ${e.message}`, "error");
      return;
    }
    await reload();
  };

  return h("section", { class: "panel", "aria-labelledby": "import-title" },
    h("h2", { id: "import-title" }, "Import"),
    h("form", { onsubmit: submit }, fileField, textField,
      h("div", { class: "toolbar" }, h("button", { type: "submit", class: "primary" }, "Import")),
      note));
}
