// The argument editor of a tool item: rows of {name, type, description, required, enum},
// written in the shape the config service checks (toolmesh.schema.tool_arguments):
// TrustGraph's {name, type, description}, plus "required": true only when the LLM must pass
// it, and "enum" (values of the argument's type) only when some are given. Any other JSON
// Schema keyword a stored argument carries (default, items, minimum...) is kept as it was:
// the editor does not show those, and must not lose them.

import { append, h, replace, scroller, uid } from "../dom.js";

/** JSON Schema type names an argument may declare (tool_arguments.ARGUMENT_TYPES). */
export const ARGUMENT_TYPES = ["string", "number", "integer", "boolean", "object", "array"];

/** JSON Schema keywords about a value the config service accepts on an argument
 * (tool_arguments.VALUE_KEYWORDS), minus those an imported schema could not resolve alone. */
const IMPORTED_KEYWORDS = [
  "enum", "const", "default", "examples", "format", "pattern", "minLength", "maxLength",
  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
  "items", "minItems", "maxItems", "uniqueItems",
  "properties", "additionalProperties", "minProperties", "maxProperties",
];

const ENUM_HINT = "Allowed values: separate them with commas (numbers for number and integer "
  + "arguments, true/false for boolean), or write a JSON array when a value has a comma in it. "
  + "Empty: any value.";

/**
 * An editor for `args` (the item's stored "arguments", or []). locked: read-only.
 * Returns {el, count(), value(), setArguments(list), showError(field, text), clearErrors()}.
 */
export function argumentEditor(args, { locked = false } = {}) {
  const body = h("tbody");
  const empty = h("p", { class: "muted" }, "No arguments.");
  const formError = h("p", { class: "field-error", role: "alert", hidden: true });
  const rows = () => [...body.children];

  const renumber = () => {
    rows().forEach((row, i) => row.label(i + 1, i === 0, i === body.children.length - 1));
    empty.hidden = body.children.length > 0;
  };
  const actions = {
    move(row, step) {
      const sibling = step < 0 ? row.previousElementSibling : row.nextElementSibling;
      if (!sibling) return;
      if (step < 0) body.insertBefore(row, sibling);
      else body.insertBefore(sibling, row);
      renumber();
      // the button pressed may now be disabled (first/last row): keep focus in the row
      const button = step < 0 ? row.upButton : row.downButton;
      (button && !button.disabled ? button : row.nameInput).focus();
    },
    remove(row) {
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      renumber();
      if (next) next.nameInput.focus();
      else addButton?.focus();
    },
  };
  const add = (raw = {}) => {
    const row = argumentRow(raw, locked, actions);
    append(body, row);
    renumber();
    return row;
  };
  const addButton = locked ? null : h("button", { type: "button", onclick: () => add().nameInput.focus() },
    "Add argument");

  const editor = {
    name: "arguments",
    el: h("fieldset", { class: "arguments", dataset: { field: "arguments" } },
      h("legend", {}, "Arguments"),
      h("p", { class: "hint" }, "What the LLM passes when it calls the tool. " + ENUM_HINT),
      scroller(h("table", {},
        h("thead", {}, h("tr", {}, ["Name", "Type", "Description", "Required", "Allowed values", ""]
          .map((t) => h("th", { scope: "col" }, t)))),
        body)),
      empty, addButton, formError),
    /** How many rows the editor has (empty ones too). */
    count: () => body.children.length,
    /**
     * {args, rows} to store: args in the config shape; rows[i] = the row of args[i] (rows
     * left wholly empty are skipped). {problem: {row, control, text}} when a row cannot be
     * read (an allowed-values array that is not JSON).
     */
    value() {
      const out = { args: [], rows: [] };
      for (const row of rows()) {
        if (row.isBlank()) continue;
        const read = row.read();
        if (read.problem) return { problem: { row, ...read.problem } };
        out.args.push(read.argument);
        out.rows.push(row);
      }
      return out;
    },
    /** Replace every row with `list` (config-shaped arguments). */
    setArguments(list) {
      replace(body);
      for (const raw of list) add(raw);
      renumber();
    },
    /** Show `text` for the whole list (field "") or beside a row's control. */
    showError(text, row = null, control = "") {
      if (!row) {
        formError.textContent = text || "";
        formError.hidden = !text;
        return;
      }
      row.showError(control, text);
    },
    clearErrors() {
      editor.showError("");
      rows().forEach((row) => row.clearErrors());
    },
    /** The row a config error's path inside "arguments" names: "[2].type" → row 3, "type". */
    locate(path, sentRows) {
      const found = /^\[(\d+)\](?:\.([^.[]+))?(.*)$/.exec(path || "");
      if (!found) return null;
      const row = sentRows[Number(found[1])];
      if (!row) return null;
      const own = found[2] || "";
      const control = ["name", "type", "description", "required", "enum"].includes(own) ? own : "";
      return { row, control, prefix: control ? "" : `${own}${found[3]}: ` };
    },
  };
  for (const raw of Array.isArray(args) ? args : []) add(raw);
  renumber();
  return editor;
}

/** One row: its controls, the stored argument it edits (other keywords kept), its errors. */
function argumentRow(raw, locked, actions) {
  const original = raw && typeof raw === "object" && !Array.isArray(raw) ? raw : {};
  const type = ARGUMENT_TYPES.includes(original.type) ? original.type : "string";
  const nameInput = h("input", { type: "text", value: str(original.name), readonly: locked,
    spellcheck: "false", autocomplete: "off" });
  const typeSelect = h("select", { disabled: locked },
    ARGUMENT_TYPES.map((t) => h("option", { value: t }, t)));
  typeSelect.value = type;
  const descriptionInput = h("input", { type: "text", value: str(original.description), readonly: locked });
  const requiredBox = h("input", { type: "checkbox", checked: original.required === true, disabled: locked });
  const enumInput = h("input", { type: "text", value: enumText(original.enum, type), readonly: locked,
    spellcheck: "false", autocomplete: "off" });
  const controls = { name: nameInput, type: typeSelect, description: descriptionInput,
    required: requiredBox, enum: enumInput };
  const errors = {};
  const cell = (key, control, extra = null) => {
    const error = h("p", { class: "field-error", id: uid("arg-error"), role: "alert", hidden: true });
    errors[key] = error;
    control.setAttribute("aria-describedby", error.id);
    return h("td", { class: key === "required" ? "narrow" : null }, control, extra, error);
  };
  const kept = keptNote(original);
  const upButton = locked ? null : h("button", { type: "button", onclick: () => actions.move(row, -1) }, "Up");
  const downButton = locked ? null : h("button", { type: "button", onclick: () => actions.move(row, 1) }, "Down");
  const removeButton = locked ? null : h("button", { type: "button", class: "danger",
    onclick: () => actions.remove(row) }, "Remove");
  const row = h("tr", {},
    cell("name", nameInput), cell("type", typeSelect), cell("description", descriptionInput, kept),
    cell("required", requiredBox), cell("enum", enumInput),
    h("td", {}, upButton, " ", downButton, " ", removeButton));

  Object.assign(row, {
    nameInput, upButton, downButton,
    label(n, first, last) {
      nameInput.setAttribute("aria-label", `Name of argument ${n}`);
      typeSelect.setAttribute("aria-label", `Type of argument ${n}`);
      descriptionInput.setAttribute("aria-label", `Description of argument ${n}`);
      requiredBox.setAttribute("aria-label", `Argument ${n} is required`);
      enumInput.setAttribute("aria-label", `Allowed values of argument ${n}`);
      enumInput.setAttribute("title", ENUM_HINT);
      if (locked) return;
      upButton.setAttribute("aria-label", `Move argument ${n} up`);
      downButton.setAttribute("aria-label", `Move argument ${n} down`);
      removeButton.setAttribute("aria-label", `Remove argument ${n}`);
      upButton.disabled = first;
      downButton.disabled = last;
    },
    isBlank() {
      // a row added and left empty is not an argument (the name alone is refused if the
      // rest is filled: the config service says so beside it)
      return !nameInput.value.trim() && !descriptionInput.value.trim() && !enumInput.value.trim()
        && !requiredBox.checked && !hasKeptKeywords(original);
    },
    read() {
      const argument = { ...original };  // keywords this editor does not show are kept
      argument.name = nameInput.value.trim();
      argument.type = typeSelect.value;
      argument.description = descriptionInput.value.trim();
      if (requiredBox.checked) argument.required = true;
      else delete argument.required;
      const values = parseEnum(enumInput.value, typeSelect.value);
      if (values.problem) return { problem: { control: "enum", text: values.problem } };
      if (values.list.length) argument.enum = values.list;
      else delete argument.enum;
      return { argument };
    },
    showError(key, text) {
      const error = errors[key] || errors.description;
      error.textContent = text || "";
      error.hidden = !text;
      const control = controls[key] || descriptionInput;
      if (text) {
        control.setAttribute("aria-invalid", "true");
        control.focus();
      } else {
        control.removeAttribute("aria-invalid");
      }
    },
    clearErrors() {
      for (const key of Object.keys(errors)) row.showError(key, "");
    },
  });
  return row;
}

function str(value) {
  return typeof value === "string" ? value : "";
}

const SHOWN = new Set(["name", "type", "description", "required", "enum"]);

function hasKeptKeywords(raw) {
  return Object.keys(raw).some((k) => !SHOWN.has(k));
}

/** A line naming what a stored argument carries besides the shown fields (kept on save). */
function keptNote(raw) {
  const extra = Object.keys(raw).filter((k) => !SHOWN.has(k));
  if (!extra.length) return null;
  const shown = extra.map((k) => `${k} ${compact(raw[k])}`).join("; ");
  return h("p", { class: "hint muted" }, `Also kept: ${shown}`);
}

function compact(value) {
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

/** A stored enum as the user edits it: "a, b, c", or JSON when commas would not do. */
function enumText(values, type) {
  if (!Array.isArray(values) || !values.length) return "";
  const plain = values.every((v) => {
    if (type === "string") return typeof v === "string" && !v.includes(",") && v.trim() === v && v !== "";
    if (type === "number" || type === "integer") return typeof v === "number";
    if (type === "boolean") return typeof v === "boolean";
    return false;
  });
  return plain ? values.map(String).join(", ") : JSON.stringify(values);
}

/** The enum the user wrote: {list} or {problem}. Values of other types than the argument's
 * are passed on as written: the config service says which one does not fit. */
function parseEnum(text, type) {
  const trimmed = text.trim();
  if (!trimmed) return { list: [] };
  if (trimmed.startsWith("[")) {
    try {
      const list = JSON.parse(trimmed);
      if (Array.isArray(list)) return { list };
    } catch {
      // reported below
    }
    return { problem: "starts with [ but is not a JSON array; write values separated by commas, "
      + "or a JSON array such as [\"a, b\", \"c\"]" };
  }
  const parts = trimmed.split(",").map((p) => p.trim()).filter((p) => p !== "");
  return { list: parts.map((p) => typed(p, type)) };
}

function typed(text, type) {
  if (type === "string") return text;
  if ((type === "number" || type === "integer") && /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) {
    return Number(text);
  }
  if (type === "boolean" && (text === "true" || text === "false")) return text === "true";
  if (type === "object" || type === "array") {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

/**
 * Arguments in the config shape from an MCP tool's inputSchema: each property becomes a row
 * (its type, description, enum and the value keywords the config service accepts), required
 * when the schema's "required" lists it.
 */
export function argumentsFromSchema(schema) {
  const properties = schema && typeof schema.properties === "object" && schema.properties
    ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  return Object.entries(properties).map(([name, property]) => {
    const p = property && typeof property === "object" ? property : {};
    const argument = { name, type: schemaType(p), description: str(p.description) };
    if (required.has(name)) argument.required = true;
    for (const keyword of IMPORTED_KEYWORDS) {
      if (keyword in p) argument[keyword] = p[keyword];
    }
    return argument;
  });
}

/** An argument type for a property schema: its type, the first non-null of a list of types
 * (Optional[int] is ["integer", "null"] or anyOf), else string. */
function schemaType(p) {
  const candidates = [];
  if (typeof p.type === "string") candidates.push(p.type);
  else if (Array.isArray(p.type)) candidates.push(...p.type);
  for (const alternative of [...(p.anyOf || []), ...(p.oneOf || [])]) {
    if (alternative && typeof alternative.type === "string") candidates.push(alternative.type);
  }
  return candidates.find((t) => ARGUMENT_TYPES.includes(t)) || "string";
}
