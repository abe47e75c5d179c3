// Tools: a tool-service tool's config parameters — the fields its service's descriptor
// names (`config-params`), stored as top-level keys of the tool item; secrets write-only.

import { field, h, replace } from "../dom.js";

/** What the gateway shows for a stored secret (and takes back as "keep the stored one"). */
export const MASK = "***";

/** Whether a config field called `name` holds a secret (urls.is_secret_name): the gateway
 * shows its stored value as ***. */
function isSecretName(name) {
  const n = name.trim().toLowerCase().replaceAll("-", "_");
  return ["token", "key", "api_key", "apikey", "secret", "password", "passwd", "pwd", "sig",
    "signature", "access_token", "auth_token", "refresh_token", "id_token", "client_secret",
    "private_key", "credentials", "auth"].includes(n)
    || ["_token", "_key", "_secret", "_password", "_apikey"].some((s) => n.endsWith(s));
}

/**
 * The chosen tool service's config-params as fields (top-level keys of the tool item).
 * Values typed survive switching services back and forth.
 */
export function paramsPart(choices, original, locked) {
  const el = h("div", {});
  const typed = new Map();
  let current = [];
  const part = {
    el,
    fields: () => current.map((c) => c.wrapper),
    /** [{name, required, secret, stored, wrapper}] of the service shown. */
    params: () => current,
    show(serviceId) {
      for (const c of current) typed.set(c.name, c.wrapper.control.value);
      const descriptor = choices.services.find((s) => s.key === serviceId)?.value;
      const list = descriptor && Array.isArray(descriptor["config-params"]) ? descriptor["config-params"] : [];
      current = list.filter((p) => p && typeof p.name === "string" && p.name).map((p) => param(p));
      let intro = null;
      if (serviceId && !descriptor) {
        intro = h("p", { class: "hint" }, "This service's descriptor is not configured here, so its "
          + "config parameters are not known; fields of this item it needs are kept as stored.");
      } else if (descriptor && !current.length) {
        intro = h("p", { class: "hint" }, "This service takes no config parameters.");
      }
      replace(el, intro, current.length ? h("fieldset", {}, h("legend", {}, "Service config"),
        current.map((c) => c.wrapper)) : null);
    },
  };
  const param = (p) => {
    const stored = original[p.name];
    const secret = isSecretName(p.name) || stored === MASK;
    const storedSecret = secret && stored !== undefined && stored !== "";
    let value = typed.has(p.name) ? typed.get(p.name) : textOf(stored);
    if (secret && value === MASK) value = "";  // the mask is not a value to edit
    const control = h("input", { type: secret ? "password" : "text", name: p.name, value,
      readonly: locked, autocomplete: secret ? "new-password" : "off", spellcheck: "false",
      required: p.required === true,
      placeholder: storedSecret ? "stored; leave empty to keep" : "" });
    const hint = [p.required === true ? "Required by the service." : "Optional.",
      storedSecret ? "A value is stored; leave empty to keep it." : "",
      stored !== undefined && typeof stored !== "string" && !secret ? "Stored as JSON." : ""]
      .filter(Boolean).join(" ");
    const wrapper = field(p.required === true ? `${p.name} (required)` : p.name, control,
      { name: p.name, hint });
    return { name: p.name, required: p.required === true, secret, storedSecret, stored, wrapper };
  };
  return part;
}

export function textOf(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

