// Building the page from data. Text always becomes a text node: nothing a server, a config
// item or a user wrote is ever parsed as HTML, so it cannot run as code (with the page's CSP
// as the second wall). There is no innerHTML anywhere in the Workbench.

/**
 * Make an element: h("button", {class: "primary", onclick: save}, "Save").
 * props: attributes; `on<event>` functions become listeners; `class` may be an array;
 * `dataset` an object; boolean attributes (disabled, required, checked...) are set when true;
 * `value` is set as the property. children: nodes, strings (as text), numbers, arrays;
 * null, undefined and false are skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = Array.isArray(value) ? value.filter(Boolean).join(" ") : value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "value") {
      el.value = value;
    } else if (name === "checked" || name === "selected") {
      el[name] = Boolean(value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

/**
 * The parts that are there: null, undefined, false and "" are left out, arrays flattened.
 * Every optional part of a card or a row goes through this (h() and append() use it): the
 * DOM's own Element.append writes a null as the text "null", so no script calls it directly.
 */
export function present(...parts) {
  return parts.flat(Infinity).filter((p) => p !== null && p !== undefined && p !== false && p !== "");
}

/** The parts that are there (see present), with `separator` between them: a phrase of
 * optional pieces, e.g. joined(", ", dialogLink, step && `step ${step}`). */
export function joined(separator, ...parts) {
  return present(...parts).flatMap((p, i) => (i ? [separator, p] : [p]));
}

/** Append children (see h) to el: text as text nodes; the missing ones (see present) left out. */
export function append(el, ...children) {
  for (const child of present(children)) {
    // the DOM's own append: only ever given a node here
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace el's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A table that scrolls sideways inside its card when the screen is narrower than it (the
 * page itself never does). */
export function scroller(table) {
  return h("div", { class: "table-scroll" }, table);
}

let ids = 0;
/** A page-unique id for label/aria wiring. */
export function uid(prefix = "f") {
  ids += 1;
  return `${prefix}-${ids}`;
}

/**
 * A labelled form field with a slot for its error, shown beside it.
 * control: an input/select/textarea element (given an id here); name: the config field it
 * edits (errors from the config service are matched to it by this name); hint: help text.
 * Returns the wrapper; wrapper.control is the control, wrapper.showError(text) shows a
 * problem (or clears it with "").
 */
export function field(label, control, { name = "", hint = "" } = {}) {
  const id = control.id || uid();
  control.id = id;
  const error = h("p", { class: "field-error", id: `${id}-error`, role: "alert", hidden: true });
  const help = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  const described = [help && `${id}-hint`, `${id}-error`].filter(Boolean).join(" ");
  control.setAttribute("aria-describedby", described);
  const wrapper = h("div", { class: "field", dataset: { field: name } },
    h("label", { for: id }, label), control, help, error);
  wrapper.control = control;
  wrapper.showError = (text) => {
    error.textContent = text || "";
    error.hidden = !text;
    if (text) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  };
  return wrapper;
}

/** A <select> of options: [value, label] pairs or plain strings. */
export function select(options, { value = "", ...props } = {}) {
  const el = h("select", props, options.map((o) => {
    const [v, text] = Array.isArray(o) ? o : [o, o];
    return h("option", { value: v }, text);
  }));
  el.value = value;
  return el;
}

/** A status line (role=status: screen readers announce it). kind: "", "ok", "error", "busy". */
export function status(text = "", kind = "") {
  const el = h("p", { class: ["status", kind], role: "status" }, text);
  el.set = (t, k = "") => {
    el.textContent = t;
    el.className = ["status", k].filter(Boolean).join(" ");
  };
  return el;
}

/** Pretty JSON text of a value (for <pre> views). */
export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

/** A labelled checkbox: field() with the box before its label, as people expect of one. */
export function checkbox(label, checked, disabled, name) {
  const box = h("input", { type: "checkbox", name, checked, disabled });
  const wrapper = field(label, box, { name });
  wrapper.classList.add("inline");
  wrapper.insertBefore(box, wrapper.firstChild);
  return wrapper;
}

/**
 * A "Delete" button that asks first: `question` beside "Yes, delete KEY" and "Keep it".
 * Yes awaits `remove()`; a failure goes to `note`, success to `done()`.
 */
export function confirmDelete({ key, question, remove, note, done }) {
  const holder = h("span", {});
  const ask = h("button", { type: "button", class: "danger", onclick: () => {
    const yes = h("button", { type: "button", class: "danger", onclick: async () => {
      note.set("Deleting…", "busy");
      try {
        await remove();
      } catch (e) {
        note.set(`Not deleted: ${e.message}`, "error");
        return;
      }
      done();
    } }, `Yes, delete ${key}`);
    const no = h("button", { type: "button", onclick: () => { replace(holder, ask); ask.focus(); } },
      "Keep it");
    replace(holder, h("span", {}, question), yes, " ", no);
    yes.focus();
  } }, "Delete");
  append(holder, ask);
  return holder;
}
